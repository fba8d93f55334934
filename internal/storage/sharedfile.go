package storage

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/corral/corral/internal/ecode"
)

// Attacher is implemented by backends whose disks must be made usable on a
// node before an instance runs there, and released after: shared and
// distributed storage, where an instance's disks are reachable from every
// node of its group but used by one at a time (two during a migration).
type Attacher interface {
	// Attach checks the disk is reachable from this node and makes it
	// usable by owner; it returns the local path. Attaching twice is
	// success.
	Attach(ctx context.Context, instUUID string, d Disk, owner Owner) (path string, err error)
	// Detach releases the disk on this node (the other nodes keep it);
	// detaching a disk that is not attached is success.
	Detach(ctx context.Context, instUUID string, d Disk) error
}

// SharedFile is the "sharedfile" template: the file template's layout
// (<dir>/<instance uuid>/<disk uuid>.raw) in a directory every node of the
// group mounts at the same path (NFS, CephFS, GlusterFS), so an instance can
// run on any of them and migrate between them. The directory is the
// cluster's shared_file_storage_dir.
type SharedFile struct {
	*File
}

var _ Attacher = SharedFile{}

// NewSharedFile returns the sharedfile backend for the shared directory dir.
func NewSharedFile(dir string) (SharedFile, error) {
	if dir == "" || !filepath.IsAbs(dir) {
		return SharedFile{}, ecode.Errorf(ecode.Inval, "shared file storage directory must be an absolute path, got '%s' (cluster parameter shared_file_storage_dir)", dir)
	}
	return SharedFile{File: NewFile(dir)}, nil
}

// Template implements Backend.
func (SharedFile) Template() string { return TemplateSharedFile }

// Attach implements Attacher: the disk must already be there (another node
// created it); only its owner changes.
func (s SharedFile) Attach(ctx context.Context, instUUID string, d Disk, owner Owner) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", err
	}
	p, err := s.diskPath(instUUID, d)
	if err != nil {
		return "", err
	}
	st, err := os.Stat(p)
	if errors.Is(err, fs.ErrNotExist) {
		return "", ecode.Errorf(ecode.Environ, "disk %s is not visible on this node: is %s the shared directory here too?", p, s.Dir())
	}
	if err != nil {
		return "", ecode.ExecErrorf("checking disk file %s: %w", p, err)
	}
	if st.Size() != d.SizeMiB*mib {
		return "", ecode.Errorf(ecode.Environ, "disk %s has %d bytes on this node, the configuration says %d MiB", p, st.Size(), d.SizeMiB)
	}
	if err := chown(p, owner); err != nil {
		return "", ecode.ExecErrorf("handing disk %s over: %w", p, err)
	}
	// qemu opens the image again by its path while it runs, as its own
	// user: when a migration hands the disk from one qemu to the other
	// (the source gives up its locks, the destination takes them). The
	// instance directory must let it through; the image itself stays
	// readable by its owner only.
	if err := os.Chmod(filepath.Dir(p), sharedInstDirMode); err != nil {
		return "", ecode.ExecErrorf("opening the directory of disk %s to qemu: %w", p, err)
	}
	return p, nil
}

// sharedInstDirMode lets every user pass through an instance's directory
// (search, no listing).
const sharedInstDirMode = 0o711

// Detach implements Attacher. A file on a shared directory needs nothing
// released: the node that runs the instance next sets its owner.
func (SharedFile) Detach(context.Context, string, Disk) error { return nil }
