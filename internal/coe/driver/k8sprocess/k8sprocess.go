// Package k8sprocess is the COE driver that runs each cluster's control
// plane as real processes on a Corral node: etcd, kube-apiserver,
// kube-controller-manager, kube-scheduler and kwok, under a uid of the
// cluster's own, started and supervised by corral-node
// (internal/nodeserver/coe.go, internal/coe/controlplane). Worker nodes
// are kwok's simulated nodes: a node group is a set of Node objects named
// <cluster>-<group>-<n>. corrald keeps the cluster's CA, its key sealed
// with a key every master candidate derives from the Corral CA, issues
// the components' certificates at each start and talks to the API server
// with an administrator certificate of its own.
//
// Every step is safe to run again: the node keeps the ports it chose for
// a cluster and leaves running components running; kube objects that
// exist already are left as they are.
package k8sprocess

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/corral/corral/internal/coe/certs"
	"github.com/corral/corral/internal/coe/controlplane"
	"github.com/corral/corral/internal/coe/driver"
	"github.com/corral/corral/internal/coe/k8sbin"
	"github.com/corral/corral/internal/coe/kube"
	"github.com/corral/corral/internal/config"
	"github.com/corral/corral/internal/ecode"
	"github.com/corral/corral/internal/nodeapi"
	"github.com/corral/corral/internal/secret"
)

// Name is the driver's type.
const Name = "k8s_process"

// OS is the cluster_distro (or image) of the templates it serves.
const OS = "kwok"

// Keys seal and open the CAs' private keys for the store
// (certs.Sealer).
type Keys interface {
	Seal(cluster, name string, key secret.Secret) ([]byte, error)
	Open(cluster, name string, b []byte) (secret.Secret, error)
}

// caSlot is the sealing slot of a cluster's CA key; saSlot of its
// service account key.
const (
	caSlot = "ca"
	saSlot = "service-account"
)

// The keys of a cluster's placement (config.COECluster.Placement).
const (
	placeNode      = "node"      // the Corral node's uuid
	placeNodeName  = "node_name" // for an operator's eyes
	placeBind      = "bind_address"
	placeAPIPort   = "apiserver_port"
	placeEtcd      = "etcd_client_port"
	placeEtcdPeer  = "etcd_peer_port"
	placeStartedAt = "started_at" // unix seconds: when the wait for the API began
	placeSeqPrefix = "seq/"       // + group name: the last node number given
	// The service account key every master runs with: its public half
	// and its private half sealed (Keys, saSlot).
	placeSAPublic = "service_account_public"
	placeSASealed = "service_account_sealed"
)

// Labels the driver reads.
const (
	// LabelNodeMonitorGrace is how many seconds a kube node may miss its
	// heartbeats before the controller manager marks it NotReady.
	LabelNodeMonitorGrace = "node_monitor_grace_seconds"
)

// Driver is the k8s_process driver.
type Driver struct {
	keys Keys
	// Now is the clock (time.Now when nil); PollInterval how long a wait
	// for the API server parks between checks (2s when zero).
	Now          func() time.Time
	PollInterval time.Duration
	// TLSBootstrap starts control planes that let kubelets join with a
	// bootstrap token (controlplane.Spec.TLSBootstrap): the driver built
	// on this one for bare-metal workers sets it.
	TLSBootstrap bool

	mu      sync.Mutex
	clients map[string]cachedClient // by cluster uuid
}

type cachedClient struct {
	key    string // CA generation and server
	client *kube.Client
}

// New makes the driver; keys seal and open the clusters' CA keys.
func New(keys Keys) *Driver {
	return &Driver{keys: keys, clients: map[string]cachedClient{}}
}

// Type implements driver.Driver.
func (d *Driver) Type() string { return Name }

// Provides implements driver.Driver.
func (d *Driver) Provides() []driver.Provision {
	return []driver.Provision{{ServerType: "vm", OS: OS, COE: "kubernetes"}}
}

func (d *Driver) now() time.Time {
	if d.Now != nil {
		return d.Now()
	}
	return time.Now()
}

func (d *Driver) poll() time.Duration {
	if d.PollInterval > 0 {
		return d.PollInterval
	}
	return 2 * time.Second
}

// CreateCluster implements driver.Driver.
func (d *Driver) CreateCluster(p driver.Params) []driver.Step {
	return []driver.Step{
		{Name: "make the cluster's CA", Condition: "CertificatesReady", Run: func(ctx context.Context, e driver.Env, c *driver.Cluster) error {
			if c.CA == nil || len(c.CA.KeySealed) == 0 {
				if err := d.newCA(c); err != nil {
					return err
				}
			}
			if c.PlaceInt(placeStartedAt) == 0 {
				c.SetPlace(placeStartedAt, d.now().Unix())
			}
			return nil
		}},
		{Name: "place the control plane", Condition: "APIEndpointReady", Run: d.place},
		{Name: "start the control plane", Condition: "ControlPlaneReady", Run: d.start},
		{Name: "wait for the API server", Condition: "APIServerReady", Run: d.waitAPI},
	}
}

// newCA makes the cluster's next CA, its key sealed for the store.
func (d *Driver) newCA(c *driver.Cluster) error {
	ca, err := certs.NewCA(c.Name, "")
	if err != nil {
		return err
	}
	sealed, err := d.keys.Seal(c.UUID, caSlot, ca.KeyPEM())
	if err != nil {
		return err
	}
	next := &config.COECertificate{Cluster: c.UUID, CertPEM: string(ca.CertPEM()), KeySealed: sealed, Generation: 1}
	if c.CA != nil {
		// The stored object is replaced: its identity and serial stay.
		next.Meta, next.Generation = c.CA.Meta, c.CA.Generation+1
	}
	c.CA = next
	return d.newServiceAccountKey(c)
}

// newServiceAccountKey makes the cluster's next service account key, its
// private half sealed for the store.
func (d *Driver) newServiceAccountKey(c *driver.Cluster) error {
	sa, err := certs.NewServiceAccountKey()
	if err != nil {
		return err
	}
	sealed, err := d.keys.Seal(c.UUID, saSlot, sa.PrivatePEM)
	if err != nil {
		return err
	}
	c.SetPlace(placeSAPublic, string(sa.PublicPEM))
	c.SetPlace(placeSASealed, string(sealed))
	return nil
}

// serviceAccountKey is the cluster's service account key; false for a
// cluster made before its key was kept.
func (d *Driver) serviceAccountKey(c *driver.Cluster) (certs.ServiceAccountKey, bool, error) {
	pub, _ := c.Placement[placeSAPublic].(string)
	sealed, _ := c.Placement[placeSASealed].(string)
	if pub == "" || sealed == "" {
		return certs.ServiceAccountKey{}, false, nil
	}
	priv, err := d.keys.Open(c.UUID, saSlot, []byte(sealed))
	if err != nil {
		return certs.ServiceAccountKey{}, false, err
	}
	return certs.ServiceAccountKey{PublicPEM: []byte(pub), PrivatePEM: priv}, true, nil
}

// LoadCA is a cluster's CA with its key, opened with keys.
func LoadCA(keys Keys, ca *config.COECertificate) (*certs.CA, error) {
	if ca == nil || len(ca.KeySealed) == 0 {
		return nil, ecode.Errorf(ecode.State, "the cluster has no CA key in the store")
	}
	key, err := keys.Open(ca.Cluster, caSlot, ca.KeySealed)
	if err != nil {
		return nil, err
	}
	return certs.LoadCA([]byte(ca.CertPEM), key)
}

// candidates are the nodes a control plane may go to: online (Env.Nodes),
// not drained, able to run workloads; sorted by name.
func candidates(e driver.Env) []*config.Node {
	var out []*config.Node
	for _, n := range e.Nodes() {
		if !n.Drained && n.VMCapable && n.PrimaryIP != "" {
			out = append(out, n)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// placedNode is the node a cluster was placed on (its first master).
func placedNode(e driver.Env, c *driver.Cluster) (*config.Node, error) {
	uuid, _ := c.Placement[placeNode].(string)
	for _, n := range e.Nodes() {
		if n.UUID == uuid {
			return n, nil
		}
	}
	if uuid == "" {
		return nil, ecode.ExecErrorf("cluster %s has no control plane node yet", c.UUID)
	}
	return nil, ecode.Errorf(ecode.Environ, "node %v of cluster %s's control plane is offline or gone", c.Placement[placeNodeName], c.UUID)
}

// start issues the components' certificates with the cluster's CA and has
// the node start them (a node running them with this CA leaves them be; a
// new CA restarts them).
func (d *Driver) start(ctx context.Context, e driver.Env, c *driver.Cluster) error {
	ms, err := mastersOf(c)
	if err != nil {
		return err
	}
	if len(ms) == 0 {
		return ecode.ExecErrorf("cluster %s has no control plane node yet", c.UUID)
	}
	nodes := make([]*config.Node, 0, len(ms))
	var ips []net.IP
	for _, m := range ms {
		node, err := masterNode(e, c, m)
		if err != nil {
			return err
		}
		nodes = append(nodes, node)
		ips = append(ips, net.ParseIP(node.PrimaryIP))
	}
	ca, err := LoadCA(d.keys, c.CA)
	if err != nil {
		return err
	}
	b, err := certs.IssueBundle(ca, certs.BundleSpec{ClusterName: c.Name, APIAddresses: ips, EtcdAddresses: ips})
	if err != nil {
		return err
	}
	// Every master signs and checks service account tokens with the
	// cluster's one key, the same at every start.
	sa, ok, err := d.serviceAccountKey(c)
	if err != nil {
		return err
	}
	if ok {
		b.ServiceAccount = sa
	} else if len(ms) > 1 {
		return ecode.Errorf(ecode.State, "cluster %s has no service account key in its placement", c.Name)
	}
	grace, _ := strconv.Atoi(c.Labels[LabelNodeMonitorGrace])
	if t := c.Template; t != nil && grace == 0 {
		grace, _ = strconv.Atoi(t.Labels[LabelNodeMonitorGrace])
	}
	wire := controlplane.WireBundle(b)
	if d.TLSBootstrap {
		wire.CAKey = ca.KeyPEM().Reveal()
	}
	for i, node := range nodes {
		var st nodeapi.COEControlPlaneStatusReply
		if err := e.RPC(ctx, node, nodeapi.COEControlPlaneStart, nodeapi.COEControlPlaneStartArgs{
			Cluster: c.UUID, Name: c.Name, BindAddress: node.PrimaryIP, NodeMonitorGraceSeconds: max(grace, 0),
			Certs: wire, Masters: mastersArgs(ms, i), TLSBootstrap: d.TLSBootstrap}, &st); err != nil {
			return fmt.Errorf("starting the control plane on %s: %w", node.Name, err)
		}
	}
	c.COEVersion = kubeVersion(c)
	return nil
}

// kubeVersion is the Kubernetes version the cluster runs: the pinned one
// (kube_tag names what the nodes report).
func kubeVersion(c *driver.Cluster) string {
	if v := c.Labels["kube_tag"]; v != "" {
		return v
	}
	return k8sbin.KubernetesVersion
}

// waitAPI parks until the API server answers /readyz; past the cluster's
// create_timeout (from the start of the wait) it fails saying why.
func (d *Driver) waitAPI(ctx context.Context, e driver.Env, c *driver.Cluster) error {
	cl, err := d.client(c)
	if err != nil {
		return err
	}
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	err = cl.Readyz(rctx)
	cancel()
	if err == nil {
		return nil
	}
	return d.parkOrFail(ctx, e, c, err)
}

// parkOrFail parks a wait for the API server until the next poll; past
// the cluster's create_timeout (from the start of the wait) it fails
// with why.
func (d *Driver) parkOrFail(ctx context.Context, e driver.Env, c *driver.Cluster, err error) error {
	timeout := time.Duration(c.CreateTimeout) * time.Minute
	if timeout <= 0 {
		timeout = time.Hour
	}
	deadline := time.Unix(c.PlaceInt(placeStartedAt), 0).Add(timeout)
	if !d.now().Before(deadline) {
		return ecode.ExecErrorf("the API server at %s was not ready within the create_timeout of %v: %w", c.APIAddress, timeout, err)
	}
	next := d.now().Add(d.poll())
	if next.After(deadline) {
		next = deadline
	}
	return e.Park(ctx, next)
}

// Client is an administrator's client of the cluster's API server, for
// drivers built on this one.
func (d *Driver) Client(c *driver.Cluster) (*kube.Client, error) { return d.client(c) }

// Forget closes and drops the cached client of a deleted cluster.
func (d *Driver) Forget(uuid string) { d.forget(uuid) }

// client is an administrator's client of the cluster's API server, with a
// certificate corrald issues itself from the cluster's CA; kept per CA
// generation.
func (d *Driver) client(c *driver.Cluster) (*kube.Client, error) {
	if c.CA == nil || c.APIAddress == "" {
		return nil, ecode.Errorf(ecode.State, "cluster %s has no API server yet", c.UUID)
	}
	key := strconv.Itoa(c.CA.Generation) + " " + c.CA.CertPEM + " " + c.APIAddress
	d.mu.Lock()
	cached, ok := d.clients[c.UUID]
	d.mu.Unlock()
	if ok && cached.key == key {
		return cached.client, nil
	}
	ca, err := LoadCA(d.keys, c.CA)
	if err != nil {
		return nil, err
	}
	kp, err := ca.Issue(certs.Request{CommonName: "corral-conductor", Organizations: []string{certs.MastersGroup},
		Usage: certs.ClientAuth, ValidFor: 30 * 24 * time.Hour})
	if err != nil {
		return nil, err
	}
	cl, err := kube.New(c.APIAddress, ca.CertPEM(), kp.CertPEM, kp.KeyPEM)
	if err != nil {
		return nil, err
	}
	d.mu.Lock()
	if old, ok := d.clients[c.UUID]; ok {
		old.client.Close()
	}
	d.clients[c.UUID] = cachedClient{key: key, client: cl}
	d.mu.Unlock()
	return cl, nil
}

func (d *Driver) forget(uuid string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if old, ok := d.clients[uuid]; ok {
		old.client.Close()
		delete(d.clients, uuid)
	}
}

// UpdateCluster implements driver.Driver: labels change nothing the
// control plane runs with until its next start.
func (d *Driver) UpdateCluster(p driver.Params) []driver.Step {
	return []driver.Step{{Name: "apply the cluster's settings", Condition: "ClusterUpdated",
		Run: func(ctx context.Context, e driver.Env, c *driver.Cluster) error { return nil }}}
}

// DeleteCluster implements driver.Driver: every node stops and purges
// whatever it runs or keeps of the cluster: its kubelets with their pods,
// then the control plane (kwok's nodes go with its etcd).
func (d *Driver) DeleteCluster(p driver.Params) []driver.Step {
	return []driver.Step{{Name: "stop and remove the control plane", Condition: "ControlPlaneStopped",
		Run: func(ctx context.Context, e driver.Env, c *driver.Cluster) error {
			d.forget(c.UUID)
			var errs []error
			for _, n := range e.Nodes() {
				if err := e.RPC(ctx, n, nodeapi.COEKubeletStop, nodeapi.COEKubeletStopArgs{Cluster: c.UUID, Purge: true}, nil); err != nil {
					errs = append(errs, fmt.Errorf("removing the kubelets from %s: %w", n.Name, err))
				}
				if err := e.RPC(ctx, n, nodeapi.COEControlPlaneStop, nodeapi.COEControlPlaneStopArgs{Cluster: c.UUID, Purge: true}, nil); err != nil {
					errs = append(errs, fmt.Errorf("removing the control plane from %s: %w", n.Name, err))
				}
			}
			// A master whose node is offline kept what it ran: the
			// delete fails until that node is back (or removed).
			ms, err := mastersOf(c)
			if err != nil {
				errs = append(errs, err)
			}
			for _, m := range ms {
				if _, err := masterNode(e, c, m); err != nil {
					errs = append(errs, err)
				}
			}
			for _, g := range c.Groups {
				for _, n := range g.Nodes {
					delete(c.Placement, placeKubeletPrefix+n)
					dropPodSubnet(c, n)
				}
				g.Nodes, g.NodeAddresses = nil, nil
			}
			return errors.Join(errs...)
		}}}
}

// RotateCA implements driver.Driver: a new CA, every certificate issued
// again with it and the components restarted; clients of the old CA are
// refused from then on.
func (d *Driver) RotateCA(p driver.Params) []driver.Step {
	return []driver.Step{
		{Name: "make a new CA", Condition: "CertificatesReady", Run: func(ctx context.Context, e driver.Env, c *driver.Cluster) error {
			c.SetPlace(placeStartedAt, d.now().Unix())
			return d.newCA(c)
		}},
		{Name: "restart the control plane with the new CA", Condition: "ControlPlaneReady", Run: d.start},
		{Name: "wait for the API server", Condition: "APIServerReady", Run: d.waitAPI},
	}
}

// Monitor implements driver.Driver.
func (d *Driver) Monitor(c *driver.Cluster) driver.Monitor { return monitor{d: d, c: c} }

// ScaleManager implements driver.Driver.
func (d *Driver) ScaleManager(c *driver.Cluster) driver.ScaleManager {
	return driver.MonitorScaleManager{Monitor: d.Monitor(c)}
}

type monitor struct {
	d *Driver
	c *driver.Cluster
}

// Check reads /readyz, the nodes and their pods; an API server that does
// not answer is a health without APIReady, not an error.
func (m monitor) Check(ctx context.Context) (driver.Health, error) {
	if m.c.CA == nil || m.c.APIAddress == "" {
		return driver.Health{}, nil
	}
	cl, err := m.d.client(m.c)
	if err != nil {
		return driver.Health{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	if err := cl.Readyz(ctx); err != nil {
		return driver.Health{}, nil
	}
	nodes, err := cl.ListNodes(ctx, "")
	if err != nil {
		return driver.Health{APIReady: true}, err
	}
	pods, err := cl.CountPodsByNode(ctx)
	if err != nil {
		return driver.Health{APIReady: true}, err
	}
	h := driver.Health{APIReady: true}
	if h.PendingPods, err = cl.CountUnscheduledPods(ctx); err != nil {
		return h, err
	}
	for _, n := range nodes {
		h.Nodes = append(h.Nodes, driver.KubeNode{Name: n.Name, Ready: n.Ready == kube.ConditionTrue,
			Unschedulable: n.Unschedulable, Pods: pods[n.Name], Since: n.ReadySince})
	}
	slices.SortFunc(h.Nodes, func(a, b driver.KubeNode) int {
		if a.Name < b.Name {
			return -1
		}
		if a.Name > b.Name {
			return 1
		}
		return 0
	})
	return h, nil
}
