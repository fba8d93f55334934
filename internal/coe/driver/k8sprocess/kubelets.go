package k8sprocess

import (
	"context"
	"fmt"
	"hash/fnv"
	"net"
	"slices"
	"strings"
	"time"

	"github.com/corral/corral/internal/coe/driver"
	"github.com/corral/corral/internal/coe/kube"
	"github.com/corral/corral/internal/config"
	"github.com/corral/corral/internal/ecode"
	"github.com/corral/corral/internal/nodeapi"
)

// LabelWorkerKind chooses how a node group's kube nodes run: a node
// group's label, else the cluster's (over the template's).
const LabelWorkerKind = "worker_kind"

// Worker kinds.
const (
	// WorkersKwok are Node objects kwok simulates (the default).
	WorkersKwok = "kwok"
	// WorkersKubelet are real kubelets with containerd and runc on
	// Corral nodes, running real pods (a smoke tier: images come only
	// from the node, see controlplane.BusyboxImage).
	WorkersKubelet = "kubelet"
)

// Placement keys of kubelet workers.
const (
	placeKubeletPrefix     = "kubelet/"      // + kube node: the Corral node's uuid
	placeKubeletWaitPrefix = "kubelet_wait/" // + group: unix seconds, when its kubelets were started
)

// kubeletReadyTimeout bounds the wait for a group's kubelets when the
// cluster has no create_timeout.
const kubeletReadyTimeout = 10 * time.Minute

// workerKind is how the group's kube nodes run.
func workerKind(p driver.Params, g *config.COENodeGroup) (string, error) {
	kind := g.Labels[LabelWorkerKind]
	if kind == "" {
		kind = p.Workers
	}
	switch kind {
	case "", WorkersKwok:
		return WorkersKwok, nil
	case WorkersKubelet:
		return WorkersKubelet, nil
	}
	return "", ecode.Errorf(ecode.Inval, "node group %s: %s %q is neither %s nor %s", g.Name, LabelWorkerKind, kind, WorkersKwok, WorkersKubelet)
}

// kubeletHost is the Corral node a kube node runs on: the one it was
// placed on, or (placing it) one of the candidates its name chooses.
func kubeletHost(e driver.Env, c *driver.Cluster, node string) (*config.Node, error) {
	if uuid, ok := c.Placement[placeKubeletPrefix+node].(string); ok {
		for _, n := range e.Nodes() {
			if n.UUID == uuid {
				return n, nil
			}
		}
		return nil, ecode.Errorf(ecode.Environ, "the Corral node of kube node %s is offline or gone", node)
	}
	cs := candidates(e)
	if len(cs) == 0 {
		return nil, ecode.Errorf(ecode.NoRes, "no node can run kube node %s: none is online, undrained and vm_capable", node)
	}
	h := fnv.New32a()
	h.Write([]byte(c.UUID + "/" + node))
	n := cs[int(h.Sum32()%uint32(len(cs)))]
	c.SetPlace(placeKubeletPrefix+node, n.UUID)
	return n, nil
}

// startKubelets has each of the group's kube nodes run by its Corral
// node, with certificates of the cluster's CA; a node already running
// one with this CA leaves it be.
func (d *Driver) startKubelets(ctx context.Context, e driver.Env, c *driver.Cluster, g *config.COENodeGroup) error {
	var addrs []string
	for _, n := range g.Nodes {
		host, err := d.startKubelet(ctx, e, c, g, n)
		if err != nil {
			return err
		}
		if !slices.Contains(addrs, host.PrimaryIP) {
			addrs = append(addrs, host.PrimaryIP)
		}
	}
	g.NodeAddresses = addrs
	c.SetPlace(placeKubeletWaitPrefix+g.Name, d.now().Unix())
	return nil
}

func (d *Driver) startKubelet(ctx context.Context, e driver.Env, c *driver.Cluster, g *config.COENodeGroup, node string) (*config.Node, error) {
	host, err := kubeletHost(e, c, node)
	if err != nil {
		return nil, err
	}
	ca, err := LoadCA(d.keys, c.CA)
	if err != nil {
		return nil, err
	}
	client, err := ca.IssueNode(node)
	if err != nil {
		return nil, err
	}
	serving, err := ca.IssueKubeletServing(node, []net.IP{net.ParseIP(host.PrimaryIP)})
	if err != nil {
		return nil, err
	}
	subnet, err := podSubnet(e, c, host, node)
	if err != nil {
		return nil, err
	}
	args := nodeapi.COEKubeletStartArgs{Cluster: c.UUID, ClusterName: c.Name, Node: node, Server: c.APIAddress,
		BindAddress: host.PrimaryIP, Labels: map[string]string{LabelNodeGroup: g.Name, LabelNodeGroupRole: g.Role},
		CACert:    string(ca.CertPEM()),
		Client:    nodeapi.COEKeyPair{Cert: string(client.CertPEM), Key: client.KeyPEM.Reveal()},
		Serving:   nodeapi.COEKeyPair{Cert: string(serving.CertPEM), Key: serving.KeyPEM.Reveal()},
		PodSubnet: subnet}
	var st nodeapi.COEKubeletStatusReply
	if err := e.RPC(ctx, host, nodeapi.COEKubeletStart, args, &st); err != nil {
		return nil, fmt.Errorf("starting the kubelet of %s on %s: %w", node, host.Name, err)
	}
	e.Logf(ctx, "kubelet of %s on %s, port %d, pods in %s", node, host.Name, st.Port, st.PodSubnet)
	return host, nil
}

// removeKubelet has the Corral node of a kube node stop it and remove
// everything of it; a kube node that is no kubelet's is left alone.
func (d *Driver) removeKubelet(ctx context.Context, e driver.Env, c *driver.Cluster, node string) error {
	if _, placed := c.Placement[placeKubeletPrefix+node]; !placed {
		return nil
	}
	host, err := kubeletHost(e, c, node)
	if err != nil {
		return err
	}
	if err := e.RPC(ctx, host, nodeapi.COEKubeletStop, nodeapi.COEKubeletStopArgs{Cluster: c.UUID, Node: node, Purge: true}, nil); err != nil {
		return fmt.Errorf("removing the kubelet of %s from %s: %w", node, host.Name, err)
	}
	delete(c.Placement, placeKubeletPrefix+node)
	dropPodSubnet(c, node)
	return nil
}

// podSubnet is the kube node's pod subnet on host: the one the cluster
// records, or (recording it) one corrald hands out.
func podSubnet(e driver.Env, c *driver.Cluster, host *config.Node, node string) (string, error) {
	for _, ps := range c.PodSubnets {
		if ps.Node == node && ps.Host == host.UUID {
			return ps.Subnet, nil
		}
	}
	p, err := e.PodSubnet(host, c.UUID+"/"+node)
	if err != nil {
		return "", err
	}
	dropPodSubnet(c, node)
	c.PodSubnets = append(c.PodSubnets, config.COEPodSubnet{Node: node, Host: host.UUID, Subnet: p.String()})
	return p.String(), nil
}

// dropPodSubnet forgets the kube node's pod subnet.
func dropPodSubnet(c *driver.Cluster, node string) {
	c.PodSubnets = slices.DeleteFunc(c.PodSubnets, func(ps config.COEPodSubnet) bool { return ps.Node == node })
}

// restartKubelets stops and starts the named kubelets of the group.
func (d *Driver) restartKubelets(ctx context.Context, e driver.Env, c *driver.Cluster, g *config.COENodeGroup, nodes []string) error {
	for _, n := range nodes {
		if !slices.Contains(g.Nodes, n) {
			continue
		}
		host, err := kubeletHost(e, c, n)
		if err != nil {
			return err
		}
		if err := e.RPC(ctx, host, nodeapi.COEKubeletStop, nodeapi.COEKubeletStopArgs{Cluster: c.UUID, Node: n}, nil); err != nil {
			return fmt.Errorf("stopping the kubelet of %s on %s: %w", n, host.Name, err)
		}
		if _, err := d.startKubelet(ctx, e, c, g, n); err != nil {
			return err
		}
	}
	return nil
}

// waitKubelets parks until every kube node of the group has registered
// and is Ready. A kubelet on a loopback address reports no address, so
// each registered node gets its Corral node's address as its InternalIP.
func (d *Driver) waitKubelets(ctx context.Context, e driver.Env, c *driver.Cluster, g *config.COENodeGroup) error {
	cl, err := d.client(c)
	if err != nil {
		return err
	}
	var waiting []string
	for _, n := range g.Nodes {
		kn, err := cl.GetNode(ctx, n)
		if ecode.ClassOf(err) == ecode.NoEnt {
			waiting = append(waiting, n+" (not registered)")
			continue
		}
		if err != nil {
			return fmt.Errorf("reading kube node %s: %w", n, err)
		}
		host, err := kubeletHost(e, c, n)
		if err != nil {
			return err
		}
		if kn.Addresses["InternalIP"] != host.PrimaryIP {
			if err := cl.SetNodeInternalIP(ctx, n, host.PrimaryIP); err != nil {
				return fmt.Errorf("setting the address of kube node %s: %w", n, err)
			}
		}
		if kn.Ready != kube.ConditionTrue {
			waiting = append(waiting, n+" (not Ready)")
		}
	}
	if len(waiting) == 0 {
		return nil
	}
	timeout := time.Duration(c.CreateTimeout) * time.Minute
	if timeout <= 0 {
		timeout = kubeletReadyTimeout
	}
	deadline := time.Unix(c.PlaceInt(placeKubeletWaitPrefix+g.Name), 0).Add(timeout)
	if !d.now().Before(deadline) {
		return ecode.ExecErrorf("kube nodes of %s were not Ready within %v: %s (the kubelet and containerd logs are in the "+
			"workers' directories on their Corral nodes)", g.Name, timeout, strings.Join(waiting, ", "))
	}
	next := d.now().Add(d.poll())
	if next.After(deadline) {
		next = deadline
	}
	return e.Park(ctx, next)
}
