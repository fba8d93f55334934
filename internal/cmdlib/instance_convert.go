package cmdlib

import (
	"context"

	"github.com/corral/corral/internal/config"
	"github.com/corral/corral/internal/ecode"
	"github.com/corral/corral/internal/nodeapi"
	"github.com/corral/corral/internal/opcodes"
)

// diskConversions are the template changes instance modify -t makes: the
// node copies each disk (blockdev_convert), between any two of file,
// sharedfile and rbd.
var diskConversions = map[[2]string]bool{
	{config.DTFile, config.DTRBD}:        true,
	{config.DTRBD, config.DTFile}:        true,
	{config.DTFile, config.DTSharedFile}: true,
	{config.DTSharedFile, config.DTFile}: true,
	{config.DTSharedFile, config.DTRBD}:  true,
	{config.DTRBD, config.DTSharedFile}:  true,
}

// prereqConvert checks a disk_template change: the instance stopped, the
// pair supported, the target enabled and its parameters usable.
func (lu *instanceSetParamsLU) prereqConvert(p *Processor, op *opcodes.Op, inst *config.Instance) error {
	to := op.Str("disk_template")
	if to == "" || to == inst.DiskTemplate {
		return nil
	}
	if !diskConversions[[2]string{inst.DiskTemplate, to}] {
		return ecode.Errorf(ecode.Inval, "Unsupported disk template conversion from %s to %s", inst.DiskTemplate, to)
	}
	c := p.Cfg.Cluster()
	if !contains(c.EnabledDiskTemplates, to) {
		return ecode.Errorf(ecode.State, "Disk template '%s' is not enabled in the cluster", to)
	}
	if inst.AdminState == config.AdminUp {
		return ecode.Errorf(ecode.State, "Instance '%s' is marked to be up; shut it down before changing its disk template", inst.Name)
	}
	if to == config.DTSharedFile && c.SharedFileStorageDir == "" {
		return ecode.Errorf(ecode.State, "Disk template sharedfile needs the cluster's shared_file_storage_dir (cluster modify --shared-file-storage-dir)")
	}
	if err := refuseInRescue(p, inst, "change its disk template"); err != nil {
		return err
	}
	lu.Convert = to
	lu.Changes = append(lu.Changes, [2]any{"disk_template", to})
	return nil
}

// convertDisks has the primary node copy every disk to the new template.
func (lu *instanceSetParamsLU) convertDisks(ctx context.Context, s *StepCtx) error {
	if lu.Convert == "" {
		return nil
	}
	inst, node, err := lu.load(s.p, s.Op())
	if err != nil {
		return err
	}
	if inst.DiskTemplate == lu.Convert {
		return nil // resumed after the configuration changed
	}
	for i, d := range inst.Disks {
		s.Logf(ctx, "Copying disk %d (%d MiB) from %s to %s", i, d.SizeMiB, inst.DiskTemplate, lu.Convert)
		spec := nodeapi.DiskSpec{UUID: d.UUID, Name: d.Name, Index: i, SizeMiB: d.SizeMiB, Mode: d.Mode}
		args := nodeapi.DiskConvertArgs{InstanceUUID: inst.UUID, FromTemplate: inst.DiskTemplate, ToTemplate: lu.Convert, From: spec, To: spec,
			SharedFileDir: s.Cfg().Cluster().SharedFileStorageDir}
		args.From.Params = s.p.nodeDiskParams(inst.DiskTemplate, node.UUID)
		args.To.Params = s.p.nodeDiskParams(lu.Convert, node.UUID)
		if err := s.RPC(ctx, node, nodeapi.DiskConvert, args, &nodeapi.DiskReply{}); err != nil {
			return ecode.ExecErrorf("Converting disk %d of instance %s on node %s: %w", i, inst.Name, node.Name, err)
		}
	}
	return nil
}

// removeOldDisks drops the disks of the previous template once the
// configuration names the new one; a failure leaves them and says so.
func (lu *instanceSetParamsLU) removeOldDisks(ctx context.Context, s *StepCtx) error {
	if lu.Convert == "" || lu.ConvertedFrom == "" {
		return nil
	}
	inst, node, err := lu.load(s.p, s.Op())
	if err != nil {
		return err
	}
	for i, d := range inst.Disks {
		args := nodeapi.DiskArgs{InstanceUUID: inst.UUID, Template: lu.ConvertedFrom, SharedFileDir: s.Cfg().Cluster().SharedFileStorageDir,
			Disk: nodeapi.DiskSpec{UUID: d.UUID, Index: i, SizeMiB: d.SizeMiB, Mode: d.Mode,
				Params: s.p.nodeDiskParams(lu.ConvertedFrom, node.UUID)}}
		if err := s.RPC(ctx, node, nodeapi.DiskRemove, args, nil); err != nil {
			s.Logf(ctx, "Warning: could not remove the old %s disk %d of %s: %v", lu.ConvertedFrom, i, inst.Name, err)
		}
	}
	return nil
}
