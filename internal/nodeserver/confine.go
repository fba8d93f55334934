package nodeserver

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"strconv"
	"strings"

	"github.com/corral/corral/internal/hypervisor"
	"github.com/corral/corral/internal/hypervisor/kvm"
	"github.com/corral/corral/internal/nodeapi"
)

// confiner is what a hypervisor offers for per-instance qemu users
// (security_model user and pool): the kvm driver.
type confiner interface {
	Identity(ctx context.Context, spec hypervisor.InstanceSpec) (kvm.Identity, error)
	ReleaseIdentity(uuid string) error
}

// qemuOwner is who gets an instance's disks and tap devices: the node's qemu
// user under security_model none, else the instance's own user (its
// security_domain, or the uid it takes from the pool). release gives a pool
// uid back when the start goes no further.
type qemuOwner struct {
	name     string // tap owner: a user name, or a uid in decimal
	uid, gid int    // -1: leave disks alone
	pool     bool   // uid taken from the cluster's pool
	release  func()
}

func (s *Server) qemuOwnerFor(ctx context.Context, h hypervisor.Hypervisor, spec hypervisor.InstanceSpec) (qemuOwner, error) {
	def := qemuOwner{name: s.opts.QemuUser, uid: s.qemuUID, gid: s.qemuGID, release: func() {}}
	m := spec.HVParams[hypervisor.ParamSecurityModel]
	if m == "" || m == hypervisor.SecurityNone {
		return def, nil
	}
	c, ok := h.(confiner)
	if !ok {
		return def, nil // the fake hypervisor runs no process to confine
	}
	id, err := c.Identity(ctx, spec)
	if err != nil {
		return qemuOwner{}, err
	}
	o := qemuOwner{name: id.Name, uid: id.UID, gid: id.GID, pool: id.Pool, release: func() {
		if err := c.ReleaseIdentity(spec.UUID); err != nil {
			s.log.Warn("cannot release the instance's pool uid", "instance", spec.Name, "err", err)
		}
	}}
	if strings.Contains(id.Name, ":") {
		// A pool uid without a user name ("uid:gid" for qemu's -runas):
		// its taps are given to the bare uid.
		o.name = strconv.Itoa(id.UID)
	}
	return o, nil
}

func confinementOf(c *hypervisor.Confinement) *nodeapi.Confinement {
	if c == nil {
		return nil
	}
	return &nodeapi.Confinement{SecurityModel: c.SecurityModel, User: c.User, UID: c.UID, Chroot: c.Chroot,
		Sandbox: c.Sandbox, Cgroups: c.Cgroups, CgroupError: c.CgroupError}
}

// reclaimDisks gives a stopped instance's disks back to root when they had
// been handed to an instance-specific user: the pool hands the same uid to
// another instance later, which must not own this one's disks.
func (s *Server) reclaimDisks(spec hypervisor.InstanceSpec) {
	m := spec.HVParams[hypervisor.ParamSecurityModel]
	if m == "" || m == hypervisor.SecurityNone || os.Geteuid() != 0 {
		return
	}
	for _, d := range spec.Disks {
		if d.RBD != nil {
			continue // in Ceph: qemu's copies of its key went with its run directory
		}
		if err := os.Chown(d.Path, 0, 0); err != nil && !errors.Is(err, fs.ErrNotExist) {
			s.log.Warn("cannot give a stopped instance's disk back to root", "instance", spec.Name, "disk", d.Path, "err", err)
		}
	}
}
