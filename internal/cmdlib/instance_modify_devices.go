package cmdlib

import (
	"context"
	"fmt"
	"slices"

	"github.com/corral/corral/internal/config"
	"github.com/corral/corral/internal/ecode"
	"github.com/corral/corral/internal/nodeapi"
	"github.com/corral/corral/internal/opcodes"
)

// prereqDevices checks the disk and NIC modifications and runtime_mem,
// prepares the new device lists and decides whether to hotplug.
func (lu *instanceSetParamsLU) prereqDevices(ctx context.Context, p *Processor, op *opcodes.Op, inst *config.Instance, node *config.Node) error {
	diskMods, err := parseDevMods("disk", op.List("disks"))
	if err != nil {
		return err
	}
	nicMods, err := parseDevMods("NIC", op.List("nics"))
	if err != nil {
		return err
	}
	rtMem, hasRTMem := op.Params["runtime_mem"].(float64)
	if len(diskMods) == 0 && len(nicMods) == 0 && !hasRTMem {
		return nil
	}
	if lu.Convert != "" && len(diskMods) > 0 {
		return ecode.Errorf(ecode.Inval, "Disk template conversion and other disk changes not supported at the same time")
	}
	if len(diskMods) > 0 || len(nicMods) > 0 || hasRTMem {
		if err := checkNodeOnline(node); err != nil {
			return err
		}
		if lu.Running, err = p.running(ctx, inst, node); err != nil {
			return err
		}
	}
	if hasRTMem {
		if err := lu.prereqRuntimeMem(p, op, inst, int64(rtMem)); err != nil {
			return err
		}
	}
	if len(diskMods) == 0 && len(nicMods) == 0 {
		return nil
	}
	lu.DevMods = true
	lu.Dev.Disks, lu.Dev.NICs = append([]config.Disk(nil), inst.Disks...), append([]config.NIC(nil), inst.NICs...)
	dch, err := prepareDiskMods(inst, diskMods, &lu.Dev)
	if err != nil {
		return err
	}
	nch, err := prepareNICMods(p, inst, node, nicMods, &lu.Dev)
	if err != nil {
		return err
	}
	if err := lu.checkHotplug(ctx, p, op, inst, node); err != nil {
		return err
	}
	if len(lu.Dev.RemovedDisks) > 0 && lu.Running && !lu.Hotplug {
		return ecode.Errorf(ecode.State, "Instance %s is running, can't remove volume from a running instance without using hotplug", inst.Name)
	}
	if lu.Dev.DiskGrowMiB > 0 {
		f, err := p.nodeFacts(ctx, node, inst.Hypervisor, inst.DiskTemplate)
		if err != nil {
			return err
		}
		if f.DiskFreeMiB < lu.Dev.DiskGrowMiB {
			return ecode.Errorf(ecode.NoRes, "Not enough disk space on node %s: required %d MiB, available %d MiB", node.Name, lu.Dev.DiskGrowMiB, f.DiskFreeMiB)
		}
	}
	lu.Changes = append(lu.Changes, dch...)
	lu.Changes = append(lu.Changes, nch...)
	return nil
}

// prereqRuntimeMem checks runtime_mem as Ganeti: the instance runs, and
// without force the value lies within minmem..maxmem.
func (lu *instanceSetParamsLU) prereqRuntimeMem(p *Processor, op *opcodes.Op, inst *config.Instance, mem int64) error {
	if !lu.Running {
		return ecode.Errorf(ecode.State, "Instance %s is not running", inst.Name)
	}
	be := config.Fill(p.Cfg.Cluster().BEParams, lu.BE)
	maxm, minm := int64(config.ParamInt(be["maxmem"], 128)), int64(config.ParamInt(be["minmem"], 128))
	if !op.Bool("force") && (mem > maxm || mem < minm) {
		return ecode.Errorf(ecode.Inval, "Instance %s must have memory between %d and %d MB of memory unless --force is given", inst.Name, minm, maxm)
	}
	if mem <= 0 {
		return ecode.Errorf(ecode.Inval, "runtime_mem must be positive, got %d", mem)
	}
	lu.RuntimeMem = mem
	lu.Changes = append(lu.Changes, [2]any{"runtime_memory", mem})
	return nil
}

// createDisks makes the added disks on the primary node.
func (lu *instanceSetParamsLU) createDisks(ctx context.Context, s *StepCtx) error {
	if len(lu.Dev.AddedDisks) == 0 {
		return nil
	}
	inst, node, err := lu.load(s.p, s.Op())
	if err != nil {
		return err
	}
	for _, idx := range lu.Dev.AddedDisks {
		d := lu.Dev.Disks[idx]
		s.Logf(ctx, "Creating disk %d (%d MiB) of instance %s on node %s", idx, d.SizeMiB, inst.Name, node.Name)
		args := nodeapi.DiskArgs{InstanceUUID: inst.UUID, Template: inst.DiskTemplate, SharedFileDir: s.Cfg().Cluster().SharedFileStorageDir,
			Disk: nodeapi.DiskSpec{UUID: d.UUID, Name: d.Name, Index: idx, SizeMiB: d.SizeMiB, Mode: d.Mode, Params: s.p.nodeDiskParams(inst.DiskTemplate, node.UUID)}}
		if err := s.RPC(ctx, node, nodeapi.DiskCreate, args, &nodeapi.DiskReply{}); err != nil {
			return ecode.ExecErrorf("Creating disk %d of instance %s on node %s: %w", idx, inst.Name, node.Name, err)
		}
	}
	return nil
}

// hotRemove unplugs the removed disks and NICs from the running instance
// before the configuration forgets them.
func (lu *instanceSetParamsLU) hotRemove(ctx context.Context, s *StepCtx) error {
	if !lu.Hotplug {
		return nil
	}
	inst, node, err := lu.load(s.p, s.Op())
	if err != nil {
		return err
	}
	if len(lu.Dev.RemovedDisks) == 0 && len(lu.Dev.RemovedNICs) == 0 {
		return nil
	}
	if len(inst.Disks) != len(lu.Dev.Disks)+len(lu.Dev.RemovedDisks)-len(lu.Dev.AddedDisks) {
		return nil // the configuration already changed: a repeated step
	}
	spec := s.p.Spec(inst)
	for _, r := range lu.Dev.RemovedDisks {
		msg := s.hotplug(ctx, node, nodeapi.HotplugArgs{Instance: spec, Action: nodeapi.HotplugRemove, Target: nodeapi.HotplugDisk, Index: r.Index})
		lu.Changes = append(lu.Changes, [2]any{fmt.Sprintf("disk/%d", r.Index), msg})
	}
	for _, idx := range lu.Dev.RemovedNICs {
		msg := s.hotplug(ctx, node, nodeapi.HotplugArgs{Instance: spec, Action: nodeapi.HotplugRemove, Target: nodeapi.HotplugNIC, Index: idx})
		lu.Changes = append(lu.Changes, [2]any{fmt.Sprintf("nic/%d", idx), msg})
	}
	return nil
}

// hotAdd plugs the added disks and NICs into the running instance, or says
// when the change waits for the next start.
func (lu *instanceSetParamsLU) hotAdd(ctx context.Context, s *StepCtx) error {
	if !lu.DevMods {
		return nil
	}
	inst, node, err := lu.load(s.p, s.Op())
	if err != nil {
		return err
	}
	if !lu.Hotplug {
		if lu.Running {
			s.Logf(ctx, "Instance %s is running: the disk and NIC changes take effect at its next start (use --hotplug to apply them now)", inst.Name)
		}
		return nil
	}
	spec := s.p.Spec(inst)
	for _, idx := range lu.Dev.AddedDisks {
		msg := s.hotplug(ctx, node, nodeapi.HotplugArgs{Instance: spec, Action: nodeapi.HotplugAdd, Target: nodeapi.HotplugDisk, Index: idx})
		lu.Changes = append(lu.Changes, [2]any{fmt.Sprintf("disk/%d", idx), msg})
	}
	for _, idx := range lu.Dev.AddedNICs {
		msg := s.hotplug(ctx, node, nodeapi.HotplugArgs{Instance: spec, Action: nodeapi.HotplugAdd, Target: nodeapi.HotplugNIC, Index: idx})
		lu.Changes = append(lu.Changes, [2]any{fmt.Sprintf("nic.%d", idx), msg})
	}
	// A changed NIC is replaced, as Ganeti's hot-modify: unplugged and
	// plugged again with the same id and slot (the guest may lose its
	// connection for a moment).
	for _, idx := range lu.Dev.ModifiedNICs {
		if slices.Contains(lu.Dev.AddedNICs, idx) {
			continue
		}
		msg := s.hotplug(ctx, node, nodeapi.HotplugArgs{Instance: spec, Action: nodeapi.HotplugRemove, Target: nodeapi.HotplugNIC, Index: idx})
		if msg == "hotplug:done" {
			msg = s.hotplug(ctx, node, nodeapi.HotplugArgs{Instance: spec, Action: nodeapi.HotplugAdd, Target: nodeapi.HotplugNIC, Index: idx})
		}
		lu.Changes = append(lu.Changes, [2]any{fmt.Sprintf("nic/%d", idx), msg})
	}
	return nil
}

// removeDisks deletes the removed disks' storage; a node that does not
// answer removes them later (recorded with the configuration).
func (lu *instanceSetParamsLU) removeDisks(ctx context.Context, s *StepCtx) error {
	if len(lu.Dev.RemovedDisks) == 0 {
		return nil
	}
	inst, node, err := lu.load(s.p, s.Op())
	if err != nil {
		return err
	}
	for _, r := range lu.Dev.RemovedDisks {
		d := r.Disk
		args := nodeapi.DiskArgs{InstanceUUID: inst.UUID, Template: inst.DiskTemplate, SharedFileDir: s.Cfg().Cluster().SharedFileStorageDir,
			Disk: nodeapi.DiskSpec{UUID: d.UUID, Name: d.Name, Index: r.Index, SizeMiB: d.SizeMiB, Mode: d.Mode, Params: s.p.nodeDiskParams(inst.DiskTemplate, node.UUID)}}
		if err := s.RPC(ctx, node, nodeapi.DiskRemove, args, nil); err != nil {
			return ecode.ExecErrorf("Removing disk %d of instance %s on node %s: %w", r.Index, inst.Name, node.Name, err)
		}
	}
	return nil
}

// setRuntimeMemory moves the running instance's balloon.
func (lu *instanceSetParamsLU) setRuntimeMemory(ctx context.Context, s *StepCtx) error {
	if lu.RuntimeMem == 0 {
		return nil
	}
	inst, node, err := lu.load(s.p, s.Op())
	if err != nil {
		return err
	}
	args := nodeapi.HotplugArgs{Instance: s.p.Spec(inst), Action: nodeapi.HotplugMemory, MemoryMiB: lu.RuntimeMem}
	if err := s.RPC(ctx, node, nodeapi.Hotplug, args, nil); err != nil {
		return ecode.ExecErrorf("Could not set the memory of instance %s to %d MiB: %w", inst.Name, lu.RuntimeMem, err)
	}
	return nil
}

// prereqPrimary checks pnode (Ganeti's --new-primary): the instance is
// stopped (unless forced, as Ganeti) and its disks are visible on the new
// node. A file instance's disks are on its node: instance move copies them.
func (lu *instanceSetParamsLU) prereqPrimary(ctx context.Context, p *Processor, op *opcodes.Op, inst *config.Instance, node *config.Node) error {
	name := op.Str("pnode")
	if name == "" {
		return nil
	}
	dst, err := p.Cfg.MustNode(name)
	if err != nil {
		return err
	}
	if dst.UUID == inst.PrimaryNode {
		return nil
	}
	switch inst.DiskTemplate {
	case config.DTSharedFile, config.DTRBD, config.DTDiskless:
	default:
		return ecode.Errorf(ecode.Inval, "Instance %s has disk template '%s': its disks are on node %s only; use instance move (OP_INSTANCE_MOVE) to copy them to %s",
			inst.Name, inst.DiskTemplate, node.Name, dst.Name)
	}
	if err := checkNodeOnline(dst); err != nil {
		return err
	}
	if err := checkNodeVMCapable(dst); err != nil {
		return err
	}
	if !op.Bool("force") && !node.Offline {
		run, err := p.running(ctx, inst, node)
		if err != nil {
			return err
		}
		if run {
			return ecode.Errorf(ecode.State, "Instance is still running on %s", node.Name)
		}
	}
	lu.NewPrimary = dst.UUID
	return nil
}
