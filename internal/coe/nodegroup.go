package coe

import (
	"context"
	"maps"

	"github.com/google/uuid"

	"github.com/corral/corral/internal/coe/driver"
	"github.com/corral/corral/internal/config"
	"github.com/corral/corral/internal/ecode"
	"github.com/corral/corral/internal/engine"
	"github.com/corral/corral/internal/opcodes"
)

// nodeGroupCreateUnit adds a node group to a cluster.
type nodeGroupCreateUnit struct {
	clusterAction
	Group *config.COENodeGroup `json:"group"`
}

func (u *nodeGroupCreateUnit) Prereq(ctx context.Context, op *opcodes.Op) error {
	c, _, err := u.d.cluster(op)
	if err != nil {
		return err
	}
	if err := u.d.checkIdle(c, 0); err != nil {
		return err
	}
	name := op.Str("name")
	if _, err := u.d.Cfg.COENodeGroup(c.UUID, name); err == nil {
		return ecode.Errorf(ecode.Exists, "A node group with name %s already exists in the cluster %s.", name, c.UUID)
	}
	role := op.Str("role")
	if role == config.COERoleMaster {
		return ecode.Errorf(ecode.Inval, "Only the default master group can hold masters.")
	}
	g := &config.COENodeGroup{ProjectID: c.ProjectID, Cluster: c.UUID, Role: role, NodeCount: op.Int("node_count"),
		MinNodeCount: op.Int("min_node_count"), FlavorID: op.Str("flavor_id"), ImageID: op.Str("image_id"),
		Status: config.COECreateInProgress}
	g.Name, g.UUID = name, config.NewUUID()
	if id, ok := op.Params["uuid"].(string); ok {
		if _, err := uuid.Parse(id); err != nil {
			return ecode.Errorf(ecode.Inval, "Expected a UUID but received %s.", id)
		}
		g.UUID = id
	}
	if g.FlavorID == "" {
		g.FlavorID = c.FlavorID
	}
	if v, ok := op.Params["max_node_count"].(float64); ok {
		n := int(v)
		g.MaxNodeCount = &n
	}
	if v, ok := op.Params["docker_volume_size"].(float64); ok {
		n := int(v)
		g.DockerVolumeSize = &n
	}
	g.Labels = map[string]string{}
	if op.Bool("merge_labels") {
		maps.Copy(g.Labels, c.Labels)
	}
	if l, ok := op.Params["labels"].(map[string]any); ok {
		for k, v := range l {
			if s, ok := v.(string); ok {
				g.Labels[k] = s
			}
		}
	}
	if err := checkCounts(g); err != nil {
		return err
	}
	u.Group = g
	if u.Params, err = u.d.params(c); err != nil {
		return err
	}
	u.Life = lifecycle{Cluster: c.UUID, Action: "UPDATE", GroupAction: "CREATE", Groups: []string{g.UUID}, Driver: c.Driver}
	return nil
}

func (u *nodeGroupCreateUnit) plan() *plannedSteps {
	p := &plannedSteps{}
	p.add(engine.Step{Name: "store the node group", Run: func(ctx context.Context, s *engine.StepCtx) error {
		s.Tx().PutCOENodeGroup(u.Group.Clone())
		return nil
	}})
	p.add(u.Life.begin(u.d))
	p.addFrom(u.d, &u.Life, func(drv driver.Driver) []driver.Step { return drv.CreateNodeGroup(u.Params, u.Group.Name) })
	p.add(u.Life.end(u.d, nil))
	return p
}

func (u *nodeGroupCreateUnit) Steps() []engine.Step { return u.plan().steps }

func (u *nodeGroupCreateUnit) Revert(ctx context.Context, s *engine.StepCtx, failed error) {
	if s.Step() > 0 {
		u.Life.fail(u.d, s, u.plan().cond(s.Step()), failed)
	}
}

func (u *nodeGroupCreateUnit) Result() any { return u.Group.UUID }

// nodeGroupRemoveUnit removes a group that is not a default group.
type nodeGroupRemoveUnit struct {
	clusterAction
	Group string `json:"group"`
	Name  string `json:"name"`
}

func (u *nodeGroupRemoveUnit) Prereq(ctx context.Context, op *opcodes.Op) error {
	c, _, err := u.d.cluster(op)
	if err != nil {
		return err
	}
	if err := u.d.checkIdle(c, 0); err != nil {
		return err
	}
	g, err := u.d.Cfg.COENodeGroup(c.UUID, op.Str("nodegroup"))
	if err != nil {
		return err
	}
	if g.IsDefault {
		return ecode.Errorf(ecode.Inval, "Deleting a default nodegroup is not supported.")
	}
	u.Group, u.Name = g.UUID, g.Name
	if u.Params, err = u.d.params(c); err != nil {
		return err
	}
	u.Life = lifecycle{Cluster: c.UUID, Action: "UPDATE", GroupAction: "DELETE", Groups: []string{g.UUID}, Driver: c.Driver}
	return nil
}

func (u *nodeGroupRemoveUnit) plan() *plannedSteps {
	p := &plannedSteps{}
	p.add(u.Life.begin(u.d))
	p.addFrom(u.d, &u.Life, func(drv driver.Driver) []driver.Step { return drv.DeleteNodeGroup(u.Params, u.Name) })
	p.add(engine.Step{Name: "remove the node group", Run: func(ctx context.Context, s *engine.StepCtx) error {
		if err := u.Life.finishCluster(u.d, s, nil); err != nil {
			return err
		}
		if g, err := u.d.Cfg.COENodeGroup(u.Life.Cluster, u.Group); err == nil {
			s.Tx().DeleteCOENodeGroup(g)
		}
		return nil
	}})
	return p
}

func (u *nodeGroupRemoveUnit) Steps() []engine.Step { return u.plan().steps }

func (u *nodeGroupRemoveUnit) Revert(ctx context.Context, s *engine.StepCtx, failed error) {
	u.Life.fail(u.d, s, u.plan().cond(s.Step()), failed)
}

func (u *nodeGroupRemoveUnit) Result() any { return nil }
