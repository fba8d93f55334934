package k8sprocess

import (
	"context"
	"fmt"
	"slices"
	"strconv"

	"github.com/corral/corral/internal/coe/driver"
	"github.com/corral/corral/internal/coe/kube"
	"github.com/corral/corral/internal/config"
	"github.com/corral/corral/internal/ecode"
)

// Labels every kube node of a group carries, as Magnum's drivers set them.
const (
	LabelNodeGroup     = "magnum.openstack.org/nodegroup"
	LabelNodeGroupRole = "magnum.openstack.org/role"
)

// CreateNodeGroup implements driver.Driver.
func (d *Driver) CreateNodeGroup(p driver.Params, group string) []driver.Step {
	return d.UpdateNodeGroup(p, group, nil)
}

// UpdateNodeGroup implements driver.Driver: the named nodes go first, then
// the last made while the group has too many; new nodes get the next
// numbers, which the cluster's placement keeps so a name is never reused.
// A group of kubelet workers then waits for its kube nodes to be Ready.
func (d *Driver) UpdateNodeGroup(p driver.Params, group string, remove []string) []driver.Step {
	return []driver.Step{{Name: "bring " + group + " to its node count", Condition: "NodeGroupReady/" + group,
		Run: func(ctx context.Context, e driver.Env, c *driver.Cluster) error {
			g := c.Group(group)
			if g == nil {
				return ecode.ExecErrorf("node group %s of cluster %s is gone", group, c.Name)
			}
			if _, err := workerKind(p, g); err != nil {
				return err
			}
			return d.converge(ctx, e, p, c, g, remove)
		}},
		{Name: "wait for " + group + "'s kube nodes", Condition: "NodeGroupNodesReady/" + group,
			Run: func(ctx context.Context, e driver.Env, c *driver.Cluster) error {
				g := c.Group(group)
				if g == nil {
					return ecode.ExecErrorf("node group %s of cluster %s is gone", group, c.Name)
				}
				if kind, _ := workerKind(p, g); kind != WorkersKubelet {
					return nil // kwok's nodes are Ready within seconds
				}
				return d.waitKubelets(ctx, e, c, g)
			}}}
}

// DeleteNodeGroup implements driver.Driver.
func (d *Driver) DeleteNodeGroup(p driver.Params, group string) []driver.Step {
	return []driver.Step{{Name: "remove " + group + "'s nodes", Condition: "NodeGroupRemoved/" + group,
		Run: func(ctx context.Context, e driver.Env, c *driver.Cluster) error {
			g := c.Group(group)
			if g == nil {
				return nil
			}
			g.NodeCount = 0
			return d.converge(ctx, e, p, c, g, nil)
		}}}
}

// converge makes the group's kube nodes match its node_count: kwok's
// Node objects, or kubelets on Corral nodes.
func (d *Driver) converge(ctx context.Context, e driver.Env, p driver.Params, c *driver.Cluster, g *config.COENodeGroup, remove []string) error {
	cl, err := d.client(c)
	if err != nil {
		return err
	}
	kind, _ := workerKind(p, g)
	drop := func(n string) error {
		if err := cl.DeleteNode(ctx, n); err != nil && ecode.ClassOf(err) != ecode.NoEnt {
			return fmt.Errorf("deleting node %s: %w", n, err)
		}
		if err := d.removeKubelet(ctx, e, c, n); err != nil {
			return err
		}
		g.Nodes = slices.DeleteFunc(g.Nodes, func(x string) bool { return x == n })
		return nil
	}
	for _, n := range remove {
		if slices.Contains(g.Nodes, n) {
			if err := drop(n); err != nil {
				return err
			}
		}
	}
	for len(g.Nodes) > g.NodeCount {
		if err := drop(g.Nodes[len(g.Nodes)-1]); err != nil {
			return err
		}
	}
	key := placeSeqPrefix + g.Name
	seq := c.PlaceInt(key)
	for len(g.Nodes) < g.NodeCount {
		seq++
		g.Nodes = append(g.Nodes, c.Name+"-"+g.Name+"-"+strconv.FormatInt(seq, 10))
	}
	c.SetPlace(key, seq)
	g.Version = kubeVersion(c)
	if kind == WorkersKubelet {
		return d.startKubelets(ctx, e, c, g)
	}
	for _, n := range g.Nodes {
		if err := createNode(ctx, cl, g, n); err != nil {
			return err
		}
	}
	g.NodeAddresses = nil
	return nil
}

// createNode makes a group's kwok node; one that exists is left alone.
func createNode(ctx context.Context, cl *kube.Client, g *config.COENodeGroup, name string) error {
	err := cl.CreateKwokNode(ctx, kube.KwokNode{Name: name,
		Labels: map[string]string{LabelNodeGroup: g.Name, LabelNodeGroupRole: g.Role}})
	if err != nil && ecode.ClassOf(err) != ecode.Exists {
		return fmt.Errorf("creating node %s: %w", name, err)
	}
	return nil
}

// UpgradeCluster implements driver.Driver: each batch's nodes are deleted
// and made again (kwok nodes report the control plane's version), and
// the group records the new kube_tag.
func (d *Driver) UpgradeCluster(p, to driver.Params, plan driver.UpgradePlan) []driver.Step {
	var steps []driver.Step
	for _, pg := range plan.Groups {
		for i, batch := range pg.Batches {
			group, batch := pg.Name, batch
			if pg.Role == config.COERoleMaster {
				steps = append(steps, d.rollMasters(to, group, i+1, batch)...)
				continue
			}
			steps = append(steps, driver.Step{Name: fmt.Sprintf("replace %s's nodes, batch %d", group, i+1),
				Condition: "Upgraded/" + group + "/" + strconv.Itoa(i+1),
				Run: func(ctx context.Context, e driver.Env, c *driver.Cluster) error {
					g := c.Group(group)
					if g == nil {
						return ecode.ExecErrorf("node group %s of cluster %s is gone", group, c.Name)
					}
					cl, err := d.client(c)
					if err != nil {
						return err
					}
					if kind, _ := workerKind(p, g); kind == WorkersKubelet {
						// The kubelet is the pinned one: the batch's
						// kubelets restart, their pods keep running.
						if err := d.restartKubelets(ctx, e, c, g, batch); err != nil {
							return err
						}
						g.Version = to.KubeTag
						return nil
					}
					for _, n := range batch {
						if !slices.Contains(g.Nodes, n) {
							continue
						}
						if err := cl.DeleteNode(ctx, n); err != nil && ecode.ClassOf(err) != ecode.NoEnt {
							return fmt.Errorf("deleting node %s: %w", n, err)
						}
						if err := createNode(ctx, cl, g, n); err != nil {
							return err
						}
					}
					g.Version = to.KubeTag
					return nil
				}})
		}
	}
	return steps
}
