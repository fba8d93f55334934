// Package fake is an in-process COE driver: it keeps each cluster's
// Kubernetes nodes in memory, records every step it was asked to run, and
// can be told to fail or hold a step. It is the units' test double and
// the driver of templates with cluster_distro "fake".
package fake

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/corral/corral/internal/coe/driver"
	"github.com/corral/corral/internal/config"
)

// Name is the driver's type.
const Name = "fake"

// Driver is the fake driver.
type Driver struct {
	mu    sync.Mutex
	calls []string
	fail  map[string]error
	// Gate, when set, runs before every step with its condition; an
	// error fails the step (a test holds a step by blocking in it).
	Gate     func(ctx context.Context, condition string) error
	clusters map[string]*state // by cluster uuid
}

type state struct {
	apiReady bool
	nodes    map[string]*driver.KubeNode
}

// New makes a fake driver.
func New() *Driver {
	return &Driver{fail: map[string]error{}, clusters: map[string]*state{}}
}

// Type implements driver.Driver.
func (d *Driver) Type() string { return Name }

// Provides implements driver.Driver.
func (d *Driver) Provides() []driver.Provision {
	return []driver.Provision{{ServerType: "vm", OS: "fake", COE: "kubernetes"}}
}

// Fail makes every run of the steps with that condition fail with err
// (nil: succeed again).
func (d *Driver) Fail(condition string, err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err == nil {
		delete(d.fail, condition)
		return
	}
	d.fail[condition] = err
}

// Calls are the steps run so far, as "<cluster name>:<condition>".
func (d *Driver) Calls() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.calls)
}

// SetNode changes what the monitor sees of a cluster's node.
func (d *Driver) SetNode(cluster string, n driver.KubeNode) {
	d.mu.Lock()
	defer d.mu.Unlock()
	st := d.stateOf(cluster)
	st.nodes[n.Name] = &n
}

// Nodes are a cluster's Kubernetes nodes, sorted by name.
func (d *Driver) Nodes(cluster string) []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	st := d.clusters[cluster]
	if st == nil {
		return nil
	}
	var out []string
	for n := range st.nodes {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Known reports whether the driver holds anything of the cluster.
func (d *Driver) Known(cluster string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	_, ok := d.clusters[cluster]
	return ok
}

func (d *Driver) stateOf(cluster string) *state {
	st := d.clusters[cluster]
	if st == nil {
		st = &state{nodes: map[string]*driver.KubeNode{}}
		d.clusters[cluster] = st
	}
	return st
}

// step wraps a step's work with the record, the gate and the injected
// failures.
func (d *Driver) step(name, cond string, work func(c *driver.Cluster, st *state) error) driver.Step {
	return driver.Step{Name: name, Condition: cond, Run: func(ctx context.Context, e driver.Env, c *driver.Cluster) error {
		if d.Gate != nil {
			if err := d.Gate(ctx, cond); err != nil {
				return err
			}
		}
		d.mu.Lock()
		defer d.mu.Unlock()
		d.calls = append(d.calls, c.Name+":"+cond)
		if err := d.fail[cond]; err != nil {
			return err
		}
		return work(c, d.stateOf(c.UUID))
	}}
}

// CreateCluster implements driver.Driver.
func (d *Driver) CreateCluster(p driver.Params) []driver.Step {
	return []driver.Step{
		d.step("make the CA and certificates", "CertificatesReady", func(c *driver.Cluster, st *state) error {
			if c.CA == nil {
				c.CA = &config.COECertificate{Cluster: c.UUID, CertPEM: "fake CA of " + c.UUID, Generation: 1}
			}
			return nil
		}),
		d.step("set up the API endpoint", "APIEndpointReady", func(c *driver.Cluster, st *state) error {
			c.APIAddress = "https://" + c.UUID + ".fake:6443"
			return nil
		}),
		d.step("start etcd", "EtcdReady", func(c *driver.Cluster, st *state) error { return nil }),
		d.step("start the control plane", "ControlPlaneReady", func(c *driver.Cluster, st *state) error {
			st.apiReady = true
			c.COEVersion = p.KubeTag
			if g := c.MasterGroup(); g != nil {
				converge(c, g, st, nil)
				c.MasterAddresses = slices.Clone(g.NodeAddresses)
			}
			return nil
		}),
	}
}

// converge brings a group's nodes to its count: the named ones go first,
// then the last made; new ones get the next free sequence number.
func converge(c *driver.Cluster, g *config.COENodeGroup, st *state, remove []string) {
	for _, n := range remove {
		if slices.Contains(g.Nodes, n) {
			g.Nodes = slices.DeleteFunc(g.Nodes, func(x string) bool { return x == n })
			delete(st.nodes, n)
		}
	}
	for len(g.Nodes) > g.NodeCount {
		n := g.Nodes[len(g.Nodes)-1]
		g.Nodes = g.Nodes[:len(g.Nodes)-1]
		delete(st.nodes, n)
	}
	if c.Placement == nil {
		c.Placement = map[string]any{}
	}
	key := "seq/" + g.Name
	seq, _ := c.Placement[key].(float64)
	for len(g.Nodes) < g.NodeCount {
		seq++
		n := c.Name + "-" + g.Name + "-" + strconv.Itoa(int(seq))
		g.Nodes = append(g.Nodes, n)
		st.nodes[n] = &driver.KubeNode{Name: n, Ready: true, Since: time.Now()}
	}
	c.Placement[key] = seq
	// A rerun after a restart finds its nodes in the group; the fake's
	// memory may have lost them (a new process), so they come back.
	for _, n := range g.Nodes {
		if st.nodes[n] == nil {
			st.nodes[n] = &driver.KubeNode{Name: n, Ready: true, Since: time.Now()}
		}
	}
	g.NodeAddresses = nil
	for i := range g.Nodes {
		g.NodeAddresses = append(g.NodeAddresses, fmt.Sprintf("10.0.%d.%d", len(g.Name)%250, i+1))
	}
	g.Version = c.COEVersion
}

// UpdateCluster implements driver.Driver.
func (d *Driver) UpdateCluster(p driver.Params) []driver.Step {
	return []driver.Step{d.step("apply the cluster's settings", "ClusterUpdated", func(c *driver.Cluster, st *state) error { return nil })}
}

// DeleteCluster implements driver.Driver.
func (d *Driver) DeleteCluster(p driver.Params) []driver.Step {
	return []driver.Step{
		d.step("remove the nodes", "NodesRemoved", func(c *driver.Cluster, st *state) error {
			for _, g := range c.Groups {
				g.NodeCount = 0
				converge(c, g, st, nil)
			}
			return nil
		}),
		d.step("stop the control plane", "ControlPlaneStopped", func(c *driver.Cluster, st *state) error {
			delete(d.clusters, c.UUID)
			return nil
		}),
	}
}

// UpgradeCluster implements driver.Driver.
func (d *Driver) UpgradeCluster(p, to driver.Params, plan driver.UpgradePlan) []driver.Step {
	var steps []driver.Step
	for _, g := range plan.Groups {
		for i, batch := range g.Batches {
			group, batch := g.Name, batch
			steps = append(steps, d.step(fmt.Sprintf("upgrade %s batch %d", group, i+1), "Upgraded/"+group+"/"+strconv.Itoa(i+1),
				func(c *driver.Cluster, st *state) error {
					d.calls = append(d.calls, "batch:"+group+":"+fmt.Sprint(batch))
					if grp := c.Group(group); grp != nil {
						grp.Version = to.KubeTag
					}
					return nil
				}))
		}
	}
	return steps
}

// CreateNodeGroup implements driver.Driver.
func (d *Driver) CreateNodeGroup(p driver.Params, group string) []driver.Step {
	return d.UpdateNodeGroup(p, group, nil)
}

// UpdateNodeGroup implements driver.Driver.
func (d *Driver) UpdateNodeGroup(p driver.Params, group string, remove []string) []driver.Step {
	return []driver.Step{d.step("bring "+group+" to its node count", "NodeGroupReady/"+group, func(c *driver.Cluster, st *state) error {
		g := c.Group(group)
		if g == nil {
			return fmt.Errorf("node group %s is gone", group)
		}
		converge(c, g, st, remove)
		return nil
	})}
}

// DeleteNodeGroup implements driver.Driver.
func (d *Driver) DeleteNodeGroup(p driver.Params, group string) []driver.Step {
	return []driver.Step{d.step("remove "+group+"'s nodes", "NodeGroupRemoved/"+group, func(c *driver.Cluster, st *state) error {
		if g := c.Group(group); g != nil {
			g.NodeCount = 0
			converge(c, g, st, nil)
		}
		return nil
	})}
}

// RotateCA implements driver.Driver.
func (d *Driver) RotateCA(p driver.Params) []driver.Step {
	return []driver.Step{d.step("rotate the CA", "CertificatesReady", func(c *driver.Cluster, st *state) error {
		next := &config.COECertificate{Cluster: c.UUID, Generation: 1}
		if c.CA != nil {
			// The stored object is replaced: its identity and serial stay.
			next.Meta, next.Generation = c.CA.Meta, c.CA.Generation+1
		}
		next.CertPEM = fmt.Sprintf("fake CA of %s, generation %d", c.UUID, next.Generation)
		c.CA = next
		return nil
	})}
}

// Monitor implements driver.Driver.
func (d *Driver) Monitor(c *driver.Cluster) driver.Monitor { return monitor{d: d, cluster: c.UUID} }

// ScaleManager implements driver.Driver.
func (d *Driver) ScaleManager(c *driver.Cluster) driver.ScaleManager {
	return driver.MonitorScaleManager{Monitor: d.Monitor(c)}
}

type monitor struct {
	d       *Driver
	cluster string
}

func (m monitor) Check(ctx context.Context) (driver.Health, error) {
	m.d.mu.Lock()
	defer m.d.mu.Unlock()
	st := m.d.clusters[m.cluster]
	if st == nil {
		return driver.Health{}, nil
	}
	h := driver.Health{APIReady: st.apiReady}
	for _, n := range st.nodes {
		h.Nodes = append(h.Nodes, *n)
	}
	sort.Slice(h.Nodes, func(i, j int) bool { return h.Nodes[i].Name < h.Nodes[j].Name })
	return h, nil
}
