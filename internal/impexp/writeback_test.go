package impexp

import (
	"bytes"
	"crypto/rand"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// pageCache reports how many of a file's pages are dirty or under
// writeback (cachestat, Linux 6.5). It skips the test where that cannot be
// known: an older kernel, or tmpfs, whose pages never go to a disk.
func pageCache(t *testing.T, path string) (dirty, writeback uint64) {
	t.Helper()
	var fs unix.Statfs_t
	if err := unix.Statfs(path, &fs); err != nil {
		t.Fatal(err)
	}
	if fs.Type == unix.TMPFS_MAGIC {
		t.Skip("tmpfs: no disk to write back to")
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var st unix.Cachestat_t
	if err := unix.Cachestat(uint(f.Fd()), &unix.CachestatRange{}, &st, 0); err != nil {
		if errors.Is(err, unix.ENOSYS) {
			t.Skip("no cachestat on this kernel")
		}
		t.Fatal(err)
	}
	return st.Dirty, st.Writeback
}

// eventually polls cond for up to 10 s.
func eventually(cond func() bool) bool {
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		if cond() {
			return true
		}
	}
	return cond()
}

// A WritebackFile hands completed chunks to the disk while it is written
// and leaves nothing dirty after Sync; it writes from the file's offset.
func TestWritebackFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "disk")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	head := []byte("kept")
	if _, err := f.Write(head); err != nil {
		t.Fatal(err)
	}
	data := make([]byte, 4*writebackChunk+12345)
	rand.Read(data)
	w, err := NewWritebackFile(f)
	if err != nil {
		t.Fatal(err)
	}
	for p := data; len(p) > 0; {
		n, err := w.Write(p[:min(len(p), 1<<20-7)])
		if err != nil {
			t.Fatal(err)
		}
		p = p[n:]
	}
	// Without a sync, the kernel would keep these pages dirty for 30 s.
	pages := uint64(len(data)) / uint64(os.Getpagesize())
	if !eventually(func() bool { d, _ := pageCache(t, path); return d < pages/2 }) {
		d, wb := pageCache(t, path)
		t.Errorf("before Sync: %d of %d pages still dirty (%d under writeback): no background writeback", d, pages, wb)
	}
	if err := w.Sync(); err != nil {
		t.Fatal(err)
	}
	if d, wb := pageCache(t, path); d != 0 || wb != 0 {
		t.Errorf("after Sync: %d pages dirty, %d under writeback", d, wb)
	}
	w.Abandon() // harmless after Sync
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, append(head, data...)) {
		t.Error("the file differs from what was written")
	}
}

// A DiskWriteback makes what another writer put into a file durable.
func TestDiskWriteback(t *testing.T) {
	path := filepath.Join(t.TempDir(), "disk")
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	d, err := StartDiskWriteback(path)
	if err != nil {
		t.Fatal(err)
	}
	data := make([]byte, 3*writebackChunk)
	rand.Read(data)
	// In place, as an import script's dd conv=notrunc writes (ext4 starts
	// the writeback of a file truncated and rewritten by itself).
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	pages := uint64(len(data)) / uint64(os.Getpagesize())
	if !eventually(func() bool { n, _ := pageCache(t, path); return n < pages/2 }) {
		n, _ := pageCache(t, path)
		t.Errorf("while writing: %d of %d pages still dirty: no background writeback", n, pages)
	}
	if err := d.Finish(); err != nil {
		t.Fatal(err)
	}
	if n, wb := pageCache(t, path); n != 0 || wb != 0 {
		t.Errorf("after Finish: %d pages dirty, %d under writeback", n, wb)
	}

	// Abandon stops without an error, even on a file that is gone.
	d, err = StartDiskWriteback(path)
	if err != nil {
		t.Fatal(err)
	}
	os.Remove(path)
	d.Abandon()
	if _, err := StartDiskWriteback(path); err == nil {
		t.Error("a writeback of a missing file started")
	}
}
