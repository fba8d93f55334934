package coe

import (
	"context"
	"errors"
	"fmt"

	"github.com/corral/corral/internal/coe/driver"
	"github.com/corral/corral/internal/config"
	"github.com/corral/corral/internal/engine"
	"github.com/corral/corral/internal/jobqueue"
)

// rollbackAction is the lifecycle action of a change being undone:
// ROLLBACK_IN_PROGRESS, then ROLLBACK_COMPLETE or ROLLBACK_FAILED.
const rollbackAction = "ROLLBACK"

// planWithRollback is the resize's plan when the op asks for a rollback,
// as Magnum's ?rollback=True: the driver's steps for the new counts, each
// of which, failing, records the failure (ROLLBACK_IN_PROGRESS, the old
// counts stored again) and lets the job go on; then the driver's steps
// for the old counts, which run only after a failure; then
// UPDATE_COMPLETE, or ROLLBACK_COMPLETE with the failure as the reason. A
// failure while rolling back is ROLLBACK_FAILED (Revert).
func (u *resizeUnit) planWithRollback() *plannedSteps {
	p := &plannedSteps{}
	p.add(u.Life.begin(u.d))
	p.add(engine.Step{Name: "set the node count", Run: func(ctx context.Context, s *engine.StepCtx) error {
		return u.putCounts(s, u.Group)
	}})
	forward := &plannedSteps{}
	forward.addFrom(u.d, &u.Life, func(drv driver.Driver) []driver.Step {
		return drv.UpdateNodeGroup(u.Params, u.Group.Name, u.Remove)
	})
	for i, st := range forward.steps {
		run := st.Run
		cond := forward.conds[i]
		st.Run = func(ctx context.Context, s *engine.StepCtx) error {
			if u.Failed != "" {
				return nil // the change failed: the rest of it is not tried
			}
			err := run(ctx, s)
			if err == nil || ctx.Err() != nil || errors.Is(err, jobqueue.ErrSuspended) {
				return err
			}
			return u.beginRollback(s, cond, err)
		}
		p.steps, p.conds = append(p.steps, st), append(p.conds, cond)
	}
	back := &plannedSteps{}
	back.addFrom(u.d, &u.Life, func(drv driver.Driver) []driver.Step {
		return drv.UpdateNodeGroup(u.Params, u.Group.Name, nil)
	})
	for i, st := range back.steps {
		run := st.Run
		st.Name = "roll back: " + st.Name
		st.Run = func(ctx context.Context, s *engine.StepCtx) error {
			if u.Failed == "" {
				return nil // nothing to roll back
			}
			return run(ctx, s)
		}
		p.steps, p.conds = append(p.steps, st), append(p.conds, back.conds[i])
	}
	end := u.Life.end(u.d, nil)
	p.add(engine.Step{Name: "record UPDATE_COMPLETE or ROLLBACK_COMPLETE", Run: func(ctx context.Context, s *engine.StepCtx) error {
		if u.Failed == "" {
			return end.Run(ctx, s)
		}
		l := u.Life
		l.Action, l.GroupAction = rollbackAction, ""
		if err := l.finishCluster(u.d, s, func(c *config.COECluster) {
			c.StatusReason = "the update was rolled back: " + u.Failed
		}); err != nil {
			return err
		}
		l.setGroups(u.d, s, config.COERollbackComplete, "the update was rolled back: "+u.Failed)
		return nil
	}})
	return p
}

// putCounts stores the group's counts from g.
func (u *resizeUnit) putCounts(s *engine.StepCtx, from *config.COENodeGroup) error {
	g, err := u.d.Cfg.COENodeGroup(u.Life.Cluster, u.Group.UUID)
	if err != nil {
		return err
	}
	g.NodeCount, g.MinNodeCount, g.MaxNodeCount = from.NodeCount, from.MinNodeCount, from.MaxNodeCount
	s.Tx().PutCOENodeGroup(g)
	return nil
}

// beginRollback records a failed step of the change: the failure kept in
// the plan, its condition False, the cluster and group
// ROLLBACK_IN_PROGRESS with the failure as reason, the old counts stored.
func (u *resizeUnit) beginRollback(s *engine.StepCtx, cond string, failed error) error {
	u.Failed = reason(failed)
	c, ok := u.d.Cfg.COECluster(u.Life.Cluster)
	if !ok {
		return fmt.Errorf("cluster %s is gone", u.Life.Cluster)
	}
	c.Status, c.StatusReason = config.COERollbackInProgress, u.Failed
	s.Tx().PutCOECluster(c)
	g, err := u.d.Cfg.COENodeGroup(u.Life.Cluster, u.Group.UUID)
	if err != nil {
		return err
	}
	g.NodeCount, g.MinNodeCount, g.MaxNodeCount = u.Old.NodeCount, u.Old.MinNodeCount, u.Old.MaxNodeCount
	g.Status, g.StatusReason = config.COERollbackInProgress, u.Failed
	s.Tx().PutCOENodeGroup(g)
	if cond != "" {
		u.d.setCondition(s, u.Life.Cluster, config.Condition{Type: cond, Status: config.ConditionFalse, Reason: "StepFailed", Message: u.Failed})
	}
	return nil
}
