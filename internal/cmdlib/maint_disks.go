package cmdlib

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"

	"github.com/corral/corral/internal/config"
	"github.com/corral/corral/internal/engine"
	"github.com/corral/corral/internal/locking"
	"github.com/corral/corral/internal/nodeapi"
	"github.com/corral/corral/internal/opcodes"
)

// maintDiskUnits check the instances' disks against the nodes (Ganeti's
// verify-disks) and record the sizes the nodes report (repair-disk-sizes).
func (p *Processor) maintDiskUnits() []engine.Op {
	return []engine.Op{
		p.unit("OP_CLUSTER_VERIFY_DISKS", func() LU { return &childJobsLU{plan: (*childJobsLU).planVerifyDisks} }),
		p.unit("OP_GROUP_VERIFY_DISKS", func() LU { return &groupVerifyDisksLU{} }),
		p.unit("OP_CLUSTER_REPAIR_DISK_SIZES", func() LU { return &repairDiskSizesLU{} }),
	}
}

// planVerifyDisks plans one OP_GROUP_VERIFY_DISKS job per node group (the
// named one only when group_name is given), as Ganeti does.
func (lu *childJobsLU) planVerifyDisks(ctx context.Context, p *Processor, op *opcodes.Op) error {
	groups := p.Cfg.Groups()
	if name := op.Str("group_name"); name != "" {
		g, err := p.mustGroup(name)
		if err != nil {
			return err
		}
		groups = []*config.NodeGroup{g}
	}
	lu.Jobs = nil
	for _, g := range groups {
		b, err := json.Marshal(map[string]any{"OP_ID": "OP_GROUP_VERIFY_DISKS", "group_name": g.Name})
		if err != nil {
			return fmt.Errorf("encoding the verification job of group %s: %w", g.Name, err)
		}
		lu.Jobs = append(lu.Jobs, []json.RawMessage{b})
	}
	return nil
}

// ---- OP_GROUP_VERIFY_DISKS

// groupVerifyDisksLU lists the disks on every node of a group holding
// instances and compares them with the configuration. Its result is
// Ganeti's triple: errors per node that could not be asked, instances whose
// disks need activation (none: a present file or rbd image is active), and
// per instance the [node, disk] pairs that are missing or shorter than
// recorded.
type groupVerifyDisksLU struct {
	Group      string                `json:"group"` // uuid
	NodeErrors map[string]string     `json:"node_errors"`
	Missing    map[string][][]string `json:"missing"`
}

func (lu *groupVerifyDisksLU) Locks(p *Processor, op *opcodes.Op) []locking.Request {
	reqs := []locking.Request{bgl(locking.Shared), instLock(locking.Shared, locking.All)}
	if g, ok := p.Cfg.Group(op.Str("group_name")); ok {
		reqs = append(reqs, groupLock(locking.Shared, g.UUID))
	}
	return reqs
}

func (lu *groupVerifyDisksLU) Prereq(ctx context.Context, p *Processor, op *opcodes.Op) error {
	g, err := p.mustGroup(op.Str("group_name"))
	if err != nil {
		return err
	}
	lu.Group = g.UUID
	return nil
}

func (lu *groupVerifyDisksLU) Steps() []Step {
	return []Step{{"verify disks", lu.verify}}
}

func (lu *groupVerifyDisksLU) verify(ctx context.Context, s *StepCtx) error {
	lu.NodeErrors, lu.Missing = map[string]string{}, map[string][][]string{}
	byNode := map[string][]*config.Instance{}
	for _, i := range s.Cfg().Instances() {
		if len(i.Disks) > 0 {
			byNode[i.PrimaryNode] = append(byNode[i.PrimaryNode], i)
		}
	}
	for _, n := range s.Cfg().Nodes() {
		insts := byNode[n.UUID]
		if n.Group != lu.Group || len(insts) == 0 || n.Offline || !n.VMCapable {
			continue
		}
		var found []nodeapi.FoundDisk
		if err := s.p.RPC.Call(ctx, n, nodeapi.DiskList, "", struct{}{}, &found); err != nil {
			lu.NodeErrors[n.Name] = err.Error()
			s.Logf(ctx, "Cannot list the disks of node %s: %v", n.Name, err)
			continue
		}
		for _, i := range insts {
			for idx, d := range i.Disks {
				f, ok := findDisk(found, i.UUID, idx, d)
				switch {
				case !ok:
					s.Logf(ctx, "Instance %s: %s is missing on node %s", i.Name, ivName(idx), n.Name)
					lu.Missing[i.Name] = append(lu.Missing[i.Name], []string{n.Name, ivName(idx)})
				case f.SizeMiB < d.SizeMiB:
					s.Logf(ctx, "Instance %s: %s (%s) is %d MiB on node %s, the configuration says %d MiB",
						i.Name, ivName(idx), f.Path, f.SizeMiB, n.Name, d.SizeMiB)
					lu.Missing[i.Name] = append(lu.Missing[i.Name], []string{n.Name, f.Path})
				}
			}
		}
	}
	return nil
}

func (lu *groupVerifyDisksLU) Result() any {
	for _, l := range lu.Missing {
		sort.Slice(l, func(a, b int) bool { return l[a][0]+"\x00"+l[a][1] < l[b][0]+"\x00"+l[b][1] })
	}
	return []any{lu.NodeErrors, []string{}, lu.Missing}
}

// ---- OP_CLUSTER_REPAIR_DISK_SIZES

// repairDiskSizesLU asks each primary node for the sizes of the named
// instances' disks (all instances when none is named) and records those
// that differ from the configuration. Its result is Ganeti's list of
// [instance, disk index, "size", new size in MiB]. A node that cannot be
// asked, or a disk it does not have, is a warning in the job log: nothing is
// recorded for it.
type repairDiskSizesLU struct {
	Instances []string `json:"instances"` // names, sorted
	Changed   [][]any  `json:"changed"`
}

func (lu *repairDiskSizesLU) Locks(p *Processor, op *opcodes.Op) []locking.Request {
	names := op.Strings("instances")
	if len(names) == 0 {
		return []locking.Request{bgl(locking.Shared), instLock(locking.Exclusive, locking.All), nodeResLock(locking.Shared, locking.All)}
	}
	var locks, nodes []string
	for _, name := range names {
		locks = append(locks, lockName(p, name))
		if i, ok := p.Cfg.Instance(name); ok {
			nodes = append(nodes, i.PrimaryNode)
		}
	}
	return []locking.Request{bgl(locking.Shared), instLock(locking.Exclusive, locks...), nodeResLock(locking.Shared, nodes...)}
}

func (lu *repairDiskSizesLU) Prereq(ctx context.Context, p *Processor, op *opcodes.Op) error {
	lu.Instances = nil
	names := op.Strings("instances")
	if len(names) == 0 {
		for _, i := range p.Cfg.Instances() {
			lu.Instances = append(lu.Instances, i.Name)
		}
		return nil
	}
	for _, name := range names {
		i, err := p.Cfg.MustInstance(name)
		if err != nil {
			return err
		}
		lu.Instances = append(lu.Instances, i.Name)
	}
	sort.Strings(lu.Instances)
	return nil
}

func (lu *repairDiskSizesLU) Steps() []Step {
	return []Step{{"repair disk sizes", lu.repair}}
}

func (lu *repairDiskSizesLU) repair(ctx context.Context, s *StepCtx) error {
	lu.Changed = [][]any{}
	found := map[string][]nodeapi.FoundDisk{} // node uuid -> its disks
	failed := map[string]bool{}
	for _, name := range lu.Instances {
		inst, ok := s.Cfg().Instance(name)
		if !ok || len(inst.Disks) == 0 {
			continue
		}
		node, ok := s.Cfg().Node(inst.PrimaryNode)
		if !ok || failed[node.UUID] {
			continue
		}
		disks, asked := found[node.UUID]
		if !asked {
			if node.Offline {
				s.Logf(ctx, "Warning: node %s is offline, not checking the disks of its instances", node.Name)
				failed[node.UUID] = true
				continue
			}
			if err := s.p.RPC.Call(ctx, node, nodeapi.DiskList, "", struct{}{}, &disks); err != nil {
				s.Logf(ctx, "Warning: cannot list the disks of node %s, ignoring it: %v", node.Name, err)
				failed[node.UUID] = true
				continue
			}
			found[node.UUID] = disks
		}
		changed := false
		for idx, d := range inst.Disks {
			f, ok := findDisk(disks, inst.UUID, idx, d)
			if !ok {
				s.Logf(ctx, "Warning: disk %d of instance %s is not on node %s, ignoring it", idx, inst.Name, node.Name)
				continue
			}
			if f.SizeMiB == d.SizeMiB {
				continue
			}
			s.Logf(ctx, "Disk %d of instance %s has mismatched size, correcting: recorded %d, actual %d", idx, inst.Name, d.SizeMiB, f.SizeMiB)
			inst.Disks[idx].SizeMiB = f.SizeMiB
			lu.Changed = append(lu.Changed, []any{inst.Name, idx, "size", f.SizeMiB})
			changed = true
		}
		if changed {
			s.Tx().PutInstance(inst)
		}
	}
	return nil
}

func (lu *repairDiskSizesLU) Result() any {
	if lu.Changed == nil {
		return [][]any{}
	}
	return lu.Changed
}
