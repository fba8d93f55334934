package kvm

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const mountinfoV1 = `25 1 0:23 / /sys/fs/cgroup rw - tmpfs tmpfs rw,mode=755
26 25 0:24 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
27 25 0:25 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
28 25 0:26 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
29 25 0:27 / /mnt/odd\040dir rw - cgroup cgroup rw,pids
`

func TestParseMountinfo(t *testing.T) {
	l := parseMountinfo(mountinfoV1, func(string) string { return "" })
	if l.V2 != "" || l.V1["cpu"] != "/sys/fs/cgroup/cpu" || l.V1["memory"] != "/sys/fs/cgroup/memory" {
		t.Errorf("v1 layout %+v", l)
	}
	l = parseMountinfo(mountinfoV1, func(m string) string {
		if m == "/sys/fs/cgroup/unified" {
			return "cpuset cpu io memory pids\n"
		}
		return ""
	})
	if l.V2 != "/sys/fs/cgroup/unified" {
		t.Errorf("v2 with memory and cpu not chosen: %+v", l)
	}
	if got := unescapeMount(`/mnt/odd\040dir`); got != "/mnt/odd dir" {
		t.Errorf("unescape = %q", got)
	}
}

// FuzzParseMountinfo checks the parser never panics and only reports mount
// points that appear in its input.
func FuzzParseMountinfo(f *testing.F) {
	f.Add(mountinfoV1)
	f.Add("1 2 3 4 /x - cgroup2 c rw\n")
	f.Add(" - \n\\")
	f.Fuzz(func(t *testing.T, s string) {
		l := parseMountinfo(s, func(string) string { return "memory cpu" })
		for _, m := range append([]string{l.V2}, l.V1["cpu"], l.V1["memory"]) {
			if m != "" && !strings.Contains(s, m) && !strings.Contains(s, `\`) {
				t.Fatalf("mount %q not in input", m)
			}
		}
	})
}

func fakeCgroupHV(t *testing.T, mountinfo string) *Hypervisor {
	t.Helper()
	mi := filepath.Join(t.TempDir(), "mountinfo")
	if err := os.WriteFile(mi, []byte(mountinfo), 0o600); err != nil {
		t.Fatal(err)
	}
	h, err := New(Options{RunDir: shortDir(t), StateDir: t.TempDir(), CgroupMountinfo: mi})
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func readTrim(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

func TestPlaceInCgroupsV1(t *testing.T) {
	root := t.TempDir()
	for _, c := range []string{"cpu", "memory"} {
		if err := os.Mkdir(filepath.Join(root, c), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	h := fakeCgroupHV(t, "26 25 0:24 / "+root+"/cpu rw - cgroup cgroup rw,cpu\n27 25 0:25 / "+root+"/memory rw - cgroup cgroup rw,memory\n")
	dirs, err := h.placeInCgroups(testUUID, 4242, 256, 2)
	if err != nil {
		t.Fatal(err)
	}
	mem, cpu := filepath.Join(root, "memory", "corral", "6f1c2a3b"), filepath.Join(root, "cpu", "corral", "6f1c2a3b")
	if len(dirs) != 2 || dirs[0] != mem || dirs[1] != cpu {
		t.Fatalf("dirs %v", dirs)
	}
	if got := readTrim(t, filepath.Join(mem, "memory.limit_in_bytes")); got != "838860800" { // (256+512+32) MiB
		t.Errorf("memory limit %s", got)
	}
	if readTrim(t, filepath.Join(cpu, "cpu.cfs_quota_us")) != "200000" || readTrim(t, filepath.Join(cpu, "cpu.cfs_period_us")) != "100000" {
		t.Errorf("cpu limits wrong")
	}
	for _, d := range dirs {
		if readTrim(t, filepath.Join(d, "cgroup.procs")) != "4242" {
			t.Errorf("%s: pid not placed", d)
		}
	}
	if err := h.removeCgroups(dirs); err != nil {
		t.Fatal(err)
	}
	for _, d := range dirs {
		if _, err := os.Stat(d); !os.IsNotExist(err) {
			t.Errorf("%s left: %v", d, err)
		}
	}
}

func TestPlaceInCgroupsV2(t *testing.T) {
	root := t.TempDir()
	if err := os.WriteFile(filepath.Join(root, "cgroup.controllers"), []byte("cpu io memory pids\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	h := fakeCgroupHV(t, "30 1 0:26 / "+root+" rw - cgroup2 cgroup2 rw\n")
	dirs, err := h.placeInCgroups(testUUID, 4242, 1024, 1)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(root, "corral", "6f1c2a3b")
	if len(dirs) != 1 || dirs[0] != dir {
		t.Fatalf("dirs %v", dirs)
	}
	if readTrim(t, filepath.Join(dir, "cpu.max")) != "100000 100000" || readTrim(t, filepath.Join(dir, "cgroup.procs")) != "4242" {
		t.Errorf("v2 files wrong")
	}
	if readTrim(t, filepath.Join(root, "corral", "cgroup.subtree_control")) != "+memory +cpu" {
		t.Errorf("controllers not delegated")
	}
}

func TestPlaceInCgroupsUnavailable(t *testing.T) {
	h := fakeCgroupHV(t, "28 25 0:26 / /nonexistent rw - cgroup2 cgroup2 rw\n")
	if _, err := h.placeInCgroups(testUUID, 4242, 64, 1); err == nil || !strings.Contains(err.Error(), "no memory and cpu controllers") {
		t.Fatalf("err = %v", err)
	}
}
