package kvm

import (
	"bufio"
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/corral/corral/internal/ecode"
	"github.com/corral/corral/internal/hypervisor"
)

// shortDir is a fresh directory with a short path, for unix sockets.
func shortDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "crl")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// unprivilegedUser is a user the fake qemu can be told to switch to: the
// driver refuses to leave qemu as root.
func unprivilegedUser() string {
	if os.Geteuid() == 0 {
		return "nobody"
	}
	return ""
}

type env struct {
	opts Options
	h    *Hypervisor
}

func newEnv(t *testing.T, mode string) *env {
	t.Helper()
	opts := Options{RunDir: shortDir(t), StateDir: t.TempDir(), QemuBinary: fakeQemuBinary(t, mode), RunAsUser: unprivilegedUser(),
		CgroupMountinfo: "none"} // never touch the machine's cgroups
	h, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	e := &env{opts: opts, h: h}
	t.Cleanup(func() { // never leave a fake qemu behind
		list, _ := h.List(context.Background())
		for _, ri := range list {
			_ = h.Stop(context.Background(), ri.Name, 0, true)
		}
	})
	return e
}

func fakeSpec(t *testing.T, name, uuid string) hypervisor.InstanceSpec {
	t.Helper()
	disk := filepath.Join(t.TempDir(), "disk0")
	if err := os.WriteFile(disk, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(disk, 1<<20); err != nil {
		t.Fatal(err)
	}
	return hypervisor.InstanceSpec{Name: name, UUID: uuid, MemoryMiB: 64, VCPUs: 1,
		HVParams: map[string]string{"kernel_path": "/nonexistent/vmlinuz"},
		Disks:    []hypervisor.DiskSpec{{Index: 0, Path: disk, SizeMiB: 1}},
	}
}

func TestLifecycleWithFakeQemu(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, fakeModeNormal)
	spec := fakeSpec(t, "inst1.example", testUUID)
	if err := e.h.Start(ctx, spec); err != nil {
		t.Fatal(err)
	}
	info, err := e.h.Info(ctx, spec.Name)
	if err != nil || info == nil {
		t.Fatalf("Info = %v, %v", info, err)
	}
	if info.State != hypervisor.StateRunning || info.UUID != testUUID || info.PID <= 0 || info.MemoryMiB != 64 {
		t.Fatalf("Info = %+v", info)
	}
	pid := info.PID
	if !processIsInstance(pid, testUUID) {
		t.Fatal("reported pid is not the instance's process")
	}
	// Start is idempotent for the same uuid and refuses another.
	if err := e.h.Start(ctx, spec); err != nil {
		t.Fatalf("second Start: %v", err)
	}
	if again, _ := e.h.Info(ctx, spec.Name); again == nil || again.PID != pid {
		t.Fatalf("second Start changed the process: %+v", again)
	}
	other := spec
	other.UUID = "00000000-1111-2222-3333-444444444444"
	if err := e.h.Start(ctx, other); ecode.ClassOf(err) != ecode.Exists {
		t.Fatalf("Start with another uuid: %v", err)
	}

	logPath := e.h.ConsoleLog(spec.Name)
	data, err := os.ReadFile(logPath)
	if err != nil || !strings.Contains(string(data), "FAKE-GUEST-BOOTED uuid="+testUUID) {
		t.Fatalf("console log %s = %q, %v", logPath, data, err)
	}
	con, err := e.h.Console(ctx, spec.Name)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.WriteString(con, "ping\n"); err != nil {
		t.Fatal(err)
	}
	if line, err := bufio.NewReader(con).ReadString('\n'); err != nil || line != "ping\n" {
		t.Fatalf("console echo = %q, %v", line, err)
	}
	con.Close()
	if err := e.h.Reboot(ctx, spec.Name); err != nil {
		t.Fatalf("Reboot: %v", err)
	}

	// A new driver on the same directories, as after a node daemon restart.
	h2, err := New(e.opts)
	if err != nil {
		t.Fatal(err)
	}
	list, err := h2.List(ctx)
	if err != nil || len(list) != 1 || list[0].Name != spec.Name || list[0].PID != pid {
		t.Fatalf("List after restart = %+v, %v", list, err)
	}
	res, err := h2.NodeInfo(ctx)
	if err != nil || res.Hypervisor != "kvm" || res.CPUs != runtime.NumCPU() || res.MemoryTotalMiB <= 0 || res.MemoryFreeMiB > res.MemoryTotalMiB {
		t.Fatalf("NodeInfo = %+v, %v", res, err)
	}

	if err := h2.Stop(ctx, spec.Name, 10*time.Second, false); err != nil {
		t.Fatal(err)
	}
	if processIsInstance(pid, testUUID) {
		t.Fatal("qemu still runs after Stop")
	}
	runDir := filepath.Join(e.opts.RunDir, testUUID[:8])
	if _, err := os.Stat(runDir); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("run dir left after Stop: %v", err)
	}
	if _, err := os.Stat(filepath.Join(e.opts.StateDir, spec.Name+".json")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("record left after Stop: %v", err)
	}
	if info, err := e.h.Info(ctx, spec.Name); info != nil || err != nil {
		t.Fatalf("Info after Stop = %+v, %v", info, err)
	}
	if err := e.h.Stop(ctx, spec.Name, time.Second, false); err != nil {
		t.Fatalf("Stop of a stopped instance: %v", err)
	}
	if err := e.h.Reboot(ctx, spec.Name); ecode.ClassOf(err) != ecode.State {
		t.Fatalf("Reboot of a stopped instance: %v", err)
	}
	if _, err := e.h.Console(ctx, spec.Name); ecode.ClassOf(err) != ecode.State {
		t.Fatalf("Console of a stopped instance: %v", err)
	}
	if p := e.h.ConsoleLog(spec.Name); p != "" {
		t.Fatalf("ConsoleLog of a stopped instance = %q", p)
	}
}

func TestStopKillsGuestThatIgnoresPowerdown(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, fakeModeStubborn)
	spec := fakeSpec(t, "stubborn", testUUID)
	if err := e.h.Start(ctx, spec); err != nil {
		t.Fatal(err)
	}
	info, _ := e.h.Info(ctx, spec.Name)
	if info == nil {
		t.Fatal("not running after Start")
	}
	if err := e.h.Stop(ctx, spec.Name, 300*time.Millisecond, false); err != nil {
		t.Fatal(err)
	}
	if processIsInstance(info.PID, testUUID) {
		t.Fatal("qemu survived Stop")
	}
}

func TestForceStop(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, fakeModeStubborn)
	spec := fakeSpec(t, "forced", testUUID)
	if err := e.h.Start(ctx, spec); err != nil {
		t.Fatal(err)
	}
	info, _ := e.h.Info(ctx, spec.Name)
	// An hour of grace would fail the test if force were not honoured.
	if err := e.h.Stop(ctx, spec.Name, time.Hour, true); err != nil {
		t.Fatal(err)
	}
	if info == nil || processIsInstance(info.PID, testUUID) {
		t.Fatalf("force Stop did not kill qemu (%+v)", info)
	}
}

func TestStartFailureCleansUp(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, fakeModeFail)
	spec := fakeSpec(t, "broken", testUUID)
	err := e.h.Start(ctx, spec)
	ee, ok := ecode.As(err)
	if !ok || ee.Kind != ecode.HypervisorError || !strings.Contains(ee.Msg, "Could not open") {
		t.Fatalf("Start error = %#v", err)
	}
	if _, err := os.Stat(filepath.Join(e.opts.RunDir, testUUID[:8])); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("run dir left after a failed start: %v", err)
	}
	if _, err := os.Stat(filepath.Join(e.opts.StateDir, spec.Name+".json")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("record left after a failed start: %v", err)
	}
}

func TestStartChecks(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, fakeModeNormal)
	big := fakeSpec(t, "big", testUUID)
	big.MemoryMiB = 1 << 40
	if err := e.h.Start(ctx, big); ecode.ClassOf(err) != ecode.NoRes {
		t.Fatalf("Start beyond memory: %v", err)
	}
	bad := fakeSpec(t, "bad", testUUID)
	bad.HVParams["nic_type"] = "virtio"
	if err := e.h.Start(ctx, bad); ecode.ClassOf(err) != ecode.Inval {
		t.Fatalf("Start with bad params: %v", err)
	}
	missing := fakeSpec(t, "nodisk", testUUID)
	missing.Disks[0].Path = "/nonexistent/disk"
	if err := e.h.Start(ctx, missing); ecode.ClassOf(err) != ecode.Environ {
		t.Fatalf("Start with a missing disk: %v", err)
	}
	opts := e.opts
	opts.QemuBinary = "/nonexistent/qemu-system-x86_64"
	h, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Start(ctx, fakeSpec(t, "noqemu", testUUID)); ecode.ClassOf(err) != ecode.Environ {
		t.Fatalf("Start without qemu: %v", err)
	}
	if list, _ := e.h.List(ctx); len(list) != 0 {
		t.Fatalf("failed starts left instances: %+v", list)
	}
}

func TestDirectIOFallback(t *testing.T) {
	shm, err := os.MkdirTemp("/dev/shm", "crl")
	if err != nil {
		t.Skip("no writable tmpfs at /dev/shm")
	}
	t.Cleanup(func() { os.RemoveAll(shm) })
	disk := filepath.Join(shm, "disk0")
	if err := os.WriteFile(disk, make([]byte, 4096), 0o600); err != nil {
		t.Fatal(err)
	}
	if direct, err := supportsDirectIO(disk); err != nil || direct {
		t.Skipf("tmpfs here accepts O_DIRECT (%v), nothing to fall back from", err)
	}
	ctx := context.Background()
	e := newEnv(t, fakeModeNormal)
	spec := fakeSpec(t, "shm", testUUID)
	spec.Disks[0].Path = disk
	if err := e.h.Start(ctx, spec); err != nil {
		t.Fatal(err)
	}
	info, _ := e.h.Info(ctx, spec.Name)
	if info == nil {
		t.Fatal("not running")
	}
	cmdline, _ := os.ReadFile("/proc/" + strconv.Itoa(info.PID) + "/cmdline")
	if !strings.Contains(string(cmdline), "file="+disk+",format=raw,if=none,id=drive0,cache=writeback") {
		t.Fatalf("qemu command line lacks the writeback fallback: %q", cmdline)
	}
}

// A pid file that names an unrelated live process (a reused pid) must never
// make the driver report, or kill, that process.
func TestForeignPIDIsNotTrusted(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, fakeModeNormal)
	rec := &record{
		Spec:      hypervisor.InstanceSpec{Name: "ghost", UUID: testUUID, MemoryMiB: 64, VCPUs: 1},
		Dir:       filepath.Join(e.opts.RunDir, testUUID[:8]),
		StartedAt: time.Now().Add(-time.Hour),
	}
	if err := os.Mkdir(rec.Dir, 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(rec.path(filePID), []byte(strconv.Itoa(os.Getpid())), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := e.h.saveRecord(rec); err != nil {
		t.Fatal(err)
	}
	if info, err := e.h.Info(ctx, "ghost"); info != nil || err != nil {
		t.Fatalf("Info = %+v, %v", info, err)
	}
	// The stale record is collected.
	if list, err := e.h.List(ctx); len(list) != 0 || err != nil {
		t.Fatalf("List = %+v, %v", list, err)
	}
	if _, err := os.Stat(rec.Dir); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("stale run dir not collected: %v", err)
	}
	// And Stop of such a record does not signal the process (we are alive to
	// check).
	if err := e.h.saveRecord(rec); err != nil {
		t.Fatal(err)
	}
	if err := e.h.Stop(ctx, "ghost", time.Second, true); err != nil {
		t.Fatal(err)
	}
}

// A qemu that exits on its own (guest poweroff, crash) disappears from List
// and its leftovers are removed, but not while a start may be in progress.
func TestExitedQemuIsCollected(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, fakeModeNormal)
	spec := fakeSpec(t, "crashy", testUUID)
	if err := e.h.Start(ctx, spec); err != nil {
		t.Fatal(err)
	}
	info, _ := e.h.Info(ctx, spec.Name)
	if info == nil {
		t.Fatal("not running")
	}
	if err := syscall.Kill(info.PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if gone, err := waitGone(ctx, info.PID, testUUID, 10*time.Second); !gone || err != nil {
		t.Fatalf("killed qemu did not go away: %v", err)
	}
	if list, _ := e.h.List(ctx); len(list) != 0 {
		t.Fatalf("List shows a dead instance: %+v", list)
	}
	rec, err := e.h.loadRecord(spec.Name)
	if err != nil || rec == nil {
		t.Fatalf("young record collected too early: %v", err)
	}
	rec.StartedAt = time.Now().Add(-time.Hour)
	if err := e.h.saveRecord(rec); err != nil {
		t.Fatal(err)
	}
	if list, _ := e.h.List(ctx); len(list) != 0 {
		t.Fatalf("List = %+v", list)
	}
	if rec, _ := e.h.loadRecord(spec.Name); rec != nil {
		t.Fatal("record of an exited qemu not collected")
	}
	// The name can be started again.
	if err := e.h.Start(ctx, spec); err != nil {
		t.Fatalf("restart after crash: %v", err)
	}
}

func TestNewOptions(t *testing.T) {
	long := filepath.Join(t.TempDir(), strings.Repeat("d", 90))
	if _, err := New(Options{RunDir: long, StateDir: t.TempDir()}); err == nil {
		t.Fatal("accepted a run dir too long for socket paths")
	}
	if _, err := New(Options{StateDir: t.TempDir()}); err == nil {
		t.Fatal("accepted an empty run dir")
	}
	h, err := New(Options{RunDir: shortDir(t), StateDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if h.Name() != "kvm" || h.opts.QemuBinary != "qemu-system-x86_64" {
		t.Fatalf("defaults: %+v", h.opts)
	}
	if os.Geteuid() == 0 && h.opts.RunAsUser != DefaultRunAsUser {
		t.Fatalf("root without RunAsUser runs qemu as %q", h.opts.RunAsUser)
	}
	if err := h.ValidateParams(map[string]string{"acpi": "nope"}); ecode.ClassOf(err) != ecode.Inval {
		t.Fatalf("ValidateParams: %v", err)
	}
}

// Two uuids with the same first 8 characters would share a run directory.
func TestRunDirCollision(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, fakeModeNormal)
	a := fakeSpec(t, "a", "6f1c2a3b-0000-4000-8000-000000000001")
	b := fakeSpec(t, "b", "6f1c2a3b-0000-4000-8000-000000000002")
	if err := e.h.Start(ctx, a); err != nil {
		t.Fatal(err)
	}
	if err := e.h.Start(ctx, b); ecode.ClassOf(err) != ecode.Exists {
		t.Fatalf("Start into a live instance's run dir: %v", err)
	}
	if info, _ := e.h.Info(ctx, "a"); info == nil {
		t.Fatal("the failed start disturbed the running instance")
	}
	// Once a's qemu is dead (and its start long past), b may take the dir.
	info, _ := e.h.Info(ctx, "a")
	if err := syscall.Kill(info.PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if gone, _ := waitGone(ctx, info.PID, a.UUID, 10*time.Second); !gone {
		t.Fatal("qemu of a did not die")
	}
	rec, _ := e.h.loadRecord("a")
	rec.StartedAt = time.Now().Add(-time.Hour)
	if err := e.h.saveRecord(rec); err != nil {
		t.Fatal(err)
	}
	if err := e.h.Start(ctx, b); err != nil {
		t.Fatal(err)
	}
	if rec, _ := e.h.loadRecord("a"); rec != nil {
		t.Fatal("the dead holder's record was kept")
	}
	if list, _ := e.h.List(ctx); len(list) != 1 || list[0].Name != "b" {
		t.Fatalf("List = %+v", list)
	}
}
