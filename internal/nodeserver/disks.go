package nodeserver

import (
	"context"
	"path/filepath"

	"github.com/corral/corral/internal/ecode"
	"github.com/corral/corral/internal/hypervisor"
	"github.com/corral/corral/internal/nodeapi"
)

// diskGrow sets a disk's size. The target size makes a repeat harmless; the
// operation record answers a retried op id besides.
func (s *Server) diskGrow(ctx context.Context, a nodeapi.DiskGrowArgs) (any, error) {
	b, err := s.backend(a.Template, a.SharedFileDir)
	if err != nil {
		return nil, err
	}
	if a.NewSizeMiB <= 0 {
		return nil, ecode.Errorf(ecode.Inval, "invalid new disk size %d MiB", a.NewSizeMiB)
	}
	d := diskOf(a.Template, a.Disk)
	if err := b.Grow(ctx, a.InstanceUUID, d, a.NewSizeMiB); err != nil {
		return nil, err
	}
	s.log.Info("disk grown", "instance", a.InstanceUUID, "disk", a.Disk.Index, "size_mib", a.NewSizeMiB)
	return nodeapi.DiskGrowReply{Path: b.Path(a.InstanceUUID, d), SizeMiB: a.NewSizeMiB}, nil
}

// serialSocket is where a running kvm instance's serial console listens:
// the kvm driver keeps serial.sock beside serial.log in the instance's run
// directory. "" when the instance has no serial console.
func serialSocket(h hypervisor.Hypervisor, name string) string {
	if h.Name() != hypervisor.KVM {
		return ""
	}
	log := h.ConsoleLog(name)
	if log == "" {
		return ""
	}
	return filepath.Join(filepath.Dir(log), "serial.sock")
}
