package cmdlib

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/corral/corral/internal/config"
	"github.com/corral/corral/internal/ecode"
	"github.com/corral/corral/internal/engine"
	"github.com/corral/corral/internal/iallocator"
	"github.com/corral/corral/internal/locking"
	"github.com/corral/corral/internal/opcodes"
)

// evacuateUnits move instances off a node or a group: each computes, with
// an allocator, one job per instance, submits them as child jobs and
// answers Ganeti's {"jobs": [[true, id], ...]}. The child jobs run the
// instance moves (OP_INSTANCE_MIGRATE, OP_INSTANCE_FAILOVER) under their
// own locks.
func (p *Processor) evacuateUnits() []engine.Op {
	return []engine.Op{
		p.unit("OP_NODE_EVACUATE", func() LU { return &childJobsLU{plan: (*childJobsLU).planNodeEvacuate} }),
		p.unit("OP_NODE_MIGRATE", func() LU { return &childJobsLU{plan: (*childJobsLU).planNodeMigrate} }),
		p.unit("OP_GROUP_EVACUATE", func() LU { return &childJobsLU{plan: (*childJobsLU).planGroupEvacuate} }),
		p.unit("OP_INSTANCE_CHANGE_GROUP", func() LU {
			return &instanceChangeGroupLU{childJobsLU{plan: (*childJobsLU).planInstanceChangeGroup}}
		}),
	}
}

// childJobsLU is a unit whose work is a list of jobs: planned once (in
// Prereq, so a resumed op submits what it planned), submitted in one step,
// reported in the next.
type childJobsLU struct {
	Jobs [][]json.RawMessage `json:"jobs"`
	IDs  []int64             `json:"ids,omitempty"`
	plan func(lu *childJobsLU, ctx context.Context, p *Processor, op *opcodes.Op) error
}

func (lu *childJobsLU) Locks(p *Processor, op *opcodes.Op) []locking.Request {
	// Shared: the jobs' own ops lock their instances and nodes exclusively
	// once this op has ended.
	return []locking.Request{bgl(locking.Shared), nodeLock(locking.Shared, locking.All)}
}

func (lu *childJobsLU) Prereq(ctx context.Context, p *Processor, op *opcodes.Op) error {
	return lu.plan(lu, ctx, p, op)
}

func (lu *childJobsLU) Steps() []Step {
	return []Step{
		{"submit-jobs", func(ctx context.Context, s *StepCtx) error {
			for _, job := range lu.Jobs {
				s.Submit(job)
			}
			s.Logf(ctx, "Submitted %d job(s)", len(lu.Jobs))
			return nil
		}},
		{"report", func(ctx context.Context, s *StepCtx) error {
			lu.IDs = s.ChildJobs()
			return nil
		}},
	}
}

// Result is Ganeti's JobIdListOnly result.
func (lu *childJobsLU) Result() any {
	jobs := make([]any, 0, len(lu.IDs))
	for _, id := range lu.IDs {
		jobs = append(jobs, []any{true, id})
	}
	return map[string]any{"jobs": jobs}
}

// primaryInstances are the names of the instances whose primary is node,
// sorted.
func (p *Processor) primaryInstances(nodeUUID string) []string {
	var out []string
	p.Cfg.VisitInstances(func(i *config.Instance) bool {
		if i.PrimaryNode == nodeUUID {
			out = append(out, i.Name)
		}
		return true
	})
	sort.Strings(out)
	return out
}

func (lu *childJobsLU) planNodeEvacuate(ctx context.Context, p *Processor, op *opcodes.Op) error {
	node, err := p.Cfg.MustNode(op.Str("node_name"))
	if err != nil {
		return err
	}
	mode := op.Str("mode")
	if !slices.Contains([]string{iallocator.EvacPrimary, iallocator.EvacSecondary, iallocator.EvacAll}, mode) {
		return ecode.Errorf(ecode.Inval, "Invalid evacuation mode '%s': use primary-only, secondary-only or all", mode)
	}
	remote := op.Str("remote_node")
	if remote != "" && op.Str("iallocator") != "" {
		return ecode.Errorf(ecode.Inval, "Give either remote_node or iallocator, not both")
	}
	if remote != "" {
		rn, err := p.Cfg.MustNode(remote)
		if err != nil {
			return err
		}
		if rn.UUID == node.UUID {
			return ecode.Errorf(ecode.Inval, "Can not use evacuated node as a new secondary node")
		}
		if mode != iallocator.EvacSecondary {
			return ecode.Errorf(ecode.Inval, "Without the use of an iallocator only secondary instances can be evacuated")
		}
		return nil // no Corral disk template has secondaries: nothing to replace
	}
	var names []string
	if mode != iallocator.EvacSecondary { // no Corral instance has a secondary node
		names = p.primaryInstances(node.UUID)
	}
	if len(names) == 0 {
		return nil
	}
	a, err := p.allocatorFor(op.Str("iallocator"))
	if err != nil {
		return err
	}
	req := &iallocator.NodeEvacuate{Instances: names, EvacMode: mode, IgnoreSoftErrors: op.Bool("ignore_soft_errors")}
	ans, err := p.runAllocator(ctx, a, p.allocatorCluster(ctx, "", ""), req)
	if err != nil {
		return err
	}
	lu.Jobs, err = p.evacJobs(a, ans.Evac, []string{node.UUID})
	return err
}

// evacJobs checks an evacuation answer: nothing failed (Ganeti fails the
// whole evacuation then), and no job moves an instance to an evacuated,
// offline, drained or non-vm_capable node.
func (p *Processor) evacJobs(a iallocator.Allocator, e *iallocator.EvacResult, away []string) ([][]json.RawMessage, error) {
	if len(e.Failed) > 0 {
		var why []string
		for _, f := range e.Failed {
			why = append(why, fmt.Sprintf("%s (%s)", f.Name, f.Reason))
		}
		return nil, ecode.ExecErrorf("Unable to evacuate instances %s", strings.Join(why, ", "))
	}
	for _, job := range e.Jobs {
		for _, raw := range job {
			var o struct {
				ID     string `json:"OP_ID"`
				Target string `json:"target_node"`
			}
			if err := json.Unmarshal(raw, &o); err != nil {
				return nil, ecode.ExecErrorf("iallocator '%s' returned an opcode that does not decode: %w", a.Name(), err)
			}
			if o.Target == "" {
				continue
			}
			n, ok := p.Cfg.Node(o.Target)
			switch {
			case !ok:
				return nil, ecode.ExecErrorf("iallocator '%s' moves an instance to unknown node %s", a.Name(), o.Target)
			case slices.Contains(away, n.UUID) || n.Offline || n.Drained || !n.VMCapable:
				return nil, ecode.ExecErrorf("iallocator '%s' moves an instance to node %s, which is being evacuated, offline, drained or not vm_capable", a.Name(), n.Name)
			}
		}
	}
	return e.Jobs, nil
}

// planNodeMigrate makes one OP_INSTANCE_MIGRATE job per primary instance
// of the node, with the op's target_node, or the node the allocator's
// evacuation answer gives each instance.
func (lu *childJobsLU) planNodeMigrate(ctx context.Context, p *Processor, op *opcodes.Op) error {
	node, err := p.Cfg.MustNode(op.Str("node_name"))
	if err != nil {
		return err
	}
	names := p.primaryInstances(node.UUID)
	if len(names) == 0 {
		return nil
	}
	targets := map[string]string{}
	if tn := op.Str("target_node"); tn != "" {
		t, err := p.Cfg.MustNode(tn)
		if err != nil {
			return err
		}
		if t.UUID == node.UUID || t.Offline || t.Drained {
			return ecode.Errorf(ecode.Inval, "Node %s cannot take the instances of node %s (it is the same node, offline or drained)", t.Name, node.Name)
		}
		for _, n := range names {
			targets[n] = t.Name
		}
	} else {
		a, err := p.allocatorFor(op.Str("iallocator"))
		if err != nil {
			return err
		}
		ans, err := p.runAllocator(ctx, a, p.allocatorCluster(ctx, "", ""), &iallocator.NodeEvacuate{Instances: names, EvacMode: iallocator.EvacPrimary})
		if err != nil {
			return err
		}
		if _, err := p.evacJobs(a, ans.Evac, []string{node.UUID}); err != nil {
			return err
		}
		for _, m := range ans.Evac.Moved {
			targets[m.Name] = m.Nodes[0]
		}
	}
	for _, n := range names {
		o := map[string]any{"OP_ID": "OP_INSTANCE_MIGRATE", "instance_name": n, "target_node": targets[n],
			"allow_runtime_changes": op.Bool("allow_runtime_changes"), "ignore_ipolicy": op.Bool("ignore_ipolicy")}
		if m := op.Str("mode"); m != "" {
			o["mode"] = m
		}
		if l, ok := op.Params["live"].(bool); ok {
			o["live"] = l
		}
		raw, err := json.Marshal(o)
		if err != nil {
			return ecode.ExecErrorf("encoding the migration of %s: %w", n, err)
		}
		lu.Jobs = append(lu.Jobs, []json.RawMessage{raw})
	}
	return nil
}

// planGroupEvacuate asks the allocator to move every instance of the
// group into the target groups (all others when none are given).
func (lu *childJobsLU) planGroupEvacuate(ctx context.Context, p *Processor, op *opcodes.Op) error {
	g, ok := p.Cfg.Group(op.Str("group_name"))
	if !ok {
		return ecode.Errorf(ecode.NoEnt, "Node group '%s' not known", op.Str("group_name"))
	}
	targets, err := p.targetGroups(g, op.Params["target_groups"])
	if err != nil {
		return err
	}
	members := map[string]bool{}
	for _, n := range p.Cfg.Nodes() {
		if n.Group == g.UUID {
			members[n.UUID] = true
		}
	}
	var names []string
	p.Cfg.VisitInstances(func(i *config.Instance) bool {
		if members[i.PrimaryNode] {
			names = append(names, i.Name)
		}
		return true
	})
	sort.Strings(names)
	if len(names) == 0 {
		return nil
	}
	a, err := p.allocatorFor(op.Str("iallocator"))
	if err != nil {
		return err
	}
	ans, err := p.runAllocator(ctx, a, p.allocatorCluster(ctx, "", ""), &iallocator.ChangeGroup{Instances: names, TargetGroups: targets})
	if err != nil {
		return err
	}
	jobs, err := p.evacJobs(a, ans.Evac, sortedKeys(members))
	if err != nil {
		return err
	}
	for i, job := range jobs {
		for j, raw := range job {
			if jobs[i][j], err = adjustGroupEvacOp(raw, op.Bool("force_failover"), op.Bool("sequential") && i > 0); err != nil {
				return err
			}
		}
	}
	lu.Jobs = jobs
	return nil
}

// targetGroups resolves target_groups (names or uuids) to uuids: all
// groups but g when absent; g itself is refused.
func (p *Processor) targetGroups(g *config.NodeGroup, v any) ([]string, error) {
	var out []string
	if v == nil {
		for _, o := range p.Cfg.Groups() {
			if o.UUID != g.UUID {
				out = append(out, o.UUID)
			}
		}
		if len(out) == 0 {
			return nil, ecode.Errorf(ecode.Inval, "There are no possible target groups")
		}
		return out, nil
	}
	l, ok := v.([]any)
	if !ok {
		return nil, ecode.Errorf(ecode.Inval, "target_groups must be a list of group names")
	}
	for _, x := range l {
		s, _ := x.(string)
		t, ok := p.Cfg.Group(s)
		if !ok {
			return nil, ecode.Errorf(ecode.NoEnt, "Node group '%v' not known", x)
		}
		if t.UUID == g.UUID {
			return nil, ecode.Errorf(ecode.Inval, "Group '%s' cannot be a target of its own evacuation", g.Name)
		}
		out = append(out, t.UUID)
	}
	return out, nil
}

// adjustGroupEvacOp turns a migration into a failover (force_failover) and
// makes a job wait for the one before it (sequential), as Ganeti does.
func adjustGroupEvacOp(raw json.RawMessage, failover, afterPrevious bool) (json.RawMessage, error) {
	var o map[string]any
	if err := json.Unmarshal(raw, &o); err != nil {
		return nil, ecode.ExecErrorf("decoding an evacuation opcode: %w", err)
	}
	if failover && o["OP_ID"] == "OP_INSTANCE_MIGRATE" {
		o = map[string]any{"OP_ID": "OP_INSTANCE_FAILOVER", "instance_name": o["instance_name"], "target_node": o["target_node"],
			"iallocator": o["iallocator"], "ignore_ipolicy": o["ignore_ipolicy"]}
		for k, v := range o {
			if v == nil {
				delete(o, k)
			}
		}
	}
	if afterPrevious {
		o["depends"] = []any{[]any{-1, []any{"error", "success"}}}
	}
	return json.Marshal(o)
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
