package nodeserver

import (
	"context"
	"os"
	"strconv"
	"strings"

	"github.com/corral/corral/internal/ecode"
	"github.com/corral/corral/internal/hypervisor"
	"github.com/corral/corral/internal/netdev"
	"github.com/corral/corral/internal/nodeapi"
)

// instanceHotplug changes a running instance's devices or memory. For a new
// disk or NIC it first gives the disk file to, or creates the tap for, the
// user the instance's qemu runs as; a removed NIC's tap is deleted after
// the device is gone.
func (s *Server) instanceHotplug(ctx context.Context, a nodeapi.HotplugArgs) (any, error) {
	h, err := s.hv(a.Instance.Hypervisor)
	if err != nil {
		return nil, err
	}
	hp, ok := h.(hypervisor.Hotplugger)
	if !ok {
		return nil, ecode.Errorf(ecode.State, "Hotplug is not supported by hypervisor %s", a.Instance.Hypervisor)
	}
	name := a.Instance.Name
	switch a.Action {
	case nodeapi.HotplugCheck:
		return nil, hp.HotplugSupported(ctx, name)
	case nodeapi.HotplugMemory:
		return nil, hp.SetMemory(ctx, name, a.MemoryMiB)
	}
	spec, err := s.hvSpec(a.Instance)
	if err != nil {
		return nil, err
	}
	run, err := h.Info(ctx, name)
	if err != nil {
		return nil, err
	}
	if run == nil || run.UUID != a.Instance.UUID {
		return nil, hypervisor.NotRunning(name)
	}
	switch {
	case a.Target == nodeapi.HotplugDisk && a.Index >= 0 && a.Index < len(spec.Disks):
		d := spec.Disks[a.Index]
		switch a.Action {
		case nodeapi.HotplugAdd:
			if err := chownToProcess(d.Path, run.PID); err != nil {
				return nil, err
			}
			return nil, hp.HotAddDisk(ctx, name, d)
		case nodeapi.HotplugRemove:
			return nil, hp.HotRemoveDisk(ctx, name, a.Index)
		case nodeapi.HotplugResize:
			return nil, hp.ResizeDisk(ctx, name, a.Index, d.SizeMiB)
		}
	case a.Target == nodeapi.HotplugNIC && a.Index >= 0 && a.Index < len(spec.NICs):
		n := spec.NICs[a.Index]
		switch a.Action {
		case nodeapi.HotplugAdd:
			uid, _, err := processOwner(run.PID)
			if err != nil {
				return nil, err
			}
			if err := netdev.CreateTapQueues(n.Tap, strconv.Itoa(uid), n.Mode, n.Link, n.IP, hypervisor.MultiQueueTaps(spec.HVParams)); err != nil {
				return nil, ecode.Errorf(ecode.Environ, "network for NIC %d of %s: %v", n.Index, name, err)
			}
			if err := hp.HotAddNIC(ctx, name, n); err != nil {
				s.deleteTaps(hypervisor.InstanceSpec{NICs: []hypervisor.NICSpec{n}})
				return nil, err
			}
			return nil, nil
		case nodeapi.HotplugRemove:
			if err := hp.HotRemoveNIC(ctx, name, a.Index); err != nil {
				return nil, err
			}
			s.deleteTaps(hypervisor.InstanceSpec{NICs: []hypervisor.NICSpec{n}})
			return nil, nil
		}
	}
	return nil, ecode.Errorf(ecode.Inval, "hotplug: cannot %s %s %d of instance %s", a.Action, a.Target, a.Index, name)
}

// processOwner is the effective uid and gid a process runs as, from its
// status file (a qemu that changed user is not dumpable, so its /proc
// directory itself stays owned by root).
func processOwner(pid int) (int, int, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, 0, ecode.Errorf(ecode.Environ, "owner of process %d: %v", pid, err)
	}
	ids := map[string]int{}
	for _, line := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if f := strings.Fields(v); ok && (k == "Uid" || k == "Gid") && len(f) > 1 {
			n, err := strconv.Atoi(f[1])
			if err != nil {
				return 0, 0, ecode.Errorf(ecode.Environ, "owner of process %d: bad %s line %q", pid, k, line)
			}
			ids[k] = n
		}
	}
	uid, okU := ids["Uid"]
	gid, okG := ids["Gid"]
	if !okU || !okG {
		return 0, 0, ecode.Errorf(ecode.Environ, "owner of process %d: no Uid or Gid in its status", pid)
	}
	return uid, gid, nil
}

// chownToProcess gives a disk file to the user a running qemu runs as, as
// a start does for the instance's other disks.
func chownToProcess(path string, pid int) error {
	if os.Geteuid() != 0 || pid <= 0 {
		return nil
	}
	uid, gid, err := processOwner(pid)
	if err != nil {
		return err
	}
	if err := os.Chown(path, uid, gid); err != nil {
		return ecode.Errorf(ecode.Environ, "cannot hand disk %s to uid %d: %v", path, uid, err)
	}
	return nil
}
