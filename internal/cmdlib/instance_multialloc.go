package cmdlib

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"

	"github.com/corral/corral/internal/config"
	"github.com/corral/corral/internal/ecode"
	"github.com/corral/corral/internal/engine"
	"github.com/corral/corral/internal/iallocator"
	"github.com/corral/corral/internal/locking"
	"github.com/corral/corral/internal/opcodes"
)

// opTable decodes the instance creations nested in OP_INSTANCE_MULTI_ALLOC
// with the same definitions the job queue checks submissions against.
var opTable = sync.OnceValue(func() *opcodes.Table { return opcodes.NewTable(opcodes.Defs()) })

func (p *Processor) multiAllocUnits() []engine.Op {
	return []engine.Op{p.unit("OP_INSTANCE_MULTI_ALLOC", func() LU { return &multiAllocLU{} })}
}

// multiAllocLU is Ganeti's LUInstanceMultiAlloc: it places every instance
// of the op with one allocator run (or takes the nodes the instances name)
// and submits one OP_INSTANCE_CREATE job per placed instance. The plan
// keeps the placements only: the creations themselves, which may carry
// osparams_secret, are read from the op when the jobs are submitted.
type multiAllocLU struct {
	Placed      []multiAllocPlacement `json:"placed"`
	Allocatable []string              `json:"allocatable"`
	Failed      []string              `json:"failed"`
	IDs         []int64               `json:"ids,omitempty"`
}

// multiAllocPlacement is one instance of the op (by its index in
// "instances") and its primary node; Node is empty when the instance
// named its own.
type multiAllocPlacement struct {
	Index int    `json:"index"`
	Node  string `json:"node,omitempty"`
}

func (lu *multiAllocLU) Locks(p *Processor, op *opcodes.Op) []locking.Request {
	// Shared: the creations lock their nodes exclusively once this op has
	// ended, and check the room on them again.
	return []locking.Request{bgl(locking.Shared), nodeLock(locking.Shared, locking.All), nodeResLock(locking.Shared, locking.All)}
}

func (lu *multiAllocLU) Prereq(ctx context.Context, p *Processor, op *opcodes.Op) error {
	creates, err := decodeMultiAllocInstances(op.List("instances"))
	if err != nil {
		return err
	}
	withNodes := 0
	seen := map[string]bool{}
	var dups []string
	for _, c := range creates {
		if c.Str("iallocator") != "" {
			return ecode.Errorf(ecode.Inval, "iallocator are not allowed to be set on instance objects")
		}
		if c.Str("pnode") != "" {
			withNodes++
		}
		name := c.Str("instance_name")
		if seen[name] && !contains(dups, name) {
			dups = append(dups, name)
		}
		seen[name] = true
	}
	if withNodes != 0 && withNodes != len(creates) {
		return ecode.Errorf(ecode.Inval, "There are instance objects providing pnode/snode while others do not")
	}
	if len(dups) > 0 {
		return ecode.Errorf(ecode.Inval, "There are duplicate instance names: %s", strings.Join(dups, ", "))
	}
	lu.Placed, lu.Allocatable, lu.Failed = nil, []string{}, []string{}
	if withNodes > 0 || len(creates) == 0 {
		if op.Str("iallocator") != "" && withNodes > 0 {
			return ecode.Errorf(ecode.Inval, "Give either an iallocator or nodes on the instances, not both")
		}
		for i, c := range creates {
			if pn := c.Str("pnode"); pn != "" {
				if _, err := p.Cfg.MustNode(pn); err != nil {
					return err
				}
			}
			lu.Placed = append(lu.Placed, multiAllocPlacement{Index: i})
			lu.Allocatable = append(lu.Allocatable, c.Str("instance_name"))
		}
		return nil
	}
	return lu.allocate(ctx, p, op.Str("iallocator"), creates)
}

// decodeMultiAllocInstances checks each item of "instances" as the
// OP_INSTANCE_CREATE it must be.
func decodeMultiAllocInstances(items []any) ([]*opcodes.Op, error) {
	out := make([]*opcodes.Op, 0, len(items))
	for i, it := range items {
		raw, err := json.Marshal(it)
		if err != nil {
			return nil, ecode.Errorf(ecode.Inval, "instances[%d]: %w", i, err)
		}
		c, err := opTable().Decode(raw)
		if err != nil {
			return nil, fmt.Errorf("instances[%d]: %w", i, err)
		}
		if c.ID != "OP_INSTANCE_CREATE" {
			return nil, ecode.Errorf(ecode.Inval, "instances[%d] is %s, not OP_INSTANCE_CREATE", i, c.ID)
		}
		if err := CheckName("instance", c.Str("instance_name")); err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, nil
}

// allocate runs the allocator's multi-allocate request on every instance
// and keeps its answer: the instances placed, with their nodes checked as
// a create checks an allocator's choice, and those it could not place.
func (lu *multiAllocLU) allocate(ctx context.Context, p *Processor, name string, creates []*opcodes.Op) error {
	a, err := p.allocatorFor(name)
	if err != nil {
		return err
	}
	req := &iallocator.MultiAllocate{}
	for _, c := range creates {
		r, err := p.allocateRequest(c)
		if err != nil {
			return fmt.Errorf("instance %s: %w", c.Str("instance_name"), err)
		}
		req.Instances = append(req.Instances, r)
	}
	first := req.Instances[0]
	ans, err := p.runAllocator(ctx, a, p.allocatorCluster(ctx, first.Hypervisor, first.DiskTemplate), req)
	if err != nil {
		return ecode.Errorf(ecode.NoRes, "Can't compute nodes using iallocator '%s': %w", a.Name(), err)
	}
	if ans.Multi == nil {
		return ecode.ExecErrorf("iallocator '%s' gave no multi-allocate result", a.Name())
	}
	index := map[string]int{}
	for i, c := range creates {
		index[c.Str("instance_name")] = i
	}
	answered := map[string]bool{}
	for _, pl := range ans.Multi.Allocated {
		i, ok := index[pl.Name]
		if !ok || answered[pl.Name] || len(pl.Nodes) == 0 {
			return ecode.ExecErrorf("iallocator '%s' placed %s, which the request does not hold once", a.Name(), pl.Name)
		}
		n, ok := p.Cfg.Node(pl.Nodes[0])
		switch {
		case !ok:
			return ecode.ExecErrorf("iallocator '%s' chose node %s, which is not in the cluster", a.Name(), pl.Nodes[0])
		case n.Offline || n.Drained || !n.VMCapable:
			return ecode.Errorf(ecode.NoRes, "iallocator '%s' chose node %s, which is offline, drained or not vm_capable", a.Name(), n.Name)
		}
		answered[pl.Name] = true
		lu.Placed = append(lu.Placed, multiAllocPlacement{Index: i, Node: n.Name})
		lu.Allocatable = append(lu.Allocatable, pl.Name)
	}
	for _, f := range ans.Multi.Failed {
		if _, ok := index[f]; !ok || answered[f] {
			return ecode.ExecErrorf("iallocator '%s' reports %s as failed, which the request does not hold or it placed", a.Name(), f)
		}
		answered[f] = true
		lu.Failed = append(lu.Failed, f)
	}
	var missing []string
	for _, c := range creates {
		if !answered[c.Str("instance_name")] {
			missing = append(missing, c.Str("instance_name"))
		}
	}
	if len(missing) > 0 {
		return ecode.ExecErrorf("iallocator '%s' did return incomplete result: %s", a.Name(), strings.Join(missing, ", "))
	}
	return nil
}

// allocateRequest describes one instance creation to an allocator, with
// the defaults the creation would fill in.
func (p *Processor) allocateRequest(c *opcodes.Op) (*iallocator.Allocate, error) {
	cl := p.Cfg.Cluster()
	tmpl := c.Str("disk_template")
	if tmpl == "" && len(cl.EnabledDiskTemplates) > 0 {
		tmpl = cl.EnabledDiskTemplates[0]
	}
	hv := c.Str("hypervisor")
	if hv == "" {
		hv = cl.DefaultHypervisor()
	}
	bep, err := checkBEParams(c.Dict("beparams"), true)
	if err != nil {
		return nil, err
	}
	be := config.Fill(cl.BEParams, bep)
	disks, err := parseDisks(c.List("disks"), tmpl)
	if err != nil {
		return nil, err
	}
	nics, err := parseNICs(p, cl, c.List("nics"))
	if err != nil {
		return nil, err
	}
	r := &iallocator.Allocate{Name: c.Str("instance_name"), DiskTemplate: tmpl, OS: c.Str("os_type"), Tags: c.Strings("tags"),
		Memory: config.MemoryMiB(be), VCPUs: config.VCPUs(be), SpindleUse: config.ParamInt(be["spindle_use"], 1), Hypervisor: hv}
	if gn := c.Str("group_name"); gn != "" {
		g, ok := p.Cfg.Group(gn)
		if !ok {
			return nil, ecode.Errorf(ecode.NoEnt, "Node group '%s' not known", gn)
		}
		r.GroupName = g.Name
	}
	for _, d := range disks {
		r.Disks = append(r.Disks, iallocator.Disk{SizeMiB: d.SizeMiB, Mode: d.Mode})
	}
	for _, n := range nics {
		r.NICs = append(r.NICs, iallocator.NIC{MAC: n.MAC, IP: n.IP, Mode: n.Mode, Link: n.Link})
	}
	return r, nil
}

func (lu *multiAllocLU) Steps() []Step {
	return []Step{
		{"submit-jobs", func(ctx context.Context, s *StepCtx) error {
			items := s.Op().List("instances")
			for _, pl := range lu.Placed {
				job, err := multiAllocJob(items, pl)
				if err != nil {
					return err
				}
				s.Submit(job)
			}
			s.Logf(ctx, "Submitted %d job(s)", len(lu.Placed))
			return nil
		}},
		{"report", func(ctx context.Context, s *StepCtx) error {
			lu.IDs = s.ChildJobs()
			return nil
		}},
	}
}

// multiAllocJob is the one-op job creating instance pl.Index of the op,
// on the node the allocator chose for it.
func multiAllocJob(items []any, pl multiAllocPlacement) ([]json.RawMessage, error) {
	if pl.Index < 0 || pl.Index >= len(items) {
		return nil, ecode.ExecErrorf("the plan places instance %d of %d", pl.Index, len(items))
	}
	src, _ := items[pl.Index].(map[string]any)
	create := make(map[string]any, len(src)+1)
	for k, v := range src {
		create[k] = v
	}
	if pl.Node != "" {
		create["pnode"] = pl.Node
		delete(create, "pnode_uuid")
	}
	raw, err := json.Marshal(create)
	if err != nil {
		return nil, ecode.ExecErrorf("instance %d: %w", pl.Index, err)
	}
	return []json.RawMessage{raw}, nil
}

// Result is Ganeti's InstanceMultiAllocResponse: the submitted jobs (none
// on a dry run), the instances placed and those the allocator could not
// place.
func (lu *multiAllocLU) Result() any {
	jobs := make([]any, 0, len(lu.IDs))
	for _, id := range lu.IDs {
		jobs = append(jobs, []any{true, id})
	}
	return map[string]any{"jobs": jobs, "allocatable": lu.Allocatable, "failed": lu.Failed}
}
