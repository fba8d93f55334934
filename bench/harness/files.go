package harness

import (
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
)

// WriteDataFile writes size bytes to path (created or truncated) and syncs
// it: random data (a fixed-seed ChaCha8 stream, incompressible and the same
// every time) or zeros, written as data, not as a hole. It then reads the
// file back once, so that every run finds it in the page cache.
func WriteDataFile(path string, size int64, random bool) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	buf := make([]byte, 1<<20)
	rng := rand.NewChaCha8([32]byte{'c', 'o', 'r', 'r', 'a', 'l'})
	for left := size; left > 0; {
		n := min(left, int64(len(buf)))
		if random {
			_, _ = rng.Read(buf[:n])
		}
		if _, err := f.Write(buf[:n]); err != nil {
			f.Close()
			return err
		}
		left -= n
	}
	// Synced, so that no timed case pays for this file's writeback.
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	f, err = os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = io.Copy(io.Discard, f)
	return err
}

// PrimeMemory writes size zero bytes to path in 1 MiB blocks and deletes
// the file. On a virtual machine that hands memory the guest freed back to
// the host (as this one does), page-cache pages taken from long-free memory
// cost a host fault each: a 1 GiB write in 1 MiB blocks right after writes
// in small blocks ran at 0.7 GB/s here instead of 3.4 GB/s, which charged
// whichever case wrote large blocks first for the memory's history rather
// than for its own work. Writing and freeing the same amount just before a
// run gives every case the same recently used memory.
func PrimeMemory(path string, size int64) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	buf := make([]byte, 1<<20)
	for left := size; left > 0; left -= int64(len(buf)) {
		if _, err := f.Write(buf[:min(left, int64(len(buf)))]); err != nil {
			f.Close()
			return err
		}
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Remove(path)
}

// SameContent fails unless the two files hold the same bytes.
func SameContent(a, b string) error {
	fa, err := os.Open(a)
	if err != nil {
		return err
	}
	defer fa.Close()
	fb, err := os.Open(b)
	if err != nil {
		return err
	}
	defer fb.Close()
	ba, bb := make([]byte, 1<<20), make([]byte, 1<<20)
	var off int64
	for {
		na, ea := io.ReadFull(fa, ba)
		nb, eb := io.ReadFull(fb, bb)
		if na != nb || !bytes.Equal(ba[:na], bb[:nb]) {
			return fmt.Errorf("%s differs from %s in the MiB at offset %d (%d and %d bytes read)", b, a, off, na, nb)
		}
		off += int64(na)
		endA := ea == io.EOF || ea == io.ErrUnexpectedEOF
		endB := eb == io.EOF || eb == io.ErrUnexpectedEOF
		switch {
		case endA && endB:
			return nil
		case ea != nil && !endA:
			return ea
		case eb != nil && !endB:
			return eb
		}
	}
}
