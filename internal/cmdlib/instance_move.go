package cmdlib

import (
	"context"
	"strconv"

	"github.com/corral/corral/internal/config"
	"github.com/corral/corral/internal/ecode"
	"github.com/corral/corral/internal/engine"
	"github.com/corral/corral/internal/locking"
	"github.com/corral/corral/internal/nodeapi"
	"github.com/corral/corral/internal/opcodes"
)

// instanceMoveLU is OP_INSTANCE_MOVE (Ganeti's gnt-instance move): shut the
// instance down, copy its disks to the target node over the node-to-node
// import/export stream, make the target its primary node, remove the old
// disks and start it there when it should run. Only disks that live on one
// node are copied (file); shared templates change nodes by failover.
type instanceMoveLU struct {
	instanceBase
	Source string `json:"source"`
	Target string `json:"target"`
	Up     bool   `json:"up"`
}

func (p *Processor) moveUnits() []engine.Op {
	return []engine.Op{p.unit("OP_INSTANCE_MOVE", func() LU { return &instanceMoveLU{} })}
}

func (lu *instanceMoveLU) Locks(p *Processor, op *opcodes.Op) []locking.Request {
	reqs := migrationLocks(&lu.instanceBase, p, op)
	inst, ok := p.Cfg.Instance(op.Str("instance_name"))
	t, tok := p.Cfg.Node(op.Str("target_node"))
	if ok && tok {
		// The target's disk space is checked, then used.
		reqs = append(reqs, nodeResLock(locking.Exclusive, inst.PrimaryNode, t.UUID))
	}
	return reqs
}

func (lu *instanceMoveLU) Prereq(ctx context.Context, p *Processor, op *opcodes.Op) error {
	inst, src, err := lu.load(p, op)
	if err != nil {
		return err
	}
	lu.Source = src.UUID
	if inst.DiskTemplate != config.DTFile && inst.DiskTemplate != config.DTDiskless {
		return ecode.Errorf(ecode.State, "Instance disk 0 has disk type %s and is not suitable for copying", inst.DiskTemplate)
	}
	if err := refuseInRescue(p, inst, "move it"); err != nil {
		return err
	}
	dst, err := p.Cfg.MustNode(op.Str("target_node"))
	if err != nil {
		return err
	}
	if dst.UUID == inst.PrimaryNode {
		return ecode.Errorf(ecode.State, "Instance %s is already on the node %s", inst.Name, dst.Name)
	}
	if err := checkNodeOnline(dst); err != nil {
		return err
	}
	if dst.Drained {
		return ecode.Errorf(ecode.State, "Can't use drained node %s", dst.Name)
	}
	if err := checkNodeVMCapable(dst); err != nil {
		return err
	}
	if err := checkNodeOnline(src); err != nil {
		return err
	}
	lu.Target, lu.Up = dst.UUID, inst.AdminState == config.AdminUp
	be := config.Fill(p.Cfg.Cluster().BEParams, inst.BEParams)
	nd := need{hv: inst.Hypervisor, template: inst.DiskTemplate}
	for _, d := range inst.Disks {
		nd.diskMiB += d.SizeMiB
	}
	if !op.Bool("ignore_ipolicy") {
		nd.spec = instanceFullSpecs(p.Cfg.Cluster(), inst)
	}
	if lu.Up {
		nd.memMiB = config.MemoryMiB(be)
	}
	return p.checkNodeRoom(ctx, dst, nd, inst.UUID)
}

func (lu *instanceMoveLU) Steps() []Step {
	return []Step{
		{"shutdown", lu.shutdownSource},
		{"copy-disks", lu.copyDisks},
		{"switch", func(ctx context.Context, s *StepCtx) error { return setPrimary(s, lu.UUID, lu.Target) }},
		{"remove-old-disks", lu.removeSourceDisks},
		{"start", func(ctx context.Context, s *StepCtx) error {
			if !lu.Up {
				return nil
			}
			if err := startOn(ctx, s, lu.UUID, lu.Target); err != nil {
				node := lu.Target
				if dst, ok := s.Cfg().Node(lu.Target); ok {
					node = dst.Name
				}
				return ecode.ExecErrorf("Can't start instance %s on node %s: %w", lu.Name, node, err)
			}
			return nil
		}},
	}
}

func (lu *instanceMoveLU) shutdownSource(ctx context.Context, s *StepCtx) error {
	inst, err := s.Cfg().MustInstance(lu.UUID)
	if err != nil {
		return err
	}
	src, err := s.Cfg().MustNode(lu.Source)
	if err != nil {
		return err
	}
	s.Logf(ctx, "Shutting down instance %s on source node %s", inst.Name, src.Name)
	args := nodeapi.ShutdownArgs{Instance: s.p.Spec(inst), Timeout: s.Op().Int("shutdown_timeout")}
	if err := s.RPC(ctx, src, nodeapi.InstanceShutdown, args, nil); err != nil {
		if !s.Op().Bool("ignore_consistency") {
			return ecode.ExecErrorf("Could not shutdown instance %s on node %s: %w", inst.Name, src.Name, err)
		}
		s.Logf(ctx, "WARNING: Could not shutdown instance %s on node %s. Proceeding anyway. Please make sure node %s is down. Error details: %v",
			inst.Name, src.Name, src.Name, err)
	}
	return nil
}

// copyDisks creates the disks on the target and streams each one there
// from the source; a failed copy removes what the target got.
func (lu *instanceMoveLU) copyDisks(ctx context.Context, s *StepCtx) error {
	inst, err := s.Cfg().MustInstance(lu.UUID)
	if err != nil {
		return err
	}
	if len(inst.Disks) == 0 || inst.PrimaryNode == lu.Target {
		return nil
	}
	src, err := s.Cfg().MustNode(lu.Source)
	if err != nil {
		return err
	}
	dst, err := s.Cfg().MustNode(lu.Target)
	if err != nil {
		return err
	}
	there := inst.Clone()
	there.PrimaryNode = dst.UUID
	for i, d := range inst.Disks {
		args := nodeapi.DiskArgs{InstanceUUID: inst.UUID, Template: inst.DiskTemplate, SharedFileDir: s.Cfg().Cluster().SharedFileStorageDir,
			Disk: nodeapi.DiskSpec{UUID: d.UUID, Name: d.Name, Index: i, SizeMiB: d.SizeMiB, Mode: d.Mode, Params: s.p.nodeDiskParams(inst.DiskTemplate, dst.UUID)}}
		if err := s.RPC(ctx, dst, nodeapi.DiskCreate, args, &nodeapi.DiskReply{}); err != nil {
			s.Logf(ctx, "WARNING: Device creation failed")
			lu.removeDisks(ctx, s, inst, dst)
			return ecode.ExecErrorf("Creating disk %d of instance %s on node %s: %w", i, inst.Name, dst.Name, err)
		}
	}
	var ts []diskTransfer
	for i, d := range inst.Disks {
		ts = append(ts, diskTransfer{Component: "disk" + strconv.Itoa(i),
			Src: src, SrcIO: nodeapi.ImpExpIO{Kind: nodeapi.IODisk, Instance: s.p.Spec(inst), Disk: i, SizeMiB: d.SizeMiB},
			Dst: dst, DstIO: nodeapi.ImpExpIO{Kind: nodeapi.IODisk, Instance: s.p.Spec(there), Disk: i, SizeMiB: d.SizeMiB}})
	}
	s.Logf(ctx, "Copying %d disk(s) of %s from %s to %s", len(ts), inst.Name, src.Name, dst.Name)
	if err := s.runLocalTransfers(ctx, ts, s.Op().Str("compress")); err != nil {
		s.Logf(ctx, "WARNING: Some disks failed to copy, aborting")
		lu.removeDisks(ctx, s, inst, dst)
		return ecode.ExecErrorf("Errors during disk copy: %w", err)
	}
	return nil
}

func (lu *instanceMoveLU) removeSourceDisks(ctx context.Context, s *StepCtx) error {
	inst, err := s.Cfg().MustInstance(lu.UUID)
	if err != nil {
		return err
	}
	src, err := s.Cfg().MustNode(lu.Source)
	if err != nil {
		return err
	}
	s.Logf(ctx, "Removing the disks on the original node")
	lu.removeDisks(ctx, s, inst, src)
	return nil
}

// removeDisks removes the instance's disks on one node; a failure is
// logged and the watcher's disk sweep is left to find the leftovers.
func (lu *instanceMoveLU) removeDisks(ctx context.Context, s *StepCtx, inst *config.Instance, n *config.Node) {
	for i, d := range inst.Disks {
		args := nodeapi.DiskArgs{InstanceUUID: inst.UUID, Template: inst.DiskTemplate, SharedFileDir: s.Cfg().Cluster().SharedFileStorageDir,
			Disk: nodeapi.DiskSpec{UUID: d.UUID, Name: d.Name, Index: i, SizeMiB: d.SizeMiB, Mode: d.Mode, Params: s.p.nodeDiskParams(inst.DiskTemplate, n.UUID)}}
		if err := s.RPC(context.WithoutCancel(ctx), n, nodeapi.DiskRemove, args, nil); err != nil {
			s.Logf(ctx, "WARNING: Could not remove disk %d of %s on node %s: %v", i, inst.Name, n.Name, err)
		}
	}
}

func (lu *instanceMoveLU) Result() any { return nil }
