package storage

import (
	"math"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// statvfsMiB is the test's own reading of dir's file system, in MiB
// rounded as Ganeti rounds.
func statvfsMiB(t *testing.T, dir string) (size, free int64) {
	t.Helper()
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	return int64(math.RoundToEven(float64(st.Blocks) * float64(st.Frsize) / (1 << 20))),
		int64(math.RoundToEven(float64(st.Bavail) * float64(st.Frsize) / (1 << 20)))
}

func TestMeasureDir(t *testing.T) {
	dir := t.TempDir()
	// 3 MiB + 0.75 MiB of apparent size: a sparse image counts whole.
	if err := os.MkdirAll(filepath.Join(dir, "inst1"), 0o750); err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(filepath.Join(dir, "inst1", "disk0.raw"))
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(3 << 20); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if err := os.WriteFile(filepath.Join(dir, "small"), make([]byte, 3<<18), 0o600); err != nil {
		t.Fatal(err)
	}
	// A link to a directory is not walked nor counted.
	if err := os.Symlink(filepath.Join(dir, "inst1"), filepath.Join(dir, "again")); err != nil {
		t.Fatal(err)
	}
	u, err := MeasureDir(dir, true, false)
	if err != nil {
		t.Fatal(err)
	}
	size, free := statvfsMiB(t, dir)
	if u.SizeMiB != size {
		t.Errorf("size %d MiB, statvfs says %d", u.SizeMiB, size)
	}
	// Other writers share the file system: free may move a little.
	if d := u.FreeMiB - free; d < -64 || d > 64 {
		t.Errorf("free %d MiB, statvfs says %d", u.FreeMiB, free)
	}
	if u.UsedMiB != 4 { // 3.75 MiB rounds to 4
		t.Errorf("used %d MiB, want 4", u.UsedMiB)
	}
	if u, err := MeasureDir(dir, false, false); err != nil || u.UsedMiB != 0 {
		t.Errorf("without used: %+v %v", u, err)
	}
	// A directory not made yet: its parent's file system, or an error.
	missing := filepath.Join(dir, "not", "yet")
	if u, err := MeasureDir(missing, true, true); err != nil || u.SizeMiB != size || u.UsedMiB != 0 {
		t.Errorf("missing, measured on the parent: %+v %v", u, err)
	}
	if _, err := MeasureDir(missing, true, false); err == nil {
		t.Error("a missing directory measured")
	}
	for _, bad := range []string{"", "rel/dir", dir + "/../x"} {
		if _, err := MeasureDir(bad, false, true); err == nil {
			t.Errorf("%q measured", bad)
		}
	}
}

func TestBytesToMiBRoundsAsGaneti(t *testing.T) {
	for b, want := range map[uint64]int64{0: 0, 1<<19 - 1: 0, 1 << 19: 0, 3 << 19: 2, 1<<20 + 1<<19 + 1: 2, 5 << 20: 5} {
		if got := bytesToMiB(b); got != want {
			t.Errorf("bytesToMiB(%d) = %d, want %d", b, got, want)
		}
	}
}
