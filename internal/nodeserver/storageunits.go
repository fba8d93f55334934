package nodeserver

import (
	"context"

	"github.com/corral/corral/internal/ecode"
	"github.com/corral/corral/internal/nodeapi"
	"github.com/corral/corral/internal/storage"
)

// storageList answers the node's storage units of a type: its file
// storage directory for file, the cluster's shared directory for
// sharedfile. The file directory, made with the first disk, is measured
// on its nearest existing parent until then; a shared directory must be
// there (a share not mounted is an error, not the root file system).
func (s *Server) storageList(ctx context.Context, a nodeapi.StorageListArgs) (any, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var dir string
	var parentIfMissing bool
	switch a.Type {
	case nodeapi.StorageTypeFile:
		dir, parentIfMissing = s.storage[storage.TemplateFile].(*storage.File).Dir(), true
	case nodeapi.StorageTypeSharedFile:
		if a.Dir == "" {
			return nil, ecode.Errorf(ecode.Inval, "no shared file storage directory given")
		}
		dir = a.Dir
	default:
		return nil, ecode.Errorf(ecode.Inval, "Unknown storage type: '%s'", a.Type)
	}
	u, err := storage.MeasureDir(dir, a.Used, parentIfMissing)
	if err != nil {
		return nil, ecode.ExecErrorf("measuring storage unit %s on %s: %w", dir, s.name, err)
	}
	return []nodeapi.StorageUnit{{Name: dir, SizeMiB: u.SizeMiB, FreeMiB: u.FreeMiB, UsedMiB: u.UsedMiB}}, nil
}
