package coe

import (
	"context"
	"slices"

	"github.com/corral/corral/internal/coe/driver"
	"github.com/corral/corral/internal/config"
	"github.com/corral/corral/internal/ecode"
	"github.com/corral/corral/internal/engine"
	"github.com/corral/corral/internal/locking"
	"github.com/corral/corral/internal/opcodes"
)

// clusterAction is what a unit acting on one whole cluster holds: the
// driver's parameters and the lifecycle it records, under the cluster's
// lock. Its fields are the plan's "params" and "life".
type clusterAction struct {
	d      *Deps
	Params driver.Params `json:"params"`
	Life   lifecycle     `json:"life"`
}

func (u *clusterAction) Locks(op *opcodes.Op) []locking.Request {
	return coeLocks(u.d.clusterLock(op.Str("cluster")))
}

// prepare loads the op's cluster, refuses it while another job changes
// it, and plans action on it.
func (u *clusterAction) prepare(op *opcodes.Op, action string) error {
	c, _, err := u.d.cluster(op)
	if err != nil {
		return err
	}
	if err := u.d.checkIdle(c, 0); err != nil {
		return err
	}
	if u.Params, err = u.d.params(c); err != nil {
		return err
	}
	u.Life = lifecycle{Cluster: c.UUID, Action: action, Driver: c.Driver}
	return nil
}

// upgradeUnit rolls a cluster's groups (or one) to another template,
// max_batch_size nodes at a time, masters first.
type upgradeUnit struct {
	d        *Deps
	Template string             `json:"template"`
	From     driver.Params      `json:"from"`
	To       driver.Params      `json:"to"`
	Plan     driver.UpgradePlan `json:"plan"`
	Life     lifecycle          `json:"life"`
}

func (u *upgradeUnit) Locks(op *opcodes.Op) []locking.Request {
	return coeLocks(u.d.clusterLock(op.Str("cluster")), u.d.templateLock(op.Str("cluster_template")))
}

func (u *upgradeUnit) Prereq(ctx context.Context, op *opcodes.Op) error {
	c, _, err := u.d.cluster(op)
	if err != nil {
		return err
	}
	if err := u.d.checkIdle(c, 0); err != nil {
		return err
	}
	t, err := u.d.Cfg.MustCOETemplate(op.Str("cluster_template"))
	if err != nil {
		return err
	}
	if t.Driver != c.Driver {
		return ecode.Errorf(ecode.Inval, "ClusterTemplate %s uses driver %s; cluster %s uses %s.", t.UUID, t.Driver, c.UUID, c.Driver)
	}
	batch := max(op.Int("max_batch_size"), 1)
	groups := u.d.Cfg.COENodeGroups(c.UUID)
	slices.SortStableFunc(groups, func(a, b *config.COENodeGroup) int {
		return boolOrder(a.Role == config.COERoleMaster, b.Role == config.COERoleMaster)
	})
	var ids []string
	for _, g := range groups {
		if name := op.Str("nodegroup"); name != "" && g.Name != name && g.UUID != name {
			continue
		}
		u.Plan.Groups = append(u.Plan.Groups, driver.UpgradeGroup{Name: g.Name, Role: g.Role, Batches: upgradeBatches(g, batch)})
		ids = append(ids, g.UUID)
	}
	if len(ids) == 0 {
		return ecode.Errorf(ecode.NoEnt, "Nodegroup %s could not be found.", op.Str("nodegroup"))
	}
	if u.From, err = u.d.params(c); err != nil {
		return err
	}
	next := c.Clone()
	next.Template = t.UUID
	if tag, ok := t.Labels["kube_tag"]; ok {
		// The target template's version wins over the cluster's own label.
		next.Labels["kube_tag"] = tag
	}
	u.To = driver.Definition(t, next, groups)
	u.Template = t.UUID
	u.Life = lifecycle{Cluster: c.UUID, Action: "UPDATE", Groups: ids, Driver: c.Driver}
	return nil
}

// upgradeBatches are a group's batches of at most batch nodes. Masters
// that are no kube nodes (the group lists none) go by address, and never
// so many at once that etcd loses its majority: one at a time of three,
// two of five.
func upgradeBatches(g *config.COENodeGroup, batch int) [][]string {
	nodes, size := slices.Clone(g.Nodes), max(batch, 1)
	if g.Role == config.COERoleMaster && len(g.Nodes) == 0 {
		nodes, size = slices.Clone(g.NodeAddresses), max(1, min(size, (len(g.NodeAddresses)-1)/2))
	}
	var out [][]string
	for len(nodes) > 0 {
		n := min(size, len(nodes))
		out = append(out, nodes[:n])
		nodes = nodes[n:]
	}
	return out
}

func boolOrder(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return -1
	}
	return 1
}

func (u *upgradeUnit) plan() *plannedSteps {
	p := &plannedSteps{}
	p.add(u.Life.begin(u.d))
	p.addFrom(u.d, &u.Life, func(drv driver.Driver) []driver.Step { return drv.UpgradeCluster(u.From, u.To, u.Plan) })
	p.add(u.Life.end(u.d, func(c *config.COECluster) {
		if u.Life.Groups != nil && len(u.Plan.Groups) == len(u.d.Cfg.COENodeGroups(c.UUID)) {
			c.Template = u.Template
			c.COEVersion = u.To.KubeTag
			if u.To.KubeTag != "" {
				c.Labels["kube_tag"] = u.To.KubeTag
			}
		}
	}))
	return p
}

func (u *upgradeUnit) Steps() []engine.Step { return u.plan().steps }

func (u *upgradeUnit) Revert(ctx context.Context, s *engine.StepCtx, failed error) {
	u.Life.fail(u.d, s, u.plan().cond(s.Step()), failed)
}

func (u *upgradeUnit) Result() any { return u.Life.Cluster }

// clusterRemoveUnit deletes a cluster: DELETE_IN_PROGRESS, the driver
// removes what it made, then the cluster, its groups, CA and trust go.
type clusterRemoveUnit struct{ clusterAction }

func (u *clusterRemoveUnit) Prereq(ctx context.Context, op *opcodes.Op) error {
	return u.prepare(op, "DELETE")
}

func (u *clusterRemoveUnit) plan() *plannedSteps {
	p := &plannedSteps{}
	p.add(u.Life.begin(u.d))
	p.addFrom(u.d, &u.Life, func(drv driver.Driver) []driver.Step { return drv.DeleteCluster(u.Params) })
	p.add(engine.Step{Name: "remove the cluster's records", Run: func(ctx context.Context, s *engine.StepCtx) error {
		c, ok := u.d.Cfg.COECluster(u.Life.Cluster)
		if !ok {
			return nil
		}
		tx := s.Tx()
		for _, g := range u.d.Cfg.COENodeGroups(c.UUID) {
			tx.DeleteCOENodeGroup(g)
		}
		if ca, ok := u.d.Cfg.COECertificate(c.UUID); ok {
			tx.DeleteCOECertificate(ca)
		}
		if t, ok := u.d.Cfg.COETrust(c.Trust); ok {
			tx.DeleteCOETrust(t)
		}
		u.d.leaveFederations(tx, c.UUID)
		tx.DeleteCOECluster(c)
		return nil
	}})
	return p
}

func (u *clusterRemoveUnit) Steps() []engine.Step { return u.plan().steps }

func (u *clusterRemoveUnit) Revert(ctx context.Context, s *engine.StepCtx, failed error) {
	u.Life.fail(u.d, s, u.plan().cond(s.Step()), failed)
}

func (u *clusterRemoveUnit) Result() any { return nil }

// caRotateUnit replaces a cluster's CA (disruptive: the components
// restart and kubeconfigs of the old CA stop working).
type caRotateUnit struct{ clusterAction }

func (u *caRotateUnit) Prereq(ctx context.Context, op *opcodes.Op) error {
	return u.prepare(op, "UPDATE")
}

func (u *caRotateUnit) plan() *plannedSteps {
	p := &plannedSteps{}
	p.add(u.Life.begin(u.d))
	p.addFrom(u.d, &u.Life, func(drv driver.Driver) []driver.Step { return drv.RotateCA(u.Params) })
	p.add(u.Life.end(u.d, nil))
	return p
}

func (u *caRotateUnit) Steps() []engine.Step { return u.plan().steps }

func (u *caRotateUnit) Revert(ctx context.Context, s *engine.StepCtx, failed error) {
	u.Life.fail(u.d, s, u.plan().cond(s.Step()), failed)
}

func (u *caRotateUnit) Result() any { return nil }

// healUnit replaces named nodes (the auto-healing reconciler's): each
// group loses them and gets as many new ones.
type healUnit struct {
	clusterAction
	Remove map[string][]string `json:"remove"` // group name -> nodes
	Order  []string            `json:"order"`
}

func (u *healUnit) Prereq(ctx context.Context, op *opcodes.Op) error {
	c, _, err := u.d.cluster(op)
	if err != nil {
		return err
	}
	if err := u.d.checkIdle(c, 0); err != nil {
		return err
	}
	if err := u.d.checkTrust(c); err != nil {
		return err
	}
	u.Remove = map[string][]string{}
	var ids []string
	for _, n := range op.Strings("nodes") {
		found := false
		for _, g := range u.d.Cfg.COENodeGroups(c.UUID) {
			if slices.Contains(g.Nodes, n) {
				if _, seen := u.Remove[g.Name]; !seen {
					u.Order = append(u.Order, g.Name)
					ids = append(ids, g.UUID)
				}
				u.Remove[g.Name] = append(u.Remove[g.Name], n)
				found = true
			}
		}
		if !found {
			return ecode.Errorf(ecode.Inval, "Node %s is not a node of cluster %s.", n, c.UUID)
		}
	}
	if u.Params, err = u.d.params(c); err != nil {
		return err
	}
	u.Life = lifecycle{Cluster: c.UUID, Action: "UPDATE", Groups: ids, Driver: c.Driver}
	return nil
}

func (u *healUnit) plan() *plannedSteps {
	p := &plannedSteps{}
	p.add(u.Life.begin(u.d))
	for _, g := range u.Order {
		p.addFrom(u.d, &u.Life, func(drv driver.Driver) []driver.Step { return drv.UpdateNodeGroup(u.Params, g, u.Remove[g]) })
	}
	p.add(u.Life.end(u.d, nil))
	return p
}

func (u *healUnit) Steps() []engine.Step { return u.plan().steps }

func (u *healUnit) Revert(ctx context.Context, s *engine.StepCtx, failed error) {
	u.Life.fail(u.d, s, u.plan().cond(s.Step()), failed)
}

func (u *healUnit) Result() any { return nil }
