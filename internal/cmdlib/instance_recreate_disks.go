package cmdlib

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/corral/corral/internal/config"
	"github.com/corral/corral/internal/ecode"
	"github.com/corral/corral/internal/locking"
	"github.com/corral/corral/internal/nodeapi"
	"github.com/corral/corral/internal/opcodes"
)

// recreatedDisk is one disk OP_INSTANCE_RECREATE_DISKS makes afresh, with
// the size and mode it will have.
type recreatedDisk struct {
	Index   int    `json:"index"`
	SizeMiB int64  `json:"size"`
	Mode    string `json:"mode"`
}

// instanceRecreateDisksLU is Ganeti's LUInstanceRecreateDisks for the
// templates whose disks live on one node or in shared storage (file,
// sharedfile, rbd): the chosen disks are removed where they are and made
// again, empty, with their recorded (or newly given) size and mode,
// optionally on a new primary node. The configuration changes first, as in
// Ganeti, so a failed creation is finished by running the op again.
type instanceRecreateDisksLU struct {
	instanceBase
	Disks []recreatedDisk `json:"disks"`
	// NewPrimary is the uuid of the node the disks move to; "": they stay.
	NewPrimary string `json:"new_primary,omitempty"`
	// OldPrimaryName is the node left with the old disks of a file
	// instance that changed node, for the warning.
	OldPrimaryName string `json:"old_primary_name,omitempty"`
}

// recreateDiskParams are the disk parameters recreate may change (Ganeti's
// _MODIFYABLE); spindles only matter with exclusive storage, which Corral
// does not have.
var recreateDiskParams = []string{"size", "mode", "spindles"}

func (lu *instanceRecreateDisksLU) Locks(p *Processor, op *opcodes.Op) []locking.Request {
	if op.Str("iallocator") != "" {
		// The allocator may choose any node: their space is checked, then used.
		name := lockName(p, op.Str("instance_name"))
		lu.locked = []string{name}
		return []locking.Request{bgl(locking.Shared), instLock(locking.Exclusive, name),
			nodeLock(locking.Shared, locking.All), nodeResLock(locking.Exclusive, locking.All)}
	}
	reqs := lu.locks(p, op, locking.Exclusive)
	inst, ok := p.Cfg.Instance(op.Str("instance_name"))
	if !ok {
		return reqs
	}
	res := []string{inst.PrimaryNode}
	for _, name := range op.Strings("nodes") {
		if n, ok := p.Cfg.Node(name); ok && n.UUID != inst.PrimaryNode {
			reqs = append(reqs, nodeLock(locking.Shared, n.UUID))
			res = append(res, n.UUID)
		}
	}
	return append(reqs, nodeResLock(locking.Exclusive, res...))
}

func (lu *instanceRecreateDisksLU) Prereq(ctx context.Context, p *Processor, op *opcodes.Op) error {
	changes, err := parseRecreateDisks(op.List("disks"))
	if err != nil {
		return err
	}
	nodes, ialloc := op.Strings("nodes"), op.Str("iallocator")
	if ialloc != "" && len(nodes) > 0 {
		return ecode.Errorf(ecode.Inval, "Do not specify both, iallocator and node")
	}
	inst, oldNode, err := lu.load(p, op)
	if err != nil {
		return err
	}
	var target *config.Node
	if len(nodes) > 0 {
		if len(nodes) != 1 {
			return ecode.Errorf(ecode.Inval, "Instance %s currently has 1 nodes, but %d replacement nodes were specified", inst.Name, len(nodes))
		}
		if target, err = p.Cfg.MustNode(nodes[0]); err != nil {
			return err
		}
	}
	if ialloc == "" {
		check := oldNode
		if target != nil {
			check = target
		}
		if err := checkNodeOnline(check); err != nil {
			return err
		}
	}
	if len(inst.Disks) == 0 {
		return ecode.Errorf(ecode.Inval, "Instance '%s' has no disks", inst.Name)
	}
	if err := refuseInRescue(p, inst, "recreate its disks"); err != nil {
		return err
	}
	// A new node for an instance whose primary is offline: its state
	// cannot be asked, and Ganeti does not ask.
	if !((ialloc != "" || target != nil) && oldNode.Offline) {
		if err := lu.checkStopped(ctx, p, inst, oldNode); err != nil {
			return err
		}
	}
	if err := lu.plan(inst, changes, ialloc != "" || target != nil); err != nil {
		return err
	}
	if ialloc != "" {
		if target, err = lu.placeWith(ctx, p, ialloc, inst); err != nil {
			return err
		}
	}
	if target != nil && target.UUID != inst.PrimaryNode {
		if err := lu.checkTarget(ctx, p, inst, target); err != nil {
			return err
		}
		lu.NewPrimary = target.UUID
		if inst.DiskTemplate == config.DTFile {
			lu.OldPrimaryName = oldNode.Name
		}
		return nil
	}
	return lu.checkGrowth(ctx, p, inst, oldNode)
}

// parseRecreateDisks reads the disks parameter: a list of indices (Ganeti's
// older form) or of [index, {size, mode}] pairs.
func parseRecreateDisks(raw []any) (map[int]map[string]any, error) {
	out := map[int]map[string]any{}
	var dup []string
	for _, r := range raw {
		idx, params, err := recreateDiskEntry(r)
		if err != nil {
			return nil, err
		}
		if _, seen := out[idx]; seen {
			dup = append(dup, strconv.Itoa(idx))
		}
		for k := range params {
			if !slices.Contains(recreateDiskParams, k) {
				return nil, ecode.Errorf(ecode.Inval, "Parameters for disk %d try to change unmodifyable parameter(s): %s", idx, k)
			}
		}
		if _, ok := params["spindles"]; ok {
			return nil, ecode.Errorf(ecode.Inval, "Spindles in instance disks cannot be specified as exclusive storage is not active")
		}
		out[idx] = params
	}
	if len(dup) > 0 {
		return nil, ecode.Errorf(ecode.Inval, "Some disks have been specified more than once: %s", strings.Join(dup, ", "))
	}
	return out, nil
}

func recreateDiskEntry(r any) (int, map[string]any, error) {
	bad := ecode.Errorf(ecode.Inval, "Invalid disks entry %v: expected a disk index or [index, {parameters}]", r)
	asIndex := func(v any) (int, bool) {
		f, ok := v.(float64)
		if !ok || f < 0 || f != float64(int(f)) {
			return 0, false
		}
		return int(f), true
	}
	if idx, ok := asIndex(r); ok {
		return idx, map[string]any{}, nil
	}
	pair, ok := r.([]any)
	if !ok || len(pair) != 2 {
		return 0, nil, bad
	}
	idx, ok := asIndex(pair[0])
	params, pok := pair[1].(map[string]any)
	if !ok || !pok {
		return 0, nil, bad
	}
	return idx, params, nil
}

// checkStopped is Ganeti's CheckInstanceState(INSTANCE_NOT_RUNNING).
func (lu *instanceRecreateDisksLU) checkStopped(ctx context.Context, p *Processor, inst *config.Instance, node *config.Node) error {
	if inst.AdminState == config.AdminUp {
		return ecode.Errorf(ecode.State, "Instance '%s' is marked to be up, cannot recreate disks", inst.Name)
	}
	if node.Offline {
		return nil
	}
	run, err := p.running(ctx, inst, node)
	if err != nil {
		return ecode.Errorf(ecode.State, "Cannot tell whether instance %s runs on node %s: %w", inst.Name, node.Name, err)
	}
	if run {
		return ecode.Errorf(ecode.State, "Instance %s is running, cannot recreate disks", inst.Name)
	}
	return nil
}

// plan fills Disks: the chosen disks with their new size and mode.
func (lu *instanceRecreateDisksLU) plan(inst *config.Instance, changes map[int]map[string]any, moving bool) error {
	if len(changes) == 0 {
		for i := range inst.Disks {
			changes[i] = map[string]any{}
		}
	}
	idxs := make([]int, 0, len(changes))
	for i := range changes {
		idxs = append(idxs, i)
	}
	sort.Ints(idxs)
	if last := idxs[len(idxs)-1]; last >= len(inst.Disks) {
		return ecode.Errorf(ecode.Inval, "Invalid disk index '%d'", last)
	}
	if moving && len(idxs) != len(inst.Disks) {
		return ecode.Errorf(ecode.Inval, "Can't recreate disks partially and change the nodes at the same time")
	}
	lu.Disks = nil
	for _, i := range idxs {
		d := recreatedDisk{Index: i, SizeMiB: inst.Disks[i].SizeMiB, Mode: inst.Disks[i].Mode}
		if v, ok := changes[i]["size"]; ok {
			size, err := recreateSize(v)
			if err != nil {
				return ecode.Errorf(ecode.Inval, "Disk %d: %w", i, err)
			}
			d.SizeMiB = size
		}
		if v, ok := changes[i]["mode"]; ok {
			mode, _ := v.(string)
			if mode != "rw" && mode != "ro" {
				return ecode.Errorf(ecode.Inval, "Disk %d: invalid mode '%v' (rw or ro)", i, v)
			}
			d.Mode = mode
		}
		lu.Disks = append(lu.Disks, d)
	}
	return nil
}

// recreateSize reads a size in MiB: a positive integer, or a string of
// one, as Ganeti's size type accepts.
func recreateSize(v any) (int64, error) {
	var f float64
	switch x := v.(type) {
	case float64:
		f = x
	case string:
		n, err := strconv.ParseInt(x, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("invalid size '%s' (MiB, a positive integer): %w", x, err)
		}
		f = float64(n)
	default:
		return 0, fmt.Errorf("invalid size %v (MiB, a positive integer)", v)
	}
	if f <= 0 || f != float64(int64(f)) {
		return 0, fmt.Errorf("invalid size %v (MiB, a positive integer)", v)
	}
	return int64(f), nil
}

// recreateNeed is what the instance needs on a new primary node.
func (lu *instanceRecreateDisksLU) recreateNeed(p *Processor, inst *config.Instance, group string) need {
	be := config.Fill(p.Cfg.Cluster().BEParams, inst.BEParams)
	nd := need{hv: inst.Hypervisor, template: inst.DiskTemplate, memMiB: config.MemoryMiB(be), group: group}
	if inst.DiskTemplate == config.DTFile {
		for _, d := range lu.Disks {
			nd.diskMiB += d.SizeMiB
		}
	}
	return nd
}

// placeWith runs the allocator for a new primary node in the instance's
// group (Ganeti locks only that group's nodes for the choice).
func (lu *instanceRecreateDisksLU) placeWith(ctx context.Context, p *Processor, name string, inst *config.Instance) (*config.Node, error) {
	alloc, err := p.allocatorFor(name)
	if err != nil {
		return nil, err
	}
	group := ""
	if n, ok := p.Cfg.Node(inst.PrimaryNode); ok {
		group = n.Group
	}
	sized := *inst
	sized.Disks = slices.Clone(inst.Disks)
	for _, d := range lu.Disks {
		sized.Disks[d.Index].SizeMiB, sized.Disks[d.Index].Mode = d.SizeMiB, d.Mode
	}
	return p.placeNew(ctx, alloc, &sized, lu.recreateNeed(p, inst, group))
}

// checkTarget checks a new primary node as instance creation checks one.
func (lu *instanceRecreateDisksLU) checkTarget(ctx context.Context, p *Processor, inst *config.Instance, n *config.Node) error {
	if err := checkNodeOnline(n); err != nil {
		return err
	}
	if err := checkNodeVMCapable(n); err != nil {
		return err
	}
	return p.checkNodeRoom(ctx, n, lu.recreateNeed(p, inst, ""), inst.UUID)
}

// checkGrowth checks the node has room for disks made bigger than they
// were (a file or shared file disk takes its size from the node's storage).
func (lu *instanceRecreateDisksLU) checkGrowth(ctx context.Context, p *Processor, inst *config.Instance, node *config.Node) error {
	var grow int64
	for _, d := range lu.Disks {
		grow += max(d.SizeMiB-inst.Disks[d.Index].SizeMiB, 0)
	}
	if grow == 0 || inst.DiskTemplate == config.DTRBD {
		return nil
	}
	f, err := p.nodeFacts(ctx, node, inst.Hypervisor, inst.DiskTemplate)
	if err != nil {
		return err
	}
	if f.DiskFreeMiB < grow {
		return ecode.Errorf(ecode.NoRes, "Not enough disk space on node %s: required %d MiB, available %d MiB", node.Name, grow, f.DiskFreeMiB)
	}
	return nil
}

func (lu *instanceRecreateDisksLU) Steps() []Step {
	return []Step{{"configure", lu.configure}, {"recreate", lu.recreate}}
}

// configure records the disks' new sizes and modes and the new primary
// node; repeating it writes the same values.
func (lu *instanceRecreateDisksLU) configure(ctx context.Context, s *StepCtx) error {
	inst, _, err := lu.load(s.p, s.Op())
	if err != nil {
		return err
	}
	for _, d := range lu.Disks {
		if d.Index >= len(inst.Disks) {
			return ecode.ExecErrorf("disk %d of instance %s disappeared", d.Index, inst.Name)
		}
		inst.Disks[d.Index].SizeMiB, inst.Disks[d.Index].Mode = d.SizeMiB, d.Mode
	}
	if lu.NewPrimary != "" && inst.PrimaryNode != lu.NewPrimary {
		inst.PrimaryNode = lu.NewPrimary
		if lu.OldPrimaryName != "" {
			s.Logf(ctx, "Changing the instance's nodes, you will have to remove any disks left on the older nodes manually (node %s)", lu.OldPrimaryName)
		}
	}
	s.Tx().PutInstance(inst)
	return nil
}

// recreate removes each chosen disk on the primary node and makes it
// again, empty. The node keeps a record of each call by its operation id,
// so a repeated step does not remove a disk made by its first run.
func (lu *instanceRecreateDisksLU) recreate(ctx context.Context, s *StepCtx) error {
	inst, node, err := lu.load(s.p, s.Op())
	if err != nil {
		return err
	}
	for _, rd := range lu.Disks {
		d := inst.Disks[rd.Index]
		args := nodeapi.DiskArgs{InstanceUUID: inst.UUID, Template: inst.DiskTemplate, SharedFileDir: s.Cfg().Cluster().SharedFileStorageDir,
			Disk: nodeapi.DiskSpec{UUID: d.UUID, Name: d.Name, Index: rd.Index, SizeMiB: d.SizeMiB, Mode: d.Mode, Params: s.p.nodeDiskParams(inst.DiskTemplate, node.UUID)}}
		s.Logf(ctx, "Recreating disk %d (%d MiB) of instance %s on node %s", rd.Index, d.SizeMiB, inst.Name, node.Name)
		if err := s.RPC(ctx, node, nodeapi.DiskRemove, args, nil); err != nil {
			return ecode.ExecErrorf("Removing the old disk %d of instance %s on node %s: %w", rd.Index, inst.Name, node.Name, err)
		}
		if err := s.RPC(ctx, node, nodeapi.DiskCreate, args, &nodeapi.DiskReply{}); err != nil {
			return ecode.ExecErrorf("Creating disk %d of instance %s on node %s: %w", rd.Index, inst.Name, node.Name, err)
		}
	}
	return nil
}

func (lu *instanceRecreateDisksLU) Result() any { return nil }
