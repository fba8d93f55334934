package storage

import (
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"syscall"
)

// DirUsage is what a storage directory reports as a storage unit of type
// file or sharedfile (Ganeti's FileStorage): the size and free space of
// its file system, and the bytes of the files under it, each in MiB
// rounded to the nearest as Ganeti's BytesToMebibyte.
type DirUsage struct {
	SizeMiB int64
	FreeMiB int64 // available to unprivileged users (f_bavail)
	UsedMiB int64 // apparent sizes of the files under the directory
}

// MeasureDir measures dir. withUsed also walks dir and sums the sizes of
// the files under it (as lstat reports them, so a sparse disk image counts
// whole, like Ganeti). When parentIfMissing is set, a directory not made
// yet is measured on its nearest existing parent, with nothing used: the
// node's file storage directory appears with its first disk.
func MeasureDir(dir string, withUsed, parentIfMissing bool) (DirUsage, error) {
	if !filepath.IsAbs(dir) || filepath.Clean(dir) != dir {
		return DirUsage{}, fmt.Errorf("storage directory must be a clean absolute path, got %q", dir)
	}
	measured := dir
	var st syscall.Statfs_t
	for {
		err := syscall.Statfs(measured, &st)
		if err == nil {
			break
		}
		parent := filepath.Dir(measured)
		if !parentIfMissing || !errors.Is(err, syscall.ENOENT) || parent == measured {
			return DirUsage{}, fmt.Errorf("statvfs %s: %w", measured, err)
		}
		measured = parent
	}
	frsize := uint64(st.Frsize)
	if frsize == 0 {
		frsize = uint64(st.Bsize)
	}
	u := DirUsage{SizeMiB: bytesToMiB(st.Blocks * frsize), FreeMiB: bytesToMiB(st.Bavail * frsize)}
	if withUsed && measured == dir {
		used, err := filesBytes(dir)
		if err != nil {
			return DirUsage{}, err
		}
		u.UsedMiB = bytesToMiB(used)
	}
	return u, nil
}

// filesBytes sums the sizes of the non-directory entries under dir,
// without following symbolic links.
func filesBytes(dir string) (uint64, error) {
	var total uint64
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			// A file removed while walking is no longer used.
			if errors.Is(err, fs.ErrNotExist) && p != dir {
				return nil
			}
			return err
		}
		if d.IsDir() {
			return nil
		}
		if d.Type()&fs.ModeSymlink != 0 {
			// As Ganeti's os.walk: a link to a directory is listed among
			// the directories, not walked, and not counted.
			if st, err := os.Stat(p); err == nil && st.IsDir() {
				return nil
			}
		}
		fi, err := os.Lstat(p)
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		total += uint64(fi.Size())
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("summing the files under %s: %w", dir, err)
	}
	return total, nil
}

// bytesToMiB rounds to the nearest MiB, halves to even, as Ganeti's
// BytesToMebibyte (Python 3's round).
func bytesToMiB(b uint64) int64 {
	return int64(math.RoundToEven(float64(b) / mib))
}
