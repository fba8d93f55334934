// Package storage manages instance disks on a node, one Backend per Ganeti
// disk template. "diskless", "file" (sparse raw images) and "rbd" (Ceph
// images through librbd) exist now; the
// interface is shaped so "sharedfile", "plain" (LVM) and "drbd" fit later:
// every operation is keyed by instance and disk, idempotent, and reports
// capacity and what is present for cluster verify.
package storage

import (
	"context"
	"io/fs"
	"path/filepath"

	"github.com/corral/corral/internal/ecode"
)

// Disk template names, as Ganeti spells them.
const (
	TemplateDiskless   = "diskless"
	TemplateFile       = "file"
	TemplateSharedFile = "sharedfile"
	TemplatePlain      = "plain"
	TemplateDRBD       = "drbd"
	TemplateBlockdev   = "blockdev"
	TemplateRBD        = "rbd"
	TemplateExt        = "ext"
	TemplateGluster    = "gluster"
)

// Disk is what a backend needs to know about one instance disk.
type Disk struct {
	UUID     string
	Index    int
	SizeMiB  int64
	Template string
	Path     string // filled from Create's result by the caller
	Mode     string // access mode, "rw" or "ro"; file permissions do not depend on it
	// Params are the template's disk parameters (the node group's,
	// filled from the defaults): rbd's pool, access, conf and keyring.
	Params map[string]string
}

// Owner is the uid/gid a disk must belong to, so an unprivileged qemu can
// open it. -1 leaves the respective id as created (root).
type Owner struct {
	UID, GID int
}

// KeepOwner leaves ownership alone.
func KeepOwner() Owner { return Owner{UID: -1, GID: -1} }

// FoundDisk is a disk present on the node, for orphan detection.
type FoundDisk struct {
	Path           string
	InstUUID       string
	DiskUUID       string // the file name without its extension ("disk<N>" for disks without a uuid)
	SizeBytes      int64  // apparent size
	SizeMiB        int64  // apparent size, rounded up
	AllocatedBytes int64  // space actually used (sparse files use less)
	UID, GID       int
	Mode           fs.FileMode
}

// Backend creates and removes the disks of one template on this node.
type Backend interface {
	Template() string
	// Create makes the disk and returns its path. An existing disk of the
	// same size is success; one of another size is an error.
	Create(ctx context.Context, instUUID string, d Disk, owner Owner) (path string, err error)
	// Remove deletes the disk; a missing disk is success.
	Remove(ctx context.Context, instUUID string, d Disk) error
	// Grow sets the disk's size to newSizeMiB; growing to the current size is
	// success, shrinking is an error.
	Grow(ctx context.Context, instUUID string, d Disk, newSizeMiB int64) error
	// Path is where the disk lives (or would), "" when it has no path.
	Path(instUUID string, d Disk) string
	// Free reports the capacity of the storage the template draws from.
	Free(ctx context.Context) (totalMiB, freeMiB int64, err error)
	// List reports the disks present, whether or not the configuration knows them.
	List(ctx context.Context) ([]FoundDisk, error)
}

// ForTemplate returns the backend for a disk template. fileDir is the file
// storage directory, needed by the "file" template, sharedDir the shared one
// of "sharedfile".
func ForTemplate(t string, fileDir, sharedDir string) (Backend, error) {
	switch t {
	case TemplateDiskless:
		return NewDiskless(), nil
	case TemplateFile:
		if fileDir == "" || !filepath.IsAbs(fileDir) {
			return nil, ecode.Errorf(ecode.Inval, "file storage directory must be an absolute path, got '%s'", fileDir)
		}
		return NewFile(fileDir), nil
	case TemplateRBD:
		return NewRBD(), nil
	case TemplateSharedFile:
		b, err := NewSharedFile(sharedDir)
		if err != nil {
			return nil, err
		}
		return b, nil
	case TemplatePlain, TemplateDRBD, TemplateBlockdev, TemplateExt, TemplateGluster:
		return nil, ecode.Errorf(ecode.Inval, "disk template '%s' is not supported on this node", t)
	default:
		return nil, ecode.Errorf(ecode.Inval, "unknown disk template '%s'", t)
	}
}

// OSBackendType is the DISK_<n>_BACKEND_TYPE value the OS scripts see for a
// template: "block" for block-device templates, "file:loop" for file-based
// ones (the only file driver Corral uses), "" for diskless. rbd disks are
// reached in user space only, so their scripts get a temporary raw file.
func OSBackendType(template string) string {
	switch template {
	case TemplateFile, TemplateSharedFile, TemplateGluster, TemplateRBD:
		return "file:loop"
	case TemplatePlain, TemplateDRBD, TemplateBlockdev, TemplateExt:
		return "block"
	default:
		return ""
	}
}

// diskless is the template of instances without disks.
type diskless struct{}

// NewDiskless returns the backend of the "diskless" template: it holds no
// disks, so creating or growing one is an input error.
func NewDiskless() Backend { return diskless{} }

func (diskless) Template() string { return TemplateDiskless }

func (diskless) Create(context.Context, string, Disk, Owner) (string, error) {
	return "", ecode.Errorf(ecode.Inval, "the diskless template has no disks")
}

func (diskless) Remove(context.Context, string, Disk) error { return nil }

func (diskless) Grow(context.Context, string, Disk, int64) error {
	return ecode.Errorf(ecode.Inval, "the diskless template has no disks")
}

func (diskless) Path(string, Disk) string { return "" }

func (diskless) Free(context.Context) (int64, int64, error) { return 0, 0, nil }

func (diskless) List(context.Context) ([]FoundDisk, error) { return nil, nil }
