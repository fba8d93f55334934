package coe

import (
	"context"
	"fmt"
	"time"

	"github.com/corral/corral/internal/coe/driver"
	"github.com/corral/corral/internal/config"
	"github.com/corral/corral/internal/engine"
)

// lifecycle is the part of a unit's plan that follows Magnum's status
// convention: the cluster (and the groups named) go to
// <Action>_IN_PROGRESS in the first step, <Action>_COMPLETE in the last,
// <Action>_FAILED with the failed step's error as status_reason when a
// step fails. A child job (Parent set) leaves the cluster's own status to
// its parent and follows only its groups'.
type lifecycle struct {
	Cluster string   `json:"cluster"` // uuid
	Action  string   `json:"action"`  // CREATE, UPDATE, DELETE
	Groups  []string `json:"groups,omitempty"`
	// GroupAction is the groups' action when it differs from the
	// cluster's (a group built for a new cluster is being created).
	GroupAction string `json:"group_action,omitempty"`
	Parent      int64  `json:"parent,omitempty"`
	// Driver is the cluster's driver, kept so the steps stay the same
	// after the cluster is gone.
	Driver string `json:"driver"`
}

func (l *lifecycle) groupAction() string {
	if l.GroupAction != "" {
		return l.GroupAction
	}
	return l.Action
}

// setGroups puts the named groups' status in the step's transaction.
func (l *lifecycle) setGroups(d *Deps, s *engine.StepCtx, status, why string) {
	for _, id := range l.Groups {
		g, err := d.Cfg.COENodeGroup(l.Cluster, id)
		if err != nil {
			continue
		}
		g.Status, g.StatusReason = status, why
		s.Tx().PutCOENodeGroup(g)
	}
}

// begin marks the work started and the cluster reserved for the job.
func (l *lifecycle) begin(d *Deps) engine.Step {
	return engine.Step{Name: "record " + l.Action + "_IN_PROGRESS", Run: func(ctx context.Context, s *engine.StepCtx) error {
		if l.Parent == 0 {
			c, ok := d.Cfg.COECluster(l.Cluster)
			if !ok {
				return fmt.Errorf("cluster %s is gone", l.Cluster)
			}
			c.Status, c.StatusReason = l.Action+"_IN_PROGRESS", ""
			s.Tx().PutCOECluster(c)
			d.setReservation(s.Tx(), l.Cluster, s.JobID())
		}
		l.setGroups(d, s, l.groupAction()+"_IN_PROGRESS", "")
		return nil
	}}
}

// end marks the work complete; more changes the cluster before it is
// stored (nil: none).
func (l *lifecycle) end(d *Deps, more func(c *config.COECluster)) engine.Step {
	return engine.Step{Name: "record " + l.Action + "_COMPLETE", Run: func(ctx context.Context, s *engine.StepCtx) error {
		if err := l.finishCluster(d, s, more); err != nil {
			return err
		}
		l.setGroups(d, s, l.groupAction()+"_COMPLETE", "")
		return nil
	}}
}

// finishCluster records the cluster's <Action>_COMPLETE and frees it (a
// child job leaves it to its parent).
func (l *lifecycle) finishCluster(d *Deps, s *engine.StepCtx, more func(c *config.COECluster)) error {
	if l.Parent != 0 {
		return nil
	}
	c, ok := d.Cfg.COECluster(l.Cluster)
	if !ok {
		return fmt.Errorf("cluster %s is gone", l.Cluster)
	}
	c.Status, c.StatusReason = l.Action+"_COMPLETE", ""
	if more != nil {
		more(c)
	}
	s.Tx().PutCOECluster(c)
	d.setReservation(s.Tx(), l.Cluster, 0)
	return nil
}

// fail records a failed step: the cluster's and groups' *_FAILED status
// with the reason, and the step's condition False. cond is the failed
// step's condition ("" for a step of the unit's own).
func (l *lifecycle) fail(d *Deps, s *engine.StepCtx, cond string, failed error) {
	why := reason(failed)
	c, ok := d.Cfg.COECluster(l.Cluster)
	if !ok {
		return
	}
	if l.Parent == 0 {
		c.Status, c.StatusReason = l.Action+"_FAILED", why
		s.Tx().PutCOECluster(c)
	}
	l.setGroups(d, s, l.groupAction()+"_FAILED", why)
	// One write of the status: the reservation goes, the condition turns.
	st, changed := config.ChangeStatus(d.Cfg.COEClusterStatus(l.Cluster), func(st *config.Status, now time.Time) {
		if l.Parent == 0 {
			st.Target = ""
		}
		if cond != "" {
			st.SetCondition(config.Condition{Type: cond, Status: config.ConditionFalse, Reason: "StepFailed", Message: why}, now)
		}
	}, d.now())
	if changed {
		s.Tx().PutCOEClusterStatus(l.Cluster, st)
	}
}

// plannedSteps are a unit's steps with the condition of each ("" for the
// unit's own), so a failure names its condition.
type plannedSteps struct {
	steps []engine.Step
	conds []string
}

func (p *plannedSteps) add(s engine.Step) {
	p.steps = append(p.steps, s)
	p.conds = append(p.conds, "")
}

func (p *plannedSteps) addDriver(d *Deps, uuid string, ds ...driver.Step) {
	for _, x := range ds {
		p.steps = append(p.steps, d.driverStep(uuid, x))
		p.conds = append(p.conds, x.Condition)
	}
}

// addFrom adds the steps the cluster's driver returns; a driver missing
// from this corrald is a step that fails saying so.
func (p *plannedSteps) addFrom(d *Deps, l *lifecycle, steps func(driver.Driver) []driver.Step) {
	drv, err := d.Drivers.Get(l.Driver)
	if err != nil {
		p.add(engine.Step{Name: "find the driver", Run: func(context.Context, *engine.StepCtx) error { return err }})
		return
	}
	p.addDriver(d, l.Cluster, steps(drv)...)
}

func (p *plannedSteps) cond(i int) string {
	if i >= 0 && i < len(p.conds) {
		return p.conds[i]
	}
	return ""
}
