package storage

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/corral/corral/internal/ecode"
)

const (
	mib      = 1 << 20
	dirMode  = 0o750
	diskExt  = ".raw"
	maxMiB   = math.MaxInt64 / mib
	tmpInfix = ".tmp-"
)

// File is the "file" template: each disk is a sparse raw image at
// <dir>/<instance uuid>/<disk uuid>.raw (disk<index>.raw for a disk without
// a uuid).
type File struct {
	dir string
}

// NewFile returns the file backend rooted at dir (created on first use).
func NewFile(dir string) *File { return &File{dir: filepath.Clean(dir)} }

// Template implements Backend.
func (f *File) Template() string { return TemplateFile }

// Dir is the storage directory.
func (f *File) Dir() string { return f.dir }

// Path implements Backend; it is "" when the ids cannot form a safe path.
func (f *File) Path(instUUID string, d Disk) string {
	p, err := f.diskPath(instUUID, d)
	if err != nil {
		return ""
	}
	return p
}

// validComponent keeps ids from the network from leaving the storage
// directory or colliding with our temporary files (which start with a dot).
func validComponent(s string) bool {
	return s != "" && !strings.HasPrefix(s, ".") && !strings.ContainsAny(s, "/\x00")
}

func (f *File) diskPath(instUUID string, d Disk) (string, error) {
	if !validComponent(instUUID) {
		return "", ecode.Errorf(ecode.Inval, "invalid instance uuid '%s'", instUUID)
	}
	name := d.UUID
	if name == "" {
		if d.Index < 0 {
			return "", ecode.Errorf(ecode.Inval, "invalid disk index %d", d.Index)
		}
		name = "disk" + strconv.Itoa(d.Index)
	} else if !validComponent(name) {
		return "", ecode.Errorf(ecode.Inval, "invalid disk uuid '%s'", name)
	}
	return filepath.Join(f.dir, instUUID, name+diskExt), nil
}

func checkSize(sizeMiB int64) error {
	if sizeMiB <= 0 || sizeMiB > maxMiB {
		return ecode.Errorf(ecode.Inval, "invalid disk size %d MiB", sizeMiB)
	}
	return nil
}

// Create implements Backend. The image is sized with truncate, so it takes
// no space until written, and it appears under its final name only once
// fully sized and owned: a concurrent or repeated Create sees either nothing
// or the finished file.
func (f *File) Create(ctx context.Context, instUUID string, d Disk, owner Owner) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", err
	}
	p, err := f.diskPath(instUUID, d)
	if err != nil {
		return "", err
	}
	if err := checkSize(d.SizeMiB); err != nil {
		return "", err
	}
	size := d.SizeMiB * mib
	if st, err := os.Stat(p); err == nil {
		return p, adoptExisting(p, st, size, owner)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return "", ecode.ExecErrorf("checking disk file %s: %w", p, err)
	}
	if err := f.checkSpace(d.SizeMiB); err != nil {
		return "", err
	}

	instDir := filepath.Dir(p)
	tmp, err := f.createTemp(instDir, filepath.Base(p))
	if err != nil {
		return "", ecode.ExecErrorf("creating disk file in %s: %w", instDir, err)
	}
	defer os.Remove(tmp.Name()) // the finished file is a second link; this drops the temporary name
	err = func() error {
		defer tmp.Close()
		if err := tmp.Truncate(size); err != nil {
			return err
		}
		if err := chown(tmp.Name(), owner); err != nil {
			return err
		}
		return tmp.Sync()
	}()
	if err != nil {
		return "", ecode.ExecErrorf("creating disk file %s: %w", p, err)
	}
	if err := os.Link(tmp.Name(), p); err != nil {
		if errors.Is(err, fs.ErrExist) {
			// Someone else finished the same disk first.
			st, serr := os.Stat(p)
			if serr != nil {
				return "", ecode.ExecErrorf("checking disk file %s: %w", p, serr)
			}
			return p, adoptExisting(p, st, size, owner)
		}
		return "", ecode.ExecErrorf("creating disk file %s: %w", p, err)
	}
	syncDir(instDir)
	return p, nil
}

// createTemp makes the temporary file, recreating the instance directory if
// a concurrent Remove of the instance's last disk took it away meanwhile.
func (f *File) createTemp(instDir, base string) (*os.File, error) {
	for attempt := 0; ; attempt++ {
		if err := os.MkdirAll(instDir, dirMode); err != nil {
			return nil, err
		}
		tmp, err := os.CreateTemp(instDir, "."+base+tmpInfix+"*") // mode 0600
		if err == nil || !errors.Is(err, fs.ErrNotExist) || attempt > 0 {
			return tmp, err
		}
	}
}

// adoptExisting makes Create idempotent: the same disk again is success.
func adoptExisting(p string, st fs.FileInfo, size int64, owner Owner) error {
	if !st.Mode().IsRegular() {
		return ecode.Errorf(ecode.Exists, "disk path %s exists and is not a regular file", p)
	}
	if st.Size() != size {
		return ecode.Errorf(ecode.Exists, "disk file %s already exists with a size of %d bytes, not %d MiB", p, st.Size(), size/mib)
	}
	if err := chown(p, owner); err != nil {
		return ecode.ExecErrorf("setting the owner of %s: %w", p, err)
	}
	return nil
}

func chown(p string, o Owner) error {
	if o.UID == -1 && o.GID == -1 {
		return nil
	}
	return os.Chown(p, o.UID, o.GID)
}

// syncDir makes a new directory entry durable; failure only weakens crash
// safety, so it is not reported.
func syncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
}

// checkSpace refuses to create or grow beyond the free space: sparse images
// would otherwise fail much later, inside the guest, with I/O errors.
func (f *File) checkSpace(needMiB int64) error {
	_, free, err := f.statfs()
	if err != nil {
		return ecode.ExecErrorf("checking free space in %s: %w", f.dir, err)
	}
	if needMiB > free {
		return ecode.Errorf(ecode.NoRes, "not enough space on node: need %d MiB, %d MiB free", needMiB, free)
	}
	return nil
}

// statfs measures the file system of the storage directory, or of its
// nearest existing parent before the first disk creates it.
func (f *File) statfs() (totalMiB, freeMiB int64, err error) {
	dir := f.dir
	for {
		var st syscall.Statfs_t
		err := syscall.Statfs(dir, &st)
		if err == nil {
			bs := uint64(st.Bsize)
			return int64(st.Blocks * bs / mib), int64(st.Bavail * bs / mib), nil
		}
		parent := filepath.Dir(dir)
		if !errors.Is(err, syscall.ENOENT) || parent == dir {
			return 0, 0, fmt.Errorf("statfs %s: %w", dir, err)
		}
		dir = parent
	}
}

// Remove implements Backend. The instance directory goes with its last disk.
func (f *File) Remove(ctx context.Context, instUUID string, d Disk) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	p, err := f.diskPath(instUUID, d)
	if err != nil {
		return err
	}
	if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return ecode.ExecErrorf("removing disk file %s: %w", p, err)
	}
	// Fails harmlessly while other disks (or nothing) remain.
	_ = os.Remove(filepath.Dir(p))
	return nil
}

// Grow implements Backend.
func (f *File) Grow(ctx context.Context, instUUID string, d Disk, newSizeMiB int64) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	p, err := f.diskPath(instUUID, d)
	if err != nil {
		return err
	}
	if err := checkSize(newSizeMiB); err != nil {
		return err
	}
	st, err := os.Stat(p)
	if errors.Is(err, fs.ErrNotExist) {
		return ecode.Errorf(ecode.NoEnt, "disk file %s not found", p)
	}
	if err != nil {
		return ecode.ExecErrorf("checking disk file %s: %w", p, err)
	}
	// Corral writes raw images only; a qcow2 file placed here by hand would
	// keep its virtual size under truncate (qemu-img resize is its tool), so
	// growing it as raw would report success and change nothing the guest sees.
	if q, err := isQcow2(p); err != nil {
		return ecode.ExecErrorf("checking the format of disk file %s: %w", p, err)
	} else if q {
		return ecode.Errorf(ecode.Inval, "disk file %s is a qcow2 image; only raw images can be grown", p)
	}
	newSize := newSizeMiB * mib
	switch {
	case newSize == st.Size():
		return nil
	case newSize < st.Size():
		return ecode.Errorf(ecode.Inval, "cannot shrink disk %s from %d bytes to %d MiB", p, st.Size(), newSizeMiB)
	}
	if err := f.checkSpace((newSize - st.Size() + mib - 1) / mib); err != nil {
		return err
	}
	if err := os.Truncate(p, newSize); err != nil {
		return ecode.ExecErrorf("growing disk file %s: %w", p, err)
	}
	return nil
}

// qcow2Magic starts every qcow2 image ("QFI" and 0xfb).
var qcow2Magic = [4]byte{'Q', 'F', 'I', 0xfb}

func isQcow2(p string) (bool, error) {
	f, err := os.Open(p)
	if err != nil {
		return false, err
	}
	defer f.Close()
	var head [4]byte
	n, err := f.ReadAt(head[:], 0)
	if n < len(head) {
		// Shorter than a header (or empty and sparse): raw.
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return head == qcow2Magic, nil
}

// Free implements Backend.
func (f *File) Free(ctx context.Context) (totalMiB, freeMiB int64, err error) {
	if err := ctx.Err(); err != nil {
		return 0, 0, err
	}
	total, free, err := f.statfs()
	if err != nil {
		return 0, 0, ecode.ExecErrorf("%w", err)
	}
	return total, free, nil
}

// List implements Backend: every <instance>/<name>.raw regular file.
// Temporary files of unfinished creates are skipped.
func (f *File) List(ctx context.Context) ([]FoundDisk, error) {
	insts, err := os.ReadDir(f.dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, ecode.ExecErrorf("listing %s: %w", f.dir, err)
	}
	var out []FoundDisk
	for _, inst := range insts {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if !inst.IsDir() || !validComponent(inst.Name()) {
			continue
		}
		instDir := filepath.Join(f.dir, inst.Name())
		files, err := os.ReadDir(instDir)
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) { // removed meanwhile
				continue
			}
			return nil, ecode.ExecErrorf("listing %s: %w", instDir, err)
		}
		for _, fe := range files {
			name := fe.Name()
			if !fe.Type().IsRegular() || strings.HasPrefix(name, ".") || !strings.HasSuffix(name, diskExt) {
				continue
			}
			p := filepath.Join(instDir, name)
			st, err := os.Lstat(p)
			if err != nil {
				continue // removed meanwhile
			}
			fd := FoundDisk{
				Path: p, InstUUID: inst.Name(), DiskUUID: strings.TrimSuffix(name, diskExt),
				SizeBytes: st.Size(), SizeMiB: (st.Size() + mib - 1) / mib, Mode: st.Mode(),
				UID: -1, GID: -1,
			}
			if sys, ok := st.Sys().(*syscall.Stat_t); ok {
				fd.UID, fd.GID = int(sys.Uid), int(sys.Gid)
				fd.AllocatedBytes = sys.Blocks * 512
			}
			out = append(out, fd)
		}
	}
	return out, nil
}
