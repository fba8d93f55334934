// Package driver is the interface between the COE units (package coe) and
// the drivers that build Kubernetes clusters, after Magnum's driver
// interface: a driver says what it provides (server type, os, coe), and
// for each lifecycle action returns the steps to run, which the units run
// as resumable job steps and record one condition each. A step must be
// safe to run again: a restarted master runs the step it was in again.
package driver

import (
	"context"
	"maps"
	"net/netip"
	"slices"
	"sort"
	"strconv"
	"time"

	"github.com/corral/corral/internal/confdb"
	"github.com/corral/corral/internal/config"
	"github.com/corral/corral/internal/ecode"
)

// Provision is what a driver provides: Magnum's (server_type, os, coe).
type Provision struct {
	ServerType string // vm, bm
	OS         string // the template's cluster_distro
	COE        string // kubernetes
}

// A Driver builds and changes Kubernetes clusters. Each action returns
// its steps from the plan-stable data it is given (never from state read
// at run time), so a resumed job gets the same list; the steps read and
// change the cluster they are run on.
type Driver interface {
	// Type is the driver's name, stored in templates and clusters.
	Type() string
	Provides() []Provision
	// CreateCluster builds the control plane: CA and certificates, API
	// endpoint, etcd, control plane (the master group). Worker groups are
	// built by CreateNodeGroup, as child jobs of the create.
	CreateCluster(p Params) []Step
	// UpdateCluster applies cluster-wide changes (labels).
	UpdateCluster(p Params) []Step
	// DeleteCluster removes everything the driver made for the cluster.
	DeleteCluster(p Params) []Step
	// UpgradeCluster rolls the planned batches to the target parameters.
	UpgradeCluster(p Params, to Params, plan UpgradePlan) []Step
	// CreateNodeGroup makes a group's nodes (its node_count).
	CreateNodeGroup(p Params, group string) []Step
	// UpdateNodeGroup brings a group to its node_count, removing the
	// named nodes first (and making new ones in their place if the
	// count says so).
	UpdateNodeGroup(p Params, group string, remove []string) []Step
	// DeleteNodeGroup removes a group's nodes.
	DeleteNodeGroup(p Params, group string) []Step
	// RotateCA replaces the cluster's CA, re-signs and restarts.
	RotateCA(p Params) []Step
	// Monitor reads a cluster's health.
	Monitor(c *Cluster) Monitor
	// ScaleManager chooses the nodes a shrinking group loses.
	ScaleManager(c *Cluster) ScaleManager
}

// Step is one resumable piece of a driver action. Condition names the
// condition the units record for it in the cluster's status (CamelCase).
type Step struct {
	Name      string
	Condition string
	Run       func(ctx context.Context, e Env, c *Cluster) error
}

// Env is what a driver step acts through.
type Env interface {
	// Nodes are the Corral nodes that can run a cluster's components.
	Nodes() []*config.Node
	// RPC calls a node daemon with an operation id unique to the call
	// within the job (the engine's StepCtx.RPC).
	RPC(ctx context.Context, node *config.Node, method string, args, reply any) error
	Logf(ctx context.Context, format string, args ...any)
	// Park ends the step to run it again from its start at until, with
	// no goroutine or lock held meanwhile (a master restart keeps the
	// wait): a step waiting for something outside returns Park's error
	// after checking, and must have changed nothing before it.
	Park(ctx context.Context, until time.Time) error
	// PodSubnet hands out a pod subnet for a kubelet worker (owner,
	// "<cluster uuid>/<kube node>") unique on the Corral node host among
	// every cluster's; the step records it in the cluster's PodSubnets,
	// which commit with it (confdb.FreeCOEPodSubnet).
	PodSubnet(host *config.Node, owner string) (netip.Prefix, error)
}

// Store is what an Env of the COE units also offers, for a driver whose
// steps act on other objects of the configuration (bare-metal machines)
// and through other units' jobs. A driver asserts it from its Env.
type Store interface {
	// Cfg is the configuration; a driver may commit transactions of
	// its own to it (conditional on what it read, so a concurrent change
	// fails the commit).
	Cfg() *confdb.DB
	// Submit adds a child job, created with the step's commit: a step
	// that parks must not have submitted anything.
	Submit(ops []map[string]any) error
}

// AnyOS in a Provision matches a template of any os: the driver serves
// every image that follows its contract. A driver naming the os exactly
// is chosen first.
const AnyOS = "*"

// Cluster is a COE cluster as a step sees it: copies of the stored
// objects, which the step may change (addresses, placement, nodes, CA);
// the unit stores them with the step.
type Cluster struct {
	*config.COECluster
	Template *config.COETemplate
	Groups   []*config.COENodeGroup
	// CA is the cluster's CA; a step that makes or rotates it sets it.
	CA *config.COECertificate
}

// SetPlace records a value of the cluster's placement.
func (c *Cluster) SetPlace(key string, v any) {
	if c.Placement == nil {
		c.Placement = map[string]any{}
	}
	c.Placement[key] = v
}

// PlaceInt reads a number of the placement, whether it came from this
// process (int, int64) or from the store (float64, or a decimal string);
// 0 when there is none.
func (c *Cluster) PlaceInt(key string) int64 {
	switch v := c.Placement[key].(type) {
	case int:
		return int64(v)
	case int64:
		return v
	case float64:
		return int64(v)
	case string:
		n, _ := strconv.ParseInt(v, 10, 64)
		return n
	}
	return 0
}

// Group is the cluster's node group of that name, nil if none.
func (c *Cluster) Group(name string) *config.COENodeGroup {
	for _, g := range c.Groups {
		if g.Name == name {
			return g
		}
	}
	return nil
}

// MasterGroup is the default master group (nil if none).
func (c *Cluster) MasterGroup() *config.COENodeGroup {
	for _, g := range c.Groups {
		if g.IsDefault && g.Role == config.COERoleMaster {
			return g
		}
	}
	return nil
}

// UpgradePlan says which nodes of which groups an upgrade replaces, in
// batches of at most max_batch_size.
type UpgradePlan struct {
	Groups []UpgradeGroup `json:"groups"`
}

// UpgradeGroup is one group's batches.
type UpgradeGroup struct {
	Name string `json:"name"`
	// Role is the group's; a master group's batches are its masters'
	// addresses (NodeAddresses), not kube nodes.
	Role    string     `json:"role,omitempty"`
	Batches [][]string `json:"batches"`
}

// KubeNode is a Kubernetes node as a monitor sees it.
type KubeNode struct {
	Name          string    `json:"name"`
	Ready         bool      `json:"ready"`
	Unschedulable bool      `json:"unschedulable"` // cordoned
	Pods          int       `json:"pods"`
	Since         time.Time `json:"since"` // last change of its Ready condition
}

// Health is what a monitor read.
type Health struct {
	// APIReady is whether the API server answered /readyz.
	APIReady bool
	Nodes    []KubeNode
	// PendingPods are the pods no node could take (Pending, unbound):
	// what the autoscaler adds nodes for.
	PendingPods int
}

// Monitor reads a cluster's health.
type Monitor interface {
	Check(ctx context.Context) (Health, error)
}

// ScaleManager chooses the nodes a group loses when it shrinks by n.
type ScaleManager interface {
	NodesToRemove(ctx context.Context, group *config.COENodeGroup, n int) ([]string, error)
}

// ChooseRemoval is Magnum's scale-down choice among a group's members:
// NotReady or cordoned nodes first, then those running the fewest pods,
// then by name so the choice is stable. Members the monitor does not see
// count as NotReady.
func ChooseRemoval(members []string, seen []KubeNode, n int) []string {
	byName := map[string]KubeNode{}
	for _, k := range seen {
		byName[k.Name] = k
	}
	type cand struct {
		name string
		bad  bool
		pods int
	}
	var cs []cand
	for _, m := range members {
		k, ok := byName[m]
		cs = append(cs, cand{name: m, bad: !ok || !k.Ready || k.Unschedulable, pods: k.Pods})
	}
	sort.SliceStable(cs, func(i, j int) bool {
		a, b := cs[i], cs[j]
		if a.bad != b.bad {
			return a.bad
		}
		if a.pods != b.pods {
			return a.pods < b.pods
		}
		return a.name < b.name
	})
	out := []string{}
	for i := 0; i < n && i < len(cs); i++ {
		out = append(out, cs[i].name)
	}
	return out
}

// MonitorScaleManager chooses with ChooseRemoval over what a monitor sees.
type MonitorScaleManager struct{ Monitor Monitor }

// NodesToRemove implements ScaleManager.
func (m MonitorScaleManager) NodesToRemove(ctx context.Context, g *config.COENodeGroup, n int) ([]string, error) {
	h, err := m.Monitor.Check(ctx)
	if err != nil {
		return nil, err
	}
	return ChooseRemoval(g.Nodes, h.Nodes, n), nil
}

// Registry holds the drivers and chooses one for a template.
type Registry struct {
	drivers map[string]Driver
}

// NewRegistry makes a registry of the drivers.
func NewRegistry(ds ...Driver) *Registry {
	r := &Registry{drivers: map[string]Driver{}}
	for _, d := range ds {
		r.drivers[d.Type()] = d
	}
	return r
}

// Get is the driver of that name.
func (r *Registry) Get(name string) (Driver, error) {
	if r != nil {
		if d, ok := r.drivers[name]; ok {
			return d, nil
		}
	}
	return nil, ecode.Errorf(ecode.Environ, "Cluster driver %q is not available in this corrald.", name)
}

// Choose is the driver providing (server_type, os, coe), as Magnum's
// driver lookup; the first by name when several do.
func (r *Registry) Choose(serverType, os, coe string) (Driver, error) {
	var names []string
	if r != nil {
		names = slices.Sorted(maps.Keys(r.drivers))
	}
	for _, want := range []string{os, AnyOS} {
		for _, n := range names {
			for _, p := range r.drivers[n].Provides() {
				if p.ServerType == serverType && p.OS == want && p.COE == coe {
					return r.drivers[n], nil
				}
			}
		}
	}
	return nil, ecode.Errorf(ecode.Inval, "Cluster type (%s, %s, %s) not supported.", serverType, os, coe)
}
