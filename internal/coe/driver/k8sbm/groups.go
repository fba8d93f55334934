package k8sbm

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/corral/corral/internal/coe/driver"
	"github.com/corral/corral/internal/coe/driver/k8sprocess"
	"github.com/corral/corral/internal/coe/kube"
	"github.com/corral/corral/internal/config"
	"github.com/corral/corral/internal/ecode"
)

// CreateNodeGroup implements driver.Driver.
func (d *Driver) CreateNodeGroup(p driver.Params, group string) []driver.Step {
	return d.UpdateNodeGroup(p, group, nil)
}

// UpdateNodeGroup implements driver.Driver: the named nodes' machines are
// released first, then the last ones while the group has too many; then
// machines are claimed and deployed while it has too few, and the group
// waits for them to be active and for their kube nodes to be Ready.
func (d *Driver) UpdateNodeGroup(p driver.Params, group string, remove []string) []driver.Step {
	return []driver.Step{
		{Name: "undeploy " + group + "'s surplus machines", Condition: "NodeGroupMachinesUndeploying/" + group,
			Run: func(ctx context.Context, e driver.Env, c *driver.Cluster) error {
				g, err := workerGroup(c, group)
				if err != nil {
					return err
				}
				return d.release(ctx, e, c, g, g.NodeCount, remove)
			}},
		{Name: "wait for " + group + "'s released machines", Condition: "NodeGroupMachinesReleased/" + group,
			Run: func(ctx context.Context, e driver.Env, c *driver.Cluster) error {
				g, err := workerGroup(c, group)
				if err != nil {
					return err
				}
				return d.awaitReleased(ctx, e, c, g.UUID)
			}},
		{Name: "claim and deploy " + group + "'s machines", Condition: "NodeGroupMachinesDeploying/" + group,
			Run: func(ctx context.Context, e driver.Env, c *driver.Cluster) error {
				g, err := workerGroup(c, group)
				if err != nil {
					return err
				}
				return d.claimAndDeploy(ctx, e, c, g)
			}},
		{Name: "wait for " + group + "'s machines to be active", Condition: "NodeGroupMachinesActive/" + group,
			Run: func(ctx context.Context, e driver.Env, c *driver.Cluster) error {
				g, err := workerGroup(c, group)
				if err != nil {
					return err
				}
				return d.awaitActive(ctx, e, c, g)
			}},
		{Name: "wait for " + group + "'s kube nodes", Condition: "NodeGroupNodesReady/" + group,
			Run: func(ctx context.Context, e driver.Env, c *driver.Cluster) error {
				g, err := workerGroup(c, group)
				if err != nil {
					return err
				}
				return d.awaitReady(ctx, e, c, g)
			}},
	}
}

// DeleteNodeGroup implements driver.Driver.
func (d *Driver) DeleteNodeGroup(p driver.Params, group string) []driver.Step {
	return []driver.Step{
		{Name: "undeploy " + group + "'s machines", Condition: "NodeGroupMachinesUndeploying/" + group,
			Run: func(ctx context.Context, e driver.Env, c *driver.Cluster) error {
				g := c.Group(group)
				if g == nil {
					return nil
				}
				return d.release(ctx, e, c, g, 0, nil)
			}},
		{Name: "wait for " + group + "'s machines to be available", Condition: "NodeGroupRemoved/" + group,
			Run: func(ctx context.Context, e driver.Env, c *driver.Cluster) error {
				g := c.Group(group)
				if g == nil {
					return nil
				}
				return d.awaitReleased(ctx, e, c, g.UUID)
			}},
	}
}

// workerGroup is the cluster's group of that name, which must be a
// worker group: the masters run on a Corral node.
func workerGroup(c *driver.Cluster, name string) (*config.COENodeGroup, error) {
	g := c.Group(name)
	if g == nil {
		return nil, ecode.ExecErrorf("node group %s of cluster %s is gone", name, c.Name)
	}
	if g.Role == config.COERoleMaster {
		if g.IsDefault {
			return nil, ecode.ExecErrorf("the %s driver runs the masters on a Corral node, not in node group %s", Name, name)
		}
		return nil, ecode.Errorf(ecode.Inval, "the %s driver runs the masters on a Corral node: node group %s of role master is not supported", Name, name)
	}
	return g, nil
}

// toRelease chooses which of a group's machines go so that keep remain:
// the named ones, then machines the group does not list, then the last
// listed.
func toRelease(claimed []*config.Machine, listed []string, keep int, remove []string) []*config.Machine {
	var out []*config.Machine
	rest := slices.Clone(claimed)
	take := func(pred func(m *config.Machine) bool) {
		for i := 0; i < len(rest) && len(rest) > 0; {
			if pred(rest[i]) {
				out = append(out, rest[i])
				rest = slices.Delete(rest, i, i+1)
				continue
			}
			i++
		}
	}
	take(func(m *config.Machine) bool { return slices.Contains(remove, m.Name) })
	for len(rest) > keep {
		i := slices.IndexFunc(rest, func(m *config.Machine) bool { return !slices.Contains(listed, m.Name) })
		if i < 0 {
			// The last listed goes first, as k8s_process drops the last made.
			i = slices.IndexFunc(rest, func(m *config.Machine) bool {
				return m.Name == lastListed(listed, rest)
			})
		}
		out = append(out, rest[i])
		rest = slices.Delete(rest, i, i+1)
	}
	return out
}

func lastListed(listed []string, among []*config.Machine) string {
	for i := len(listed) - 1; i >= 0; i-- {
		if slices.ContainsFunc(among, func(m *config.Machine) bool { return m.Name == listed[i] }) {
			return listed[i]
		}
	}
	return ""
}

// releaseAll releases every worker group's machines (a cluster delete).
func (d *Driver) releaseAll(ctx context.Context, e driver.Env, c *driver.Cluster) error {
	for _, g := range c.Groups {
		if g.Role == config.COERoleMaster {
			continue
		}
		if err := d.release(ctx, e, c, g, 0, nil); err != nil {
			return err
		}
	}
	c.SetPlace(placeReleaseWait, d.now().Unix())
	return nil
}

// release makes the group keep at most keep machines: each one going has
// its kube node and its bootstrap token deleted and is undeployed (a
// child job); one not deployed is released at once. A machine with an
// action under way is waited for first, with nothing changed.
func (d *Driver) release(ctx context.Context, e driver.Env, c *driver.Cluster, g *config.COENodeGroup, keep int, remove []string) error {
	st, err := store(e)
	if err != nil {
		return err
	}
	going := toRelease(machinesOf(st.Cfg().Machines(), g.UUID), g.Nodes, keep, remove)
	if len(going) == 0 {
		return nil
	}
	for _, m := range going {
		if stateOf(m) == statePending && placeString(c, placeRelease+m.UUID) == "" {
			deadline, timeout := d.deadline(c, placeWait+g.Name)
			return d.park(ctx, e, deadline, func() error {
				return ecode.ExecErrorf("machine %s of node group %s was still %s after %v; it cannot be undeployed meanwhile",
					m.Name, g.Name, m.ProvisionState, timeout)
			})
		}
	}
	cl, clErr := d.cp.Client(c)
	for _, m := range going {
		if clErr == nil {
			if err := cl.DeleteNode(ctx, m.Name); err != nil && ecode.ClassOf(err) != ecode.NoEnt {
				return fmt.Errorf("deleting node %s: %w", m.Name, err)
			}
			if id := placeString(c, placeToken+m.UUID); id != "" {
				if err := cl.DeleteBootstrapToken(ctx, id); err != nil && ecode.ClassOf(err) != ecode.NoEnt {
					return fmt.Errorf("deleting the bootstrap token of %s: %w", m.Name, err)
				}
			}
		}
		delete(c.Placement, placeToken+m.UUID)
		g.Nodes = slices.DeleteFunc(g.Nodes, func(n string) bool { return n == m.Name })
		if placeString(c, placeRelease+m.UUID) != "" {
			continue // undeploy submitted by an earlier run that committed
		}
		switch stateOf(m) {
		case stateAvailable:
			if err := releaseMachine(ctx, st.Cfg(), m.UUID, g.UUID); err != nil {
				return err
			}
			continue
		case stateActive, stateFailed:
			if err := st.Submit([]map[string]any{{"OP_ID": "OP_MACHINE_PROVISION", "machine": m.UUID,
				"target": "deleted"}}); err != nil {
				return err
			}
		}
		c.SetPlace(placeRelease+m.UUID, g.UUID)
		e.Logf(ctx, "undeploying machine %s of node group %s", m.Name, g.Name)
	}
	if clErr != nil {
		e.Logf(ctx, "the API server of %s is not reachable (%v): its nodes of the released machines are left", c.Name, clErr)
	}
	c.SetPlace(placeReleaseWait+g.UUID, d.now().Unix())
	return nil
}

// awaitReleased parks until every machine being released (of the group
// groupUUID, or of every group when "") is available again, then releases
// its claim; a machine failing its undeploy fails the step.
func (d *Driver) awaitReleased(ctx context.Context, e driver.Env, c *driver.Cluster, groupUUID string) error {
	st, err := store(e)
	if err != nil {
		return err
	}
	var pending []string
	for key, v := range c.Placement {
		uuid, ok := strings.CutPrefix(key, placeRelease)
		owner, _ := v.(string)
		if !ok || (groupUUID != "" && owner != groupUUID) {
			continue
		}
		m, found := st.Cfg().Machine(uuid)
		if !found || m.InstanceUUID != owner {
			delete(c.Placement, key)
			continue
		}
		switch stateOf(m) {
		case stateAvailable:
			if err := releaseMachine(ctx, st.Cfg(), uuid, owner); err != nil {
				return err
			}
			delete(c.Placement, key)
		case stateFailed:
			return ecode.ExecErrorf("undeploying %s", failure(m))
		default:
			pending = append(pending, m.Name+" ("+m.ProvisionState+")")
		}
	}
	if len(pending) == 0 {
		return nil
	}
	slices.Sort(pending)
	deadline, timeout := d.deadline(c, placeReleaseWait+groupUUID)
	return d.park(ctx, e, deadline, func() error {
		return ecode.ExecErrorf("machines %s were not available again within %v of their undeploy", strings.Join(pending, ", "), timeout)
	})
}

// claimAndDeploy claims the machines the group lacks and submits the
// deploy of each claimed machine not yet deployed, with a config drive
// holding a fresh bootstrap token.
func (d *Driver) claimAndDeploy(ctx context.Context, e driver.Env, c *driver.Cluster, g *config.COENodeGroup) error {
	st, err := store(e)
	if err != nil {
		return err
	}
	image := c.Template.ImageID
	if g.ImageID != "" {
		image = g.ImageID
	}
	claimed := machinesOf(st.Cfg().Machines(), g.UUID)
	var mine []*config.Machine
	for _, m := range claimed {
		if placeString(c, placeRelease+m.UUID) == "" {
			mine = append(mine, m)
		}
	}
	more, err := claimMachines(ctx, st.Cfg(), g, resourceClass(c, g), image, g.NodeCount-len(mine))
	if err != nil {
		return err
	}
	mine = append(mine, more...)
	cl, err := d.cp.Client(c)
	if err != nil {
		return err
	}
	ca := []byte(c.CA.CertPEM)
	for _, m := range mine {
		if !slices.Contains(g.Nodes, m.Name) {
			g.Nodes = append(g.Nodes, m.Name)
		}
		if stateOf(m) != stateAvailable {
			continue // deployed, or being deployed, by an earlier job
		}
		if err := d.deploy(ctx, e, st, cl, c, m.UUID, m.Name, ca); err != nil {
			return err
		}
	}
	g.Version = c.COEVersion
	c.SetPlace(placeWait+g.Name, d.now().Unix())
	return nil
}

// resourceClass is the machines' resource class a group asks for: its
// flavor, else the cluster's, else the template's ("" takes any).
func resourceClass(c *driver.Cluster, g *config.COENodeGroup) string {
	for _, f := range []string{g.FlavorID, c.FlavorID, c.Template.FlavorID} {
		if f != "" {
			return f
		}
	}
	return ""
}

// deploy makes a machine's bootstrap token and submits its deploy.
func (d *Driver) deploy(ctx context.Context, e driver.Env, st driver.Store, cl *kube.Client, c *driver.Cluster, uuid, name string, ca []byte) error {
	if old := placeString(c, placeToken+uuid); old != "" {
		if err := cl.DeleteBootstrapToken(ctx, old); err != nil && ecode.ClassOf(err) != ecode.NoEnt {
			return fmt.Errorf("deleting the old bootstrap token of %s: %w", name, err)
		}
	}
	id, sec, err := newBootstrapToken()
	if err != nil {
		return err
	}
	if err := cl.CreateBootstrapToken(ctx, kube.BootstrapToken{ID: id, Secret: sec,
		Description: "joins machine " + name + " to cluster " + c.Name, Expiration: d.now().Add(d.tokenTTL()),
		ExtraGroups: []string{BootstrapGroup}}); err != nil {
		return fmt.Errorf("creating the bootstrap token of %s: %w", name, err)
	}
	j := JoinConfig{ClusterName: c.Name, NodeName: name, Server: c.APIAddress, CACert: ca, Token: tokenOf(id, sec)}
	cd, err := j.ConfigDrive(uuid)
	if err != nil {
		return err
	}
	if err := st.Submit([]map[string]any{{"OP_ID": "OP_MACHINE_PROVISION", "machine": uuid,
		"target": "active", "configdrive": cd}}); err != nil {
		return err
	}
	c.SetPlace(placeToken+uuid, id)
	e.Logf(ctx, "deploying machine %s with a config drive to join cluster %s", name, c.Name)
	return nil
}

// awaitActive parks until every machine of the group is active; one that
// failed to deploy fails the step with the machine's error.
func (d *Driver) awaitActive(ctx context.Context, e driver.Env, c *driver.Cluster, g *config.COENodeGroup) error {
	st, err := store(e)
	if err != nil {
		return err
	}
	var pending []string
	var failed []error
	for _, m := range machinesOf(st.Cfg().Machines(), g.UUID) {
		if !slices.Contains(g.Nodes, m.Name) {
			continue
		}
		switch stateOf(m) {
		case stateActive:
		case stateFailed:
			failed = append(failed, errors.New(failure(m)))
		default:
			pending = append(pending, m.Name+" ("+m.ProvisionState+")")
		}
	}
	if len(failed) > 0 {
		return ecode.ExecErrorf("deploying node group %s's machines: %w", g.Name, errors.Join(failed...))
	}
	if len(pending) == 0 {
		return nil
	}
	deadline, timeout := d.deadline(c, placeWait+g.Name)
	return d.park(ctx, e, deadline, func() error {
		return ecode.ExecErrorf("machines %s of node group %s were not active within the create_timeout of %v",
			strings.Join(pending, ", "), g.Name, timeout)
	})
}

// awaitReady parks until a Ready kube node named after each of the
// group's machines is there, then labels it with its group.
func (d *Driver) awaitReady(ctx context.Context, e driver.Env, c *driver.Cluster, g *config.COENodeGroup) error {
	cl, err := d.cp.Client(c)
	if err != nil {
		return err
	}
	var missing []string
	for _, name := range g.Nodes {
		n, err := cl.GetNode(ctx, name)
		switch {
		case ecode.ClassOf(err) == ecode.NoEnt:
			missing = append(missing, name+" (not registered)")
		case err != nil:
			return fmt.Errorf("reading node %s: %w", name, err)
		case n.Ready != kube.ConditionTrue:
			missing = append(missing, name+" (not Ready)")
		case n.Labels[k8sprocess.LabelNodeGroup] != g.Name:
			if err := cl.SetNodeLabel(ctx, name, k8sprocess.LabelNodeGroup, g.Name); err != nil {
				return err
			}
			if err := cl.SetNodeLabel(ctx, name, k8sprocess.LabelNodeGroupRole, g.Role); err != nil {
				return err
			}
		}
	}
	if len(missing) == 0 {
		return nil
	}
	deadline, timeout := d.deadline(c, placeWait+g.Name)
	return d.park(ctx, e, deadline, func() error {
		return ecode.ExecErrorf("the kubelets of machines %s (node group %s) did not join as Ready nodes within the create_timeout of %v: check that the image runs kubelet with the config drive's --bootstrap-kubeconfig",
			strings.Join(missing, ", "), g.Name, timeout)
	})
}
