package kvm

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/corral/corral/internal/hypervisor"
)

const sampleMeminfo = `MemTotal:       24683620 kB
MemFree:        20000000 kB
MemAvailable:   22000000 kB
Buffers:          100000 kB
Cached:          1500000 kB
SwapTotal:             0 kB
`

func TestParseMeminfo(t *testing.T) {
	m, err := parseMeminfo([]byte(sampleMeminfo))
	if err != nil {
		t.Fatal(err)
	}
	if m.TotalKiB != 24683620 || m.AvailableKiB != 22000000 {
		t.Fatalf("got %+v", m)
	}
	old := "MemTotal: 1000 kB\nMemFree: 100 kB\nBuffers: 20 kB\nCached: 30 kB\n"
	if m, err := parseMeminfo([]byte(old)); err != nil || m.AvailableKiB != 150 {
		t.Fatalf("without MemAvailable: %+v, %v", m, err)
	}
	if _, err := parseMeminfo([]byte("MemFree: 1 kB\n")); err == nil {
		t.Fatal("accepted meminfo without MemTotal")
	}
	real, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		t.Skip("no /proc/meminfo")
	}
	if m, err := parseMeminfo(real); err != nil || m.TotalKiB <= 0 || m.AvailableKiB > m.TotalKiB {
		t.Fatalf("this machine's meminfo: %+v, %v", m, err)
	}
}

func TestNodeResources(t *testing.T) {
	mi := meminfo{TotalKiB: 8 << 20, AvailableKiB: 6 << 20} // 8 GiB, 6 GiB available
	// Two guests promised 1 GiB each, having touched 256 MiB between them.
	res := nodeResources(mi, 2<<20, 256<<10, 4)
	want := hypervisor.NodeResources{MemoryTotalMiB: 8192, MemoryFreeMiB: 6144 + 256 - 2048, MemoryNodeMiB: 8192 - 6144 - 256, CPUs: 4, Hypervisor: "kvm"}
	if res != want {
		t.Fatalf("got %+v, want %+v", res, want)
	}
	// Overcommitted: free never goes negative.
	if res := nodeResources(meminfo{TotalKiB: 1 << 20, AvailableKiB: 1 << 10}, 4<<20, 0, 1); res.MemoryFreeMiB != 0 {
		t.Fatalf("overcommitted free = %d", res.MemoryFreeMiB)
	}
}

func TestParseProcStatus(t *testing.T) {
	data := "Name:\tqemu-system-x86\nUid:\t999\t999\t999\t999\nGid:\t998\t998\t998\t998\nVmRSS:\t  220000 kB\n"
	st, err := parseProcStatus([]byte(data))
	if err != nil || st.UID != 999 || st.RSSKiB != 220000 {
		t.Fatalf("got %+v, %v", st, err)
	}
	if _, err := parseProcStatus([]byte("Name:\tx\n")); err == nil {
		t.Fatal("accepted status without Uid")
	}
	self, err := readProcStatus(os.Getpid())
	if err != nil || self.UID != os.Getuid() || self.RSSKiB <= 0 {
		t.Fatalf("own status: %+v, %v", self, err)
	}
}

func TestCmdlineHasUUID(t *testing.T) {
	cmd := []byte("qemu-system-x86_64\x00-name\x00a\x00-uuid\x00" + testUUID + "\x00-m\x00128\x00")
	if !cmdlineHasUUID(cmd, testUUID) {
		t.Fatal("uuid not found")
	}
	if cmdlineHasUUID(cmd, "00000000-0000-0000-0000-000000000000") {
		t.Fatal("other uuid matched")
	}
	if cmdlineHasUUID([]byte("x\x00-name\x00"+testUUID+"\x00"), testUUID) {
		t.Fatal("uuid without -uuid matched")
	}
	if cmdlineHasUUID(nil, testUUID) {
		t.Fatal("empty (zombie) command line matched")
	}
	if processIsInstance(os.Getpid(), testUUID) {
		t.Fatal("the test process was taken for an instance")
	}
}

func TestReadPIDFile(t *testing.T) {
	dir := t.TempDir()
	for content, ok := range map[string]bool{"1234\n": true, "0": false, "-5": false, "abc": false, "": false} {
		p := filepath.Join(dir, "pid")
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		pid, err := readPIDFile(p)
		if (err == nil) != ok || ok && pid != 1234 {
			t.Errorf("%q: pid %d, err %v", content, pid, err)
		}
	}
}

func TestStateFromQMP(t *testing.T) {
	for status, want := range map[string]hypervisor.State{
		"running": hypervisor.StateRunning, "paused": hypervisor.StatePaused, "inmigrate": hypervisor.StatePaused,
		"shutdown": hypervisor.StateStopped, "guest-panicked": hypervisor.StateCrashed, "internal-error": hypervisor.StateCrashed,
	} {
		if got := stateFromQMP(status); got != want {
			t.Errorf("%s: %s, want %s", status, got, want)
		}
	}
}

func FuzzParseMeminfo(f *testing.F) {
	f.Add([]byte(sampleMeminfo))
	f.Add([]byte("MemTotal: 10 kB\nMemAvailable: 99 kB\n"))
	f.Add([]byte("MemTotal:\nMemFree: -1 kB\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := parseMeminfo(data)
		if err != nil {
			return
		}
		if m.TotalKiB <= 0 || m.AvailableKiB < 0 || m.AvailableKiB > m.TotalKiB {
			t.Fatalf("inconsistent %+v from %q", m, data)
		}
	})
}

func FuzzParseProcStatus(f *testing.F) {
	f.Add([]byte("Uid:\t0\t0\t0\t0\nVmRSS:\t10 kB\n"))
	f.Add([]byte("Uid:\nVmRSS: x\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		st, err := parseProcStatus(data)
		if err == nil && (st.UID < 0 || st.RSSKiB < 0) {
			t.Fatalf("negative values %+v from %q", st, data)
		}
	})
}
