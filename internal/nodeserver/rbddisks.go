package nodeserver

import (
	"context"
	"os"
	"path/filepath"
	"strconv"

	"github.com/corral/corral/internal/ecode"
	"github.com/corral/corral/internal/hypervisor"
	"github.com/corral/corral/internal/nodeapi"
	"github.com/corral/corral/internal/osapi"
	"github.com/corral/corral/internal/storage"
)

// rbdImage is what the hypervisor needs to open an rbd disk through
// librbd; nil for other templates.
func rbdImage(b storage.Backend, instUUID string, d storage.Disk) (*hypervisor.RBDImage, error) {
	r, ok := b.(*storage.RBD)
	if !ok {
		return nil, nil
	}
	l, err := r.Location(instUUID, d)
	if err != nil {
		return nil, err
	}
	return &hypervisor.RBDImage{Pool: l.Pool, Image: l.Image, Client: l.Client, Conf: l.Conf, Keyring: l.Keyring}, nil
}

// scriptDisks are the temporary raw files an OS script works on in place
// of an instance's rbd images: with no kernel rbd or nbd driver there is no
// block device to give it, so the bytes go through a file on the node (its
// scratch directory, root's alone) and librbd. nil for other templates.
type scriptDisks struct {
	rbd   *storage.RBD
	inst  nodeapi.InstanceSpec
	dir   string
	paths []string
}

// rbdScriptDisks points inst's disks at temporary files: copies of the
// images when current is true (a script that reads or edits the disk),
// else sparse files of the disks' sizes (a script that writes it whole).
func (s *Server) rbdScriptDisks(ctx context.Context, in nodeapi.InstanceSpec, inst *osapi.Instance, current bool) (*scriptDisks, error) {
	if in.DiskTemplate != storage.TemplateRBD || len(in.Disks) == 0 {
		return nil, nil
	}
	b, err := s.backend(in.DiskTemplate, "")
	if err != nil {
		return nil, err
	}
	parent := filepath.Join(s.opts.StateDir, "scratch")
	if err := os.MkdirAll(parent, 0o700); err != nil {
		return nil, ecode.ExecErrorf("making the scratch directory: %w", err)
	}
	dir, err := os.MkdirTemp(parent, "rbd-")
	if err != nil {
		return nil, ecode.ExecErrorf("making the scratch directory: %w", err)
	}
	f := &scriptDisks{rbd: b.(*storage.RBD), inst: in, dir: dir}
	for i, d := range in.Disks {
		p := filepath.Join(dir, "disk"+strconv.Itoa(i)+".raw")
		if current {
			err = f.rbd.Export(ctx, in.UUID, diskOf(in.DiskTemplate, d), p)
		} else {
			err = sparseFile(p, d.SizeMiB*mib)
		}
		if err != nil {
			f.remove()
			return nil, err
		}
		f.paths = append(f.paths, p)
		inst.Disks[i].Path = p
	}
	return f, nil
}

func sparseFile(p string, size int64) error {
	fh, err := os.OpenFile(p, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return ecode.ExecErrorf("making a scratch disk: %w", err)
	}
	if err := fh.Truncate(size); err != nil {
		fh.Close()
		return ecode.ExecErrorf("sizing a scratch disk: %w", err)
	}
	return fh.Close()
}

// store imports the files into the images (each swapped in whole).
func (f *scriptDisks) store(ctx context.Context) error {
	if f == nil {
		return nil
	}
	for i, d := range f.inst.Disks {
		if err := f.rbd.Import(ctx, f.inst.UUID, diskOf(f.inst.DiskTemplate, d), f.paths[i]); err != nil {
			return err
		}
	}
	return nil
}

func (f *scriptDisks) remove() {
	if f != nil {
		_ = os.RemoveAll(f.dir)
	}
}

// refuseRBDTransfer stops disk streams (moves, backups) of rbd disks: they
// would open the image's name as a file. Converting the instance to the
// file template first (instance modify -t file) moves it.
func refuseRBDTransfer(in nodeapi.InstanceSpec) error {
	if in.DiskTemplate == storage.TemplateRBD {
		return ecode.Errorf(ecode.Inval, "disk transfers of rbd instances are not supported; convert %s to the file template first", in.Name)
	}
	return nil
}
