package k8sprocess

import (
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"net"
	"slices"
	"strconv"
	"time"

	"github.com/corral/corral/internal/coe/certs"
	"github.com/corral/corral/internal/coe/driver"
	"github.com/corral/corral/internal/coe/kube"
	"github.com/corral/corral/internal/config"
	"github.com/corral/corral/internal/ecode"
	"github.com/corral/corral/internal/nodeapi"
)

// placeMasters is the placement key of the masters, in order: the first
// is the cluster's API address (and runs kwok).
const placeMasters = "masters"

// masterPlace is where one master of the cluster runs.
type masterPlace struct {
	Node       string `json:"node"` // the Corral node's uuid
	NodeName   string `json:"node_name"`
	Bind       string `json:"bind_address"`
	APIPort    int    `json:"apiserver_port"`
	EtcdClient int    `json:"etcd_client_port"`
	EtcdPeer   int    `json:"etcd_peer_port"`
}

// member is the master's etcd member name.
func memberName(i int) string { return "master-" + strconv.Itoa(i) }

func (m masterPlace) peerURL() string {
	return "https://" + net.JoinHostPort(m.Bind, strconv.Itoa(m.EtcdPeer))
}

func (m masterPlace) clientURL() string {
	return "https://" + net.JoinHostPort(m.Bind, strconv.Itoa(m.EtcdClient))
}

func (m masterPlace) apiURL() string {
	return "https://" + net.JoinHostPort(m.Bind, strconv.Itoa(m.APIPort))
}

// masterCount is the master group's node_count, which must be odd: etcd
// keeps working while a majority of its members does.
func masterCount(c *driver.Cluster) (int, error) {
	n := 1
	if g := c.MasterGroup(); g != nil {
		n = g.NodeCount
	}
	if n < 1 || n%2 == 0 {
		return 0, ecode.Errorf(ecode.Inval, "master_count must be odd (1, 3, 5, ...) for etcd's quorum, not %d", n)
	}
	return n, nil
}

// mastersOf reads the cluster's masters from its placement, whether they
// came from this process or from the store; a cluster placed before
// placements listed masters has its one master under the single keys.
func mastersOf(c *driver.Cluster) ([]masterPlace, error) {
	if raw, ok := c.Placement[placeMasters]; ok {
		b, err := json.Marshal(raw)
		if err != nil {
			return nil, fmt.Errorf("the masters of cluster %s do not encode: %w", c.UUID, err)
		}
		var out []masterPlace
		if err := json.Unmarshal(b, &out); err != nil {
			return nil, ecode.Errorf(ecode.State, "the masters of cluster %s in its placement do not decode: %v", c.UUID, err)
		}
		return out, nil
	}
	if uuid, _ := c.Placement[placeNode].(string); uuid != "" {
		name, _ := c.Placement[placeNodeName].(string)
		bind, _ := c.Placement[placeBind].(string)
		return []masterPlace{{Node: uuid, NodeName: name, Bind: bind, APIPort: int(c.PlaceInt(placeAPIPort)),
			EtcdClient: int(c.PlaceInt(placeEtcd)), EtcdPeer: int(c.PlaceInt(placeEtcdPeer))}}, nil
	}
	return nil, nil
}

// setMasters records the masters: the list, the first under the single
// keys, the addresses in the cluster and its master group.
func setMasters(c *driver.Cluster, ms []masterPlace) {
	c.SetPlace(placeMasters, ms)
	first := ms[0]
	c.SetPlace(placeNode, first.Node)
	c.SetPlace(placeNodeName, first.NodeName)
	c.SetPlace(placeBind, first.Bind)
	c.SetPlace(placeAPIPort, first.APIPort)
	c.SetPlace(placeEtcd, first.EtcdClient)
	c.SetPlace(placeEtcdPeer, first.EtcdPeer)
	c.APIAddress = first.apiURL()
	var addrs []string
	for _, m := range ms {
		addrs = append(addrs, m.Bind)
	}
	c.MasterAddresses = addrs
	if g := c.MasterGroup(); g != nil {
		g.NodeAddresses = append([]string(nil), addrs...)
	}
}

// chooseMasterNodes picks n different nodes of the candidates (sorted by
// name) for a cluster's masters: n in a row from where the cluster's uuid
// points, so that clusters spread over the nodes.
func chooseMasterNodes(cs []*config.Node, cluster, name string, n int) ([]*config.Node, error) {
	if len(cs) < n {
		return nil, ecode.Errorf(ecode.NoRes, "cluster %s needs %d masters on %d different nodes, but only %d nodes are online, undrained and vm_capable",
			name, n, n, len(cs))
	}
	h := fnv.New32a()
	h.Write([]byte(cluster))
	start := int(h.Sum32() % uint32(len(cs)))
	out := make([]*config.Node, 0, n)
	for i := 0; i < n; i++ {
		out = append(out, cs[(start+i)%len(cs)])
	}
	return out, nil
}

// etcdMembers are the masters as etcd's members, in order.
func etcdMembers(ms []masterPlace) []nodeapi.COEEtcdMember {
	out := make([]nodeapi.COEEtcdMember, 0, len(ms))
	for i, m := range ms {
		out = append(out, nodeapi.COEEtcdMember{Name: memberName(i), PeerURL: m.peerURL(), ClientURL: m.clientURL()})
	}
	return out
}

// mastersArgs is master i's part in a cluster of several (nil for a
// cluster of one, which runs as it always has).
func mastersArgs(ms []masterPlace, i int) *nodeapi.COEMasters {
	if len(ms) < 2 {
		return nil
	}
	return &nodeapi.COEMasters{Member: memberName(i), Members: etcdMembers(ms), Kwok: i == 0}
}

// masterNode is the online node of a master.
func masterNode(e driver.Env, c *driver.Cluster, m masterPlace) (*config.Node, error) {
	for _, n := range e.Nodes() {
		if n.UUID == m.Node {
			return n, nil
		}
	}
	return nil, ecode.Errorf(ecode.Environ, "node %s of cluster %s's control plane is offline or gone", m.NodeName, c.UUID)
}

// place chooses the masters' nodes (once: a placed cluster stays) and has
// each reserve its ports, which the node keeps for the cluster.
func (d *Driver) place(ctx context.Context, e driver.Env, c *driver.Cluster) error {
	n, err := masterCount(c)
	if err != nil {
		return err
	}
	placed, err := mastersOf(c)
	if err != nil {
		return err
	}
	var nodes []*config.Node
	switch {
	case len(placed) == n:
		for _, m := range placed {
			node, err := masterNode(e, c, m)
			if err != nil {
				return err
			}
			nodes = append(nodes, node)
		}
	case len(placed) != 0:
		return ecode.Errorf(ecode.Inval, "cluster %s runs %d masters: the %s driver does not change master_count to %d", c.Name, len(placed), Name, n)
	default:
		cs := candidates(e)
		if len(cs) == 0 {
			return ecode.Errorf(ecode.NoRes, "no node can run the control plane of cluster %s: none is online, undrained and vm_capable", c.Name)
		}
		if nodes, err = chooseMasterNodes(cs, c.UUID, c.Name, n); err != nil {
			return err
		}
	}
	ms := make([]masterPlace, 0, n)
	for _, node := range nodes {
		var ports nodeapi.COEControlPlanePorts
		if err := e.RPC(ctx, node, nodeapi.COEControlPlaneReserve, nodeapi.COEControlPlaneReserveArgs{
			Cluster: c.UUID, Name: c.Name, BindAddress: node.PrimaryIP}, &ports); err != nil {
			return fmt.Errorf("reserving the control plane's ports on %s: %w", node.Name, err)
		}
		ms = append(ms, masterPlace{Node: node.UUID, NodeName: node.Name, Bind: node.PrimaryIP,
			APIPort: ports.APIServer, EtcdClient: ports.EtcdClient, EtcdPeer: ports.EtcdPeer})
	}
	setMasters(c, ms)
	for i, m := range ms {
		e.Logf(ctx, "master %d of %s on %s, API server at %s", i, c.Name, m.NodeName, m.apiURL())
	}
	return nil
}

// rollMasters are an upgrade's steps for one batch of masters (by
// address): each is stopped and started again, then the step after
// waits until each answers /readyz before the next batch goes.
func (d *Driver) rollMasters(to driver.Params, group string, n int, batch []string) []driver.Step {
	suffix := group + "/" + strconv.Itoa(n)
	return []driver.Step{
		{Name: fmt.Sprintf("restart %s's masters %v", group, batch), Condition: "Upgraded/" + suffix,
			Run: func(ctx context.Context, e driver.Env, c *driver.Cluster) error {
				ms, err := mastersOf(c)
				if err != nil {
					return err
				}
				for i, m := range ms {
					if !slices.Contains(batch, m.Bind) {
						continue
					}
					node, err := masterNode(e, c, m)
					if err != nil {
						return err
					}
					if err := e.RPC(ctx, node, nodeapi.COEControlPlaneStop, nodeapi.COEControlPlaneStopArgs{Cluster: c.UUID}, nil); err != nil {
						return fmt.Errorf("stopping master %d on %s: %w", i, node.Name, err)
					}
				}
				// The start step starts what is stopped and leaves the
				// other masters running.
				if err := d.start(ctx, e, c); err != nil {
					return err
				}
				c.SetPlace(placeStartedAt, d.now().Unix())
				if g := c.Group(group); g != nil && to.KubeTag != "" {
					g.Version = to.KubeTag
				}
				return nil
			}},
		{Name: fmt.Sprintf("wait for %s's masters %v", group, batch), Condition: "UpgradeReady/" + suffix,
			Run: func(ctx context.Context, e driver.Env, c *driver.Cluster) error {
				ms, err := mastersOf(c)
				if err != nil {
					return err
				}
				var last error
				for _, m := range ms {
					if !slices.Contains(batch, m.Bind) {
						continue
					}
					if last = d.readyzAt(ctx, c, m.apiURL()); last != nil {
						break
					}
				}
				if last == nil {
					return nil
				}
				return d.parkOrFail(ctx, e, c, last)
			}},
	}
}

// readyzAt asks one master's API server for /readyz.
func (d *Driver) readyzAt(ctx context.Context, c *driver.Cluster, server string) error {
	ca, err := LoadCA(d.keys, c.CA)
	if err != nil {
		return err
	}
	kp, err := ca.Issue(certs.Request{CommonName: "corral-conductor", Organizations: []string{certs.MastersGroup},
		Usage: certs.ClientAuth, ValidFor: time.Hour})
	if err != nil {
		return err
	}
	cl, err := kube.New(server, ca.CertPEM(), kp.CertPEM, kp.KeyPEM)
	if err != nil {
		return err
	}
	defer cl.Close()
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	return cl.Readyz(rctx)
}
