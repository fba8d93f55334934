package kvm

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/corral/corral/internal/ecode"
	"github.com/corral/corral/internal/hypervisor"
	"github.com/corral/corral/internal/uidpool"
)

func TestBuildCommandConfinement(t *testing.T) {
	tests := []struct {
		name    string
		hv      map[string]string
		rt      func(*Runtime)
		want    [][]string
		notWant []string
	}{
		{
			name:    "pool uid, chroot and sandbox (qemu 7)",
			hv:      map[string]string{"security_model": "pool", "use_chroot": "true"},
			rt:      func(rt *Runtime) { rt.RunAs, rt.Sandbox = "2000:2000", true },
			want:    [][]string{{"-runas", "2000:2000"}, {"-chroot", "/run/c/6f1c2a3b/chroot"}, {"-sandbox", "on,obsolete=deny"}},
			notWant: []string{"-run-with"},
		},
		{
			name:    "pool uid with run-with (qemu 9)",
			hv:      map[string]string{"security_model": "pool", "use_chroot": "true"},
			rt:      func(rt *Runtime) { rt.RunAs, rt.RunWith = "2001:2001", true },
			want:    [][]string{{"-run-with", "user=2001:2001,chroot=/run/c/6f1c2a3b/chroot"}},
			notWant: []string{"-runas", "-chroot", "-sandbox"},
		},
		{
			name:    "chroot only with run-with",
			hv:      map[string]string{"use_chroot": "true"},
			rt:      func(rt *Runtime) { rt.RunAs, rt.RunWith = "", true },
			want:    [][]string{{"-run-with", "chroot=/run/c/6f1c2a3b/chroot"}},
			notWant: []string{"-runas", "-chroot"},
		},
		{
			name:    "no sandbox without seccomp",
			rt:      func(rt *Runtime) { rt.Sandbox = false },
			want:    [][]string{{"-runas", "corral-qemu"}},
			notWant: []string{"-sandbox", "-chroot"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rt := testRuntime()
			tt.rt(&rt)
			argv, err := BuildCommand(testSpec(tt.hv), rt)
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range tt.want {
				if !hasSeq(argv, w...) {
					t.Errorf("argv lacks %q: %q", w, argv)
				}
			}
			for _, n := range tt.notWant {
				if slices.Contains(argv, n) {
					t.Errorf("argv has %s: %q", n, argv)
				}
			}
		})
	}
}

func TestHelpHasSandbox(t *testing.T) {
	if !helpHasSandbox("x\n-sandbox on[,obsolete=allow|deny]\n") {
		t.Error("sandbox line not found")
	}
	if helpHasSandbox("-runas user\n   -sandbox is not here\n") {
		t.Error("sandbox found in the middle of a line")
	}
}

func requireRootTest(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("handing run directories to pool uids needs root")
	}
}

func poolSpec(t *testing.T, name, uuid string, pool uidpool.Pool) hypervisor.InstanceSpec {
	s := fakeSpec(t, name, uuid)
	s.HVParams["security_model"] = "pool"
	s.HVParams["use_chroot"] = "true"
	s.UIDPool = pool
	return s
}

const testUUID2 = "7a2b3c4d-5e6f-4a70-8b9c-0d1e2f3a4b5c"

func TestPoolUIDsAreDistinctAndReleased(t *testing.T) {
	requireRootTest(t)
	ctx := context.Background()
	e := newEnv(t, fakeModeNormal)
	// Uids far above any real user, with no process running under them.
	pool, _ := uidpool.Parse("3999000-3999001")
	a, b := poolSpec(t, "vma", testUUID, pool), poolSpec(t, "vmb", testUUID2, pool)

	// The node asks first (to hand disks and taps over), Start agrees.
	ida, err := e.h.Identity(ctx, a)
	if err != nil || !ida.Pool || ida.UID != 3999000 || ida.Name != "3999000:3999000" {
		t.Fatalf("Identity(a) = %+v, %v", ida, err)
	}
	if err := e.h.Start(ctx, a); err != nil {
		t.Fatal(err)
	}
	if err := e.h.Start(ctx, b); err != nil {
		t.Fatal(err)
	}
	ia, _ := e.h.Info(ctx, "vma")
	ib, _ := e.h.Info(ctx, "vmb")
	if ia == nil || ib == nil || ia.Confinement == nil || ib.Confinement == nil {
		t.Fatalf("Info = %+v, %+v", ia, ib)
	}
	if ia.Confinement.UID != 3999000 || ib.Confinement.UID != 3999001 {
		t.Fatalf("uids %d and %d, want 3999000 and 3999001", ia.Confinement.UID, ib.Confinement.UID)
	}
	ca := ia.Confinement
	if ca.SecurityModel != "pool" || ca.User != "3999000:3999000" || ca.Chroot != filepath.Join(e.opts.RunDir, dirChroots, testUUID[:8]) {
		t.Errorf("confinement %+v", ca)
	}
	if st, err := os.Stat(ca.Chroot); err != nil || st.Mode().Perm() != 0o700 {
		t.Errorf("chroot dir: %v %v", st, err)
	}
	if !strings.Contains(ca.CgroupError, "turned off") {
		t.Errorf("cgroup error %q", ca.CgroupError)
	}
	argv := e.h.lastArgv(t, a)
	if !hasSeq(argv, "-runas", "3999000:3999000") || !hasSeq(argv, "-chroot", ca.Chroot) {
		t.Errorf("qemu argv %q", argv)
	}

	// Exhausted: a third instance gets a clear error and leaves nothing.
	c := poolSpec(t, "vmc", "8b3c4d5e-6f70-4b81-9cad-1e2f3a4b5c6d", pool)
	err = e.h.Start(ctx, c)
	if ecode.ClassOf(err) != ecode.NoRes || !strings.Contains(err.Error(), "no free uid in the pool 3999000-3999001: 2 instances use them") {
		t.Fatalf("third start: %v", err)
	}
	if r, _ := e.h.loadRecord("vmc"); r != nil {
		t.Errorf("record left by a start that found no uid")
	}

	// Stop gives the uid back, and removes the jail.
	if err := e.h.Stop(ctx, "vma", 0, true); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(ca.Chroot); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("chroot left after stop: %v", err)
	}
	if err := e.h.Start(ctx, c); err != nil {
		t.Fatalf("start after a uid was released: %v", err)
	}
	ic, _ := e.h.Info(ctx, "vmc")
	if ic == nil || ic.Confinement.UID != 3999000 {
		t.Fatalf("vmc confinement %+v", ic)
	}
}

// lastArgv reads the running fake qemu's command line.
func (h *Hypervisor) lastArgv(t *testing.T, spec hypervisor.InstanceSpec) []string {
	t.Helper()
	r, pid, err := h.find(spec.Name)
	if err != nil || r == nil || pid == 0 {
		t.Fatalf("instance %s not running: %v", spec.Name, err)
	}
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimRight(string(data), "\x00"), "\x00")
}

func TestFailedStartReleasesPoolUID(t *testing.T) {
	requireRootTest(t)
	ctx := context.Background()
	e := newEnv(t, fakeModeFail)
	pool, _ := uidpool.Parse("3999010")
	spec := poolSpec(t, "broken", testUUID, pool)
	if err := e.h.Start(ctx, spec); err == nil {
		t.Fatal("start of a failing qemu succeeded")
	}
	if _, held, _ := e.h.uidAllocator().Lookup(testUUID); held {
		t.Fatal("a failed start kept its pool uid")
	}
	if _, err := os.Stat(e.h.chrootDir(testUUID)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("chroot left after a failed start: %v", err)
	}
	// An identity taken by the node and then given up is released too.
	if _, err := e.h.Identity(ctx, spec); err != nil {
		t.Fatal(err)
	}
	if err := e.h.ReleaseIdentity(testUUID); err != nil {
		t.Fatal(err)
	}
	if _, held, _ := e.h.uidAllocator().Lookup(testUUID); held {
		t.Fatal("ReleaseIdentity kept the uid")
	}
}

func TestChrootQuarantine(t *testing.T) {
	h, err := New(Options{RunDir: shortDir(t), StateDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	dir := h.chrootDir(testUUID)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "left-behind"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := h.prepareChroot("vm", dir); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(dir)
	if st, _ := os.Stat(dir); err != nil || len(entries) != 0 || st.Mode().Perm() != 0o700 {
		t.Fatalf("jail not empty 0700 after prepare: %v %v", entries, err)
	}
	q, _ := filepath.Glob(filepath.Join(h.opts.RunDir, dirQuarantine, testUUID[:8]+"-*", "left-behind"))
	if len(q) != 1 {
		t.Fatalf("quarantined content not found: %v", q)
	}
	// An empty jail is simply removed.
	if err := h.removeChroot("vm", dir); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("empty jail not removed: %v", err)
	}
}
