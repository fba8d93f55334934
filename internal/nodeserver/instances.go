package nodeserver

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"

	"github.com/corral/corral/internal/ecode"
	"github.com/corral/corral/internal/failpoint"
	"github.com/corral/corral/internal/hypervisor"
	"github.com/corral/corral/internal/netdev"
	"github.com/corral/corral/internal/nodeapi"
	"github.com/corral/corral/internal/osapi"
	"github.com/corral/corral/internal/seconds"
	"github.com/corral/corral/internal/secret"
	"github.com/corral/corral/internal/storage"
	"github.com/corral/corral/internal/uidpool"
)

func diskOf(tmpl string, d nodeapi.DiskSpec) storage.Disk {
	return storage.Disk{UUID: d.UUID, Index: d.Index, SizeMiB: d.SizeMiB, Template: tmpl, Mode: d.Mode, Params: d.Params}
}

// hvSpec turns the master's instance description into the hypervisor's,
// with the node-local disk paths and tap names.
func (s *Server) hvSpec(in nodeapi.InstanceSpec) (hypervisor.InstanceSpec, error) {
	spec := hypervisor.InstanceSpec{Name: in.Name, UUID: in.UUID, MemoryMiB: in.MemoryMiB, VCPUs: in.VCPUs, HVParams: in.HVParams,
		UIDPool: uidpool.FromArrays(in.UIDPool), NetworkPort: in.NetworkPort}
	b, err := s.backend(in.DiskTemplate, in.SharedFileDir)
	if err != nil {
		return spec, err
	}
	for i, d := range in.Disks {
		hd := hypervisor.DiskSpec{Index: i, Path: b.Path(in.UUID, diskOf(in.DiskTemplate, d)),
			SizeMiB: d.SizeMiB, ReadOnly: d.Mode == "ro", UUID: d.UUID}
		if hd.RBD, err = rbdImage(b, in.UUID, diskOf(in.DiskTemplate, d)); err != nil {
			return spec, err
		}
		spec.Disks = append(spec.Disks, hd)
	}
	for i, n := range in.NICs {
		nic := hypervisor.NICSpec{Index: i, MAC: n.MAC, Mode: n.Mode, Link: n.Link, IP: n.IP}
		if in.Hypervisor == hypervisor.KVM {
			nic.Tap = netdev.TapName(s.name, in.UUID, i)
		}
		spec.NICs = append(spec.NICs, nic)
	}
	return spec, nil
}

func (s *Server) instanceStart(ctx context.Context, a nodeapi.InstanceArgs) (any, error) {
	return nil, s.startInstance(ctx, a.Instance, false)
}

// startInstance boots an instance, or with incoming starts it as the
// destination of a migration.
func (s *Server) startInstance(ctx context.Context, in nodeapi.InstanceSpec, incoming bool) error {
	h, err := s.hv(in.Hypervisor)
	if err != nil {
		return err
	}
	spec, err := s.hvSpec(in)
	if err != nil {
		return err
	}
	spec.Incoming = incoming
	if r, err := h.Info(ctx, in.Name); err == nil && r != nil && r.UUID == in.UUID {
		return nil // already running: touch neither its disks nor its network
	}
	owner, err := s.qemuOwnerFor(ctx, h, spec)
	if err != nil {
		return err
	}
	if err := s.attachDisks(ctx, in, owner); err != nil {
		owner.release()
		return err
	}
	if in.Hypervisor == hypervisor.KVM {
		// qemu runs unprivileged: it must be able to open its disks, and
		// nobody else may read them.
		for _, d := range spec.Disks {
			if d.RBD == nil && owner.uid >= 0 && os.Geteuid() == 0 {
				if err := os.Chown(d.Path, owner.uid, owner.gid); err != nil {
					owner.release()
					return ecode.Errorf(ecode.Environ, "cannot hand disk %s to uid %d: %w", d.Path, owner.uid, err)
				}
			}
		}
		multiQueue := hypervisor.MultiQueueTaps(spec.HVParams)
		for i, n := range spec.NICs {
			if err := netdev.CreateTapQueues(n.Tap, owner.name, n.Mode, n.Link, n.IP, multiQueue); err != nil {
				s.deleteTaps(hypervisor.InstanceSpec{NICs: spec.NICs[:i]})
				owner.release()
				return ecode.Errorf(ecode.Environ, "network for NIC %d of %s: %w", n.Index, in.Name, err)
			}
		}
		if err := s.guardPoolUID(ctx, spec, owner); err != nil {
			s.deleteTaps(spec)
			owner.release()
			return err
		}
	}
	s.opts.Failpoints.Hit(failpoint.NodeInstanceStart)
	if err := h.Start(ctx, spec); err != nil {
		if in.Hypervisor == hypervisor.KVM {
			s.deleteTaps(spec)
		}
		owner.release()
		return err
	}
	s.opts.Failpoints.Hit(failpoint.NodeInstanceStarted)
	s.log.Info("instance started", "instance", in.Name, "hypervisor", in.Hypervisor, "incoming_migration", incoming)
	return nil
}

func (s *Server) deleteTaps(spec hypervisor.InstanceSpec) {
	for _, n := range spec.NICs {
		if n.Tap == "" {
			continue
		}
		if err := netdev.DeleteTap(n.Tap); err != nil {
			s.log.Warn("cannot delete tap", "tap", n.Tap, "err", err)
		}
	}
}

func (s *Server) instanceShutdown(ctx context.Context, a nodeapi.ShutdownArgs) (any, error) {
	in := a.Instance
	h, err := s.hv(in.Hypervisor)
	if err != nil {
		return nil, err
	}
	// A timeout of 0 gives the guest no time, as in Ganeti: the
	// instance is stopped at once, as with force.
	timeout, force := seconds.Int(int64(a.Timeout)), a.Force || a.Timeout <= 0
	if err := h.Stop(ctx, in.Name, timeout, force); err != nil {
		return nil, err
	}
	s.opts.Failpoints.Hit(failpoint.NodeInstanceStopped)
	if spec, err := s.hvSpec(in); err == nil {
		s.deleteTaps(spec)
		s.reclaimDisks(spec)
	}
	s.log.Info("instance stopped", "instance", in.Name)
	return nil, nil
}

func (s *Server) instanceReboot(ctx context.Context, a nodeapi.RebootArgs) (any, error) {
	in := a.Instance
	h, err := s.hv(in.Hypervisor)
	if err != nil {
		return nil, err
	}
	return nil, h.Reboot(ctx, in.Name)
}

func (s *Server) instanceList(ctx context.Context, a nodeapi.InstanceListArgs) (any, error) {
	hvs := a.Hypervisors
	if len(hvs) == 0 {
		hvs = s.opts.Hypervisors
	}
	out := []nodeapi.RunningInstance{}
	for _, name := range hvs {
		h, ok := s.hvs[name]
		if !ok {
			continue // not enabled here: nothing of it runs
		}
		l, err := h.List(ctx)
		if err != nil {
			return nil, err
		}
		for _, r := range l {
			out = append(out, nodeapi.RunningInstance{Name: r.Name, UUID: r.UUID, State: string(r.State),
				MemoryMiB: r.MemoryMiB, VCPUs: r.VCPUs, PID: r.PID, SerialSocket: serialSocket(h, r.Name),
				Confinement: confinementOf(r.Confinement)})
		}
	}
	return out, nil
}

func (s *Server) diskCreate(ctx context.Context, a nodeapi.DiskArgs) (any, error) {
	b, err := s.backend(a.Template, a.SharedFileDir)
	if err != nil {
		return nil, err
	}
	p, err := b.Create(ctx, a.InstanceUUID, diskOf(a.Template, a.Disk), storage.KeepOwner())
	if err != nil {
		return nil, err
	}
	s.opts.Failpoints.Hit(failpoint.NodeDiskCreated)
	return nodeapi.DiskReply{Path: p}, nil
}

func (s *Server) diskRemove(ctx context.Context, a nodeapi.DiskArgs) (any, error) {
	b, err := s.backend(a.Template, a.SharedFileDir)
	if err != nil {
		return nil, err
	}
	return nil, b.Remove(ctx, a.InstanceUUID, diskOf(a.Template, a.Disk))
}

func (s *Server) diskList(ctx context.Context, _ struct{}) (any, error) {
	out := []nodeapi.FoundDisk{}
	for _, b := range s.storage {
		l, err := b.List(ctx)
		if err != nil {
			return nil, err
		}
		for _, d := range l {
			out = append(out, nodeapi.FoundDisk{Path: d.Path, InstanceUUID: d.InstUUID, DiskUUID: d.DiskUUID,
				SizeMiB: d.SizeMiB, UID: d.UID, Mode: uint32(d.Mode.Perm())})
		}
	}
	return out, nil
}

// osInstance builds the OS scripts' view of an instance.
func (s *Server) osInstance(in nodeapi.InstanceSpec, secrets map[string]string) (osapi.Instance, error) {
	b, err := s.backend(in.DiskTemplate, in.SharedFileDir)
	if err != nil {
		return osapi.Instance{}, err
	}
	inst := osapi.Instance{Name: in.Name, OS: in.OS, UUID: in.UUID, PrimaryNodeUUID: in.PrimaryNodeUUID,
		CTime: in.CTime, MTime: in.MTime, Hypervisor: in.Hypervisor,
		BEParams: in.BEParams, HVParams: in.HVParams, OSParams: in.OSParams}
	for _, d := range in.Disks {
		inst.Disks = append(inst.Disks, osapi.Disk{UUID: d.UUID, Name: d.Name, Path: b.Path(in.UUID, diskOf(in.DiskTemplate, d)),
			SizeMiB: d.SizeMiB, Access: d.Mode, BackendType: storage.OSBackendType(in.DiskTemplate)})
	}
	for _, n := range in.NICs {
		nic := osapi.NIC{MAC: n.MAC, UUID: n.UUID, Name: n.Name, IP: n.IP, Mode: n.Mode, Link: n.Link}
		if net := n.Network; net != nil {
			nic.NetworkName, nic.NetworkUUID, nic.NetworkTags = net.Name, net.UUID, net.Tags
			nic.NetworkSubnet, nic.NetworkGateway = net.Subnet, net.Gateway
			nic.NetworkSubnet6, nic.NetworkGateway6, nic.NetworkMACPrefix = net.Subnet6, net.Gateway6, net.MACPrefix
		}
		inst.NICs = append(inst.NICs, nic)
	}
	if len(in.OSParamsPrivate) > 0 {
		inst.OSParamsPrivate = map[string]secret.Secret{}
		for k, v := range in.OSParamsPrivate {
			inst.OSParamsPrivate[k] = secret.Secret(v)
		}
	}
	if len(secrets) > 0 {
		inst.OSParamsSecret = map[string]secret.Secret{}
		for k, v := range secrets {
			inst.OSParamsSecret[k] = secret.Secret(v)
		}
	}
	return inst, nil
}

func (s *Server) findOS(in nodeapi.InstanceSpec, force bool) (*osapi.OS, error) {
	o, err := osapi.Find(s.opts.OSSearchPath, in.OS)
	if err != nil {
		return nil, err
	}
	_, variant := osapi.SplitName(in.OS)
	if _, err := o.CheckVariant(variant, force); err != nil {
		return nil, err
	}
	return o, nil
}

func (s *Server) osCreate(ctx context.Context, a nodeapi.OSCreateArgs) (any, error) {
	o, err := s.findOS(a.Instance, a.ForceVariant)
	if err != nil {
		return nil, err
	}
	inst, err := s.osInstance(a.Instance, a.SecretParams)
	if err != nil {
		return nil, err
	}
	inst.DebugLevel = a.DebugLevel
	// The script writes every byte it wants: rbd disks start from zeros.
	files, err := s.rbdScriptDisks(ctx, a.Instance, &inst, false)
	if err != nil {
		return nil, err
	}
	defer files.remove()
	log, err := s.osRunner.RunCreate(ctx, o, inst, a.Reinstall)
	if err != nil {
		return nil, err
	}
	if err := files.store(ctx); err != nil {
		return nil, err
	}
	return nodeapi.OSReply{LogPath: log}, nil
}

func (s *Server) osRename(ctx context.Context, a nodeapi.OSRenameArgs) (any, error) {
	o, err := s.findOS(a.Instance, true)
	if err != nil {
		return nil, err
	}
	inst, err := s.osInstance(a.Instance, nil)
	if err != nil {
		return nil, err
	}
	files, err := s.rbdScriptDisks(ctx, a.Instance, &inst, true)
	if err != nil {
		return nil, err
	}
	defer files.remove()
	log, err := s.osRunner.RunRename(ctx, o, inst, a.OldName)
	if err != nil {
		return nil, err
	}
	if err := files.store(ctx); err != nil {
		return nil, err
	}
	return nodeapi.OSReply{LogPath: log}, nil
}

func (s *Server) osDiagnose(ctx context.Context, _ struct{}) (any, error) {
	oses, err := osapi.Discover(s.opts.OSSearchPath)
	if err != nil {
		return nil, err
	}
	out := []nodeapi.OSInfo{}
	for _, o := range oses {
		out = append(out, nodeapi.OSInfo{Name: o.Name, Path: o.Path, Valid: o.Valid, Error: o.Error, Variants: o.Variants,
			Parameters: o.Parameters, APIVersions: o.APIVersions, Trusted: o.Trusted, Version: o.Version})
	}
	return out, nil
}

// osValidate checks the variant and runs the OS's verify script on the
// parameters. A missing OS is reported as not found unless required.
func (s *Server) osValidate(ctx context.Context, a nodeapi.OSValidateArgs) (any, error) {
	o, err := osapi.Find(s.opts.OSSearchPath, a.OS)
	if ecode.ClassOf(err) == ecode.NoEnt && !a.Required {
		return nodeapi.OSValidateReply{}, nil
	}
	if err != nil {
		return nil, err
	}
	_, variant := osapi.SplitName(a.OS)
	if variant, err = o.CheckVariant(variant, a.ForceVariant); err != nil {
		return nil, err
	}
	private := make(map[string]secret.Secret, len(a.Private))
	for k, v := range a.Private {
		private[k] = secret.Secret(v)
	}
	log, err := s.osRunner.RunVerify(ctx, o, variant, a.Params, private)
	if err != nil {
		return nil, err
	}
	return nodeapi.OSValidateReply{Found: true, LogPath: log}, nil
}

// console streams the serial console between the master's client and the
// hypervisor until either side closes.
func (s *Server) console(ctx context.Context, raw json.RawMessage, conn io.ReadWriter) error {
	var a nodeapi.ConsoleArgs
	if err := json.Unmarshal(raw, &a); err != nil {
		return ecode.Errorf(ecode.Inval, "console: bad arguments: %v", err)
	}
	h, err := s.hv(a.Instance.Hypervisor)
	if err != nil {
		return err
	}
	c, err := h.Console(ctx, a.Instance.Name)
	if err != nil {
		return err
	}
	defer c.Close()
	errc := make(chan error, 2)
	go func() { _, err := io.Copy(c, conn); errc <- err }()
	go func() { _, err := io.Copy(conn, c); errc <- err }()
	select {
	case err = <-errc:
	case <-ctx.Done():
		err = ctx.Err()
	}
	if errors.Is(err, io.EOF) || errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}
