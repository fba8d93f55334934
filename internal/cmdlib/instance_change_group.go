package cmdlib

import (
	"context"
	"strings"

	"github.com/corral/corral/internal/config"
	"github.com/corral/corral/internal/ecode"
	"github.com/corral/corral/internal/iallocator"
	"github.com/corral/corral/internal/locking"
	"github.com/corral/corral/internal/opcodes"
)

// instanceChangeGroupLU is Ganeti's LUInstanceChangeGroup: the allocator's
// change-group answer for one instance becomes a child job (a migration,
// which falls back to a failover for a stopped instance), as group
// evacuation does for every instance of a group.
type instanceChangeGroupLU struct {
	childJobsLU
}

func (lu *instanceChangeGroupLU) Locks(p *Processor, op *opcodes.Op) []locking.Request {
	// Shared: the child job's own op locks the instance and its nodes
	// exclusively once this op has ended.
	return append(lu.childJobsLU.Locks(p, op), instLock(locking.Shared, lockName(p, op.Str("instance_name"))))
}

// planInstanceChangeGroup resolves the target groups as Ganeti does (all
// groups but the instance's when none are given; the instance's own group
// is refused) and asks the allocator where the instance goes.
func (lu *childJobsLU) planInstanceChangeGroup(ctx context.Context, p *Processor, op *opcodes.Op) error {
	inst, err := p.Cfg.MustInstance(op.Str("instance_name"))
	if err != nil {
		return err
	}
	node, err := p.Cfg.MustNode(inst.PrimaryNode)
	if err != nil {
		return err
	}
	targets, err := p.changeGroupTargets(inst, node.Group, op.Params["target_groups"])
	if err != nil {
		return err
	}
	if err := refuseInRescue(p, inst, "change its group"); err != nil {
		return err
	}
	a, err := p.allocatorFor(op.Str("iallocator"))
	if err != nil {
		return err
	}
	ans, err := p.runAllocator(ctx, a, p.allocatorCluster(ctx, "", ""), &iallocator.ChangeGroup{Instances: []string{inst.Name}, TargetGroups: targets})
	if err != nil {
		return err
	}
	var away []string
	for _, n := range p.Cfg.Nodes() {
		if n.Group == node.Group {
			away = append(away, n.UUID)
		}
	}
	lu.Jobs, err = p.evacJobs(a, ans.Evac, away)
	return err
}

// changeGroupTargets resolves target_groups (names or uuids) to uuids.
func (p *Processor) changeGroupTargets(inst *config.Instance, own string, v any) ([]string, error) {
	var out []string
	if v == nil {
		for _, g := range p.Cfg.Groups() {
			if g.UUID != own {
				out = append(out, g.UUID)
			}
		}
	} else {
		l, ok := v.([]any)
		if !ok {
			return nil, ecode.Errorf(ecode.Inval, "target_groups must be a list of group names")
		}
		var conflicting []string
		for _, x := range l {
			s, _ := x.(string)
			g, ok := p.Cfg.Group(s)
			if !ok {
				return nil, ecode.Errorf(ecode.NoEnt, "Node group '%v' not known", x)
			}
			if g.UUID == own {
				conflicting = append(conflicting, g.UUID)
			}
			out = append(out, g.UUID)
		}
		if len(conflicting) > 0 {
			return nil, ecode.Errorf(ecode.Inval, "Can't use group(s) '%s' as targets, they are used by the instance '%s'", strings.Join(conflicting, ", "), inst.Name)
		}
	}
	if len(out) == 0 {
		return nil, ecode.Errorf(ecode.Inval, "There are no possible target groups")
	}
	return out, nil
}
