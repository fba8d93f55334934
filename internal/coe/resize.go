package coe

import (
	"context"
	"fmt"
	"slices"

	"github.com/corral/corral/internal/coe/driver"
	"github.com/corral/corral/internal/config"
	"github.com/corral/corral/internal/ecode"
	"github.com/corral/corral/internal/engine"
	"github.com/corral/corral/internal/locking"
	"github.com/corral/corral/internal/opcodes"
)

// resizeUnit changes a node group's node count (and, for a group's own
// modify, its min and max): OP_COE_CLUSTER_MODIFY (node_count of the
// default worker group), OP_COE_CLUSTER_RESIZE (any group, with
// nodes_to_remove) and OP_COE_NODEGROUP_MODIFY (also the child job that
// builds a new cluster's worker group). Shrinking removes the named nodes
// first, then the scale manager's choice.
type resizeUnit struct {
	d      *Deps
	modify bool // OP_COE_CLUSTER_MODIFY
	group  bool // OP_COE_NODEGROUP_MODIFY

	Group  *config.COENodeGroup `json:"group"` // with the new counts
	Remove []string             `json:"remove"`
	Params driver.Params        `json:"params"`
	Life   lifecycle            `json:"life"`
	// Rollback is the op's rollback: a failed change gives the group its
	// Old counts back. Failed is the failure being rolled back ("" while
	// none is).
	Rollback bool                 `json:"rollback,omitempty"`
	Old      *config.COENodeGroup `json:"old,omitempty"`
	Failed   string               `json:"failed,omitempty"`
}

func (u *resizeUnit) Locks(op *opcodes.Op) []locking.Request {
	return coeLocks(u.d.clusterLock(op.Str("cluster")))
}

// target finds the group the op changes and its new counts.
func (u *resizeUnit) target(op *opcodes.Op, c *config.COECluster) (*config.COENodeGroup, error) {
	name := op.Str("nodegroup")
	changes := op.Dict("changes")
	if u.modify {
		for k := range changes {
			if k != "node_count" {
				return nil, ecode.Errorf(ecode.Inval, "Cluster field %s cannot be changed; only node_count can.", k)
			}
		}
	}
	var g *config.COENodeGroup
	if name == "" {
		for _, x := range u.d.Cfg.COENodeGroups(c.UUID) {
			if x.IsDefault && x.Role == config.COERoleWorker {
				g = x
			}
		}
		if g == nil {
			return nil, ecode.Errorf(ecode.NoEnt, "Cluster %s has no default worker group.", c.UUID)
		}
	} else {
		var err error
		if g, err = u.d.Cfg.COENodeGroup(c.UUID, name); err != nil {
			return nil, err
		}
	}
	switch {
	case u.modify || u.group:
		for k, v := range changes {
			n, ok := v.(float64)
			switch {
			case k == "max_node_count" && v == nil:
				g.MaxNodeCount = nil
			case !ok || n < 0 || n != float64(int(n)):
				return nil, ecode.Errorf(ecode.Inval, "%s must be a non-negative integer.", k)
			case k == "node_count":
				g.NodeCount = int(n)
			case k == "min_node_count" && u.group:
				g.MinNodeCount = int(n)
			case k == "max_node_count" && u.group:
				m := int(n)
				g.MaxNodeCount = &m
			default:
				return nil, ecode.Errorf(ecode.Inval, "Node group field %s cannot be changed.", k)
			}
		}
	default:
		g.NodeCount = op.Int("node_count")
	}
	return g, checkCounts(g)
}

// checkCounts refuses a group whose node_count is outside min..max.
func checkCounts(g *config.COENodeGroup) error {
	if g.NodeCount < g.MinNodeCount {
		return ecode.Errorf(ecode.Inval, "node_count %d is less than min_node_count %d of node group %s.", g.NodeCount, g.MinNodeCount, g.Name)
	}
	if g.MaxNodeCount != nil && (g.NodeCount > *g.MaxNodeCount || g.MinNodeCount > *g.MaxNodeCount) {
		return ecode.Errorf(ecode.Inval, "node_count %d and min_node_count %d must not exceed max_node_count %d of node group %s.", g.NodeCount, g.MinNodeCount, *g.MaxNodeCount, g.Name)
	}
	if g.Role == config.COERoleMaster && g.NodeCount < 1 {
		return ecode.Errorf(ecode.Inval, "A master node group needs at least one node.")
	}
	return nil
}

func (u *resizeUnit) Prereq(ctx context.Context, op *opcodes.Op) error {
	c, drv, err := u.d.cluster(op)
	if err != nil {
		return err
	}
	parent := int64(op.Int("parent_job"))
	if err := u.d.checkIdle(c, parent); err != nil {
		return err
	}
	g, err := u.target(op, c)
	if err != nil {
		return err
	}
	u.Rollback = op.Bool("rollback") && parent == 0
	if u.Rollback {
		// The stored group, before the op's counts.
		if u.Old, err = u.d.Cfg.COENodeGroup(c.UUID, g.UUID); err != nil {
			return err
		}
	}
	remove := op.Strings("nodes_to_remove")
	for _, n := range remove {
		if !slices.Contains(g.Nodes, n) {
			return ecode.Errorf(ecode.Inval, "Node %s is not a node of node group %s.", n, g.Name)
		}
	}
	if extra := len(g.Nodes) - len(remove) - g.NodeCount; extra > 0 {
		dc, err := u.d.load(c.UUID)
		if err != nil {
			return err
		}
		rest := g.Clone()
		rest.Nodes = slices.DeleteFunc(rest.Nodes, func(n string) bool { return slices.Contains(remove, n) })
		chosen, err := drv.ScaleManager(dc).NodesToRemove(ctx, rest, extra)
		if err != nil {
			return ecode.Errorf(ecode.Environ, "choosing the nodes to remove: %v", err)
		}
		remove = append(remove, chosen...)
	}
	u.Group, u.Remove = g, remove
	if u.Params, err = u.d.params(c); err != nil {
		return err
	}
	u.Life = lifecycle{Cluster: c.UUID, Action: "UPDATE", Groups: []string{g.UUID}, Parent: parent, Driver: c.Driver}
	if parent != 0 && g.Status == config.COECreateInProgress {
		u.Life.GroupAction = "CREATE"
	}
	return nil
}

func (u *resizeUnit) plan() *plannedSteps {
	if u.Rollback {
		return u.planWithRollback()
	}
	p := &plannedSteps{}
	p.add(u.Life.begin(u.d))
	p.add(engine.Step{Name: "set the node count", Run: func(ctx context.Context, s *engine.StepCtx) error {
		g, err := u.d.Cfg.COENodeGroup(u.Life.Cluster, u.Group.UUID)
		if err != nil {
			return err
		}
		g.NodeCount, g.MinNodeCount, g.MaxNodeCount = u.Group.NodeCount, u.Group.MinNodeCount, u.Group.MaxNodeCount
		s.Tx().PutCOENodeGroup(g)
		return nil
	}})
	p.addFrom(u.d, &u.Life, func(drv driver.Driver) []driver.Step {
		return drv.UpdateNodeGroup(u.Params, u.Group.Name, u.Remove)
	})
	p.add(u.Life.end(u.d, nil))
	return p
}

func (u *resizeUnit) Steps() []engine.Step { return u.plan().steps }

func (u *resizeUnit) Revert(ctx context.Context, s *engine.StepCtx, failed error) {
	if u.Failed != "" {
		// The rollback itself failed.
		l := u.Life
		l.Action, l.GroupAction = rollbackAction, ""
		l.fail(u.d, s, u.plan().cond(s.Step()), fmt.Errorf("%s; rolling back failed: %w", u.Failed, failed))
		return
	}
	u.Life.fail(u.d, s, u.plan().cond(s.Step()), failed)
}

func (u *resizeUnit) Result() any { return u.Life.Cluster }
