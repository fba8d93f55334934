package nodeserver

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"time"

	"github.com/corral/corral/internal/atomicfile"
	"github.com/corral/corral/internal/coe/certs"
	"github.com/corral/corral/internal/coe/controlplane"
	"github.com/corral/corral/internal/ecode"
	"github.com/corral/corral/internal/nodeapi"
	"github.com/corral/corral/internal/secret"
)

// Kubelet workers: a node group of worker_kind kubelet has real kube
// nodes, each a kubelet and a containerd that this daemon runs as root
// under the same supervisor as the control planes. Each has a record,
// <dir>/kubelets/<cluster>/<node>.json (its port, chosen once, and the
// pod subnet corrald handed out, unique on this node), a directory <dir>/workers/<id> and a socket directory
// controlplane.WorkerSocketRoot/<id>, id being controlplane.WorkerID.

// kubeletImportWait bounds the wait for a new containerd to answer.
const kubeletImportWait = 30 * time.Second

// kubeletRecord is what the node keeps of a kube node.
type kubeletRecord struct {
	Cluster     string            `json:"cluster"`
	ClusterName string            `json:"cluster_name"`
	Node        string            `json:"node"`
	Server      string            `json:"server"`
	BindAddress string            `json:"bind_address"`
	Port        int               `json:"port"`
	PodSubnet   string            `json:"pod_subnet"`
	Labels      map[string]string `json:"labels,omitempty"`
	// CA is the SHA-256 of the CA certificate the kubelet last started
	// with; "" until the first start and once stopped.
	CA string `json:"ca,omitempty"`
}

func (c *coePlanes) kubeletRecordPath(cluster, node string) string {
	return filepath.Join(c.dir, "kubelets", cluster, node+".json")
}

// kubeletRecords are the records of a cluster's kube nodes ("" for every
// cluster's).
func (c *coePlanes) kubeletRecords(cluster string) ([]*kubeletRecord, error) {
	pattern := filepath.Join(c.dir, "kubelets", "*", "*.json")
	if cluster != "" {
		pattern = filepath.Join(c.dir, "kubelets", cluster, "*.json")
	}
	paths, _ := filepath.Glob(pattern)
	var out []*kubeletRecord
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			return nil, fmt.Errorf("reading the kubelet record %s: %w", p, err)
		}
		var r kubeletRecord
		if err := json.Unmarshal(b, &r); err != nil {
			return nil, fmt.Errorf("the kubelet record %s does not decode: %w", p, err)
		}
		out = append(out, &r)
	}
	return out, nil
}

func (c *coePlanes) kubeletRecord(cluster, node string) (*kubeletRecord, error) {
	rs, err := c.kubeletRecords(cluster)
	if err != nil {
		return nil, err
	}
	for _, r := range rs {
		if r.Node == node {
			return r, nil
		}
	}
	return nil, nil
}

func (c *coePlanes) saveKubelet(r *kubeletRecord) error {
	b, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("encoding the record of kube node %s: %w", r.Node, err)
	}
	p := c.kubeletRecordPath(r.Cluster, r.Node)
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		return fmt.Errorf("the records of kube nodes: %w", err)
	}
	if err := atomicfile.WriteFile(p, b, 0o600); err != nil {
		return fmt.Errorf("writing the record of kube node %s: %w", r.Node, err)
	}
	return nil
}

// workerSpec is a record's worker (without certificates: enough to adopt
// or stop it).
func (c *coePlanes) workerSpec(r *kubeletRecord) controlplane.WorkerSpec {
	id := controlplane.WorkerID(r.Cluster, r.Node)
	addr, _ := netip.ParseAddr(r.BindAddress)
	subnet, _ := netip.ParsePrefix(r.PodSubnet)
	return controlplane.WorkerSpec{ClusterUUID: r.Cluster, ClusterName: r.ClusterName, NodeName: r.Node,
		Dir: filepath.Join(c.dir, "workers", id), SocketDir: filepath.Join(controlplane.WorkerSocketRoot, id),
		Server: r.Server, BindAddress: addr, KubeletPort: r.Port, PodSubnet: subnet, Labels: r.Labels,
		Tools: c.kubeletTools, Host: c.workerHost}
}

// adoptKubelets supervises again every kube node that was started here.
func (c *coePlanes) adoptKubelets() {
	rs, err := c.kubeletRecords("")
	if err != nil {
		c.log.Error("reading the kubelet records", "err", err)
		return
	}
	for _, r := range rs {
		if r.CA == "" {
			continue
		}
		if c.kubeletErr != nil {
			c.log.Error("cannot supervise a kubelet", "cluster", r.Cluster, "node", r.Node, "err", c.kubeletErr)
			continue
		}
		cp, err := controlplane.NewWorker(c.workerSpec(r))
		if err == nil {
			err = c.sup.Start(cp)
		}
		if err != nil {
			c.log.Error("supervising a kubelet again", "cluster", r.Cluster, "node", r.Node, "err", err)
		}
	}
}

// checkPodSubnet checks the pod subnet corrald handed out: an IPv4
// prefix holding none of the host's addresses.
func checkPodSubnet(s string) (netip.Prefix, error) {
	p, err := netip.ParsePrefix(s)
	if err != nil || !p.Addr().Is4() || p.Bits() > 28 {
		return netip.Prefix{}, ecode.Errorf(ecode.Inval, "pod subnet %q is not an IPv4 prefix of /28 or wider", s)
	}
	p = p.Masked()
	if addrs, err := net.InterfaceAddrs(); err == nil {
		for _, a := range addrs {
			if ip, err := netip.ParsePrefix(a.String()); err == nil && p.Contains(ip.Addr()) {
				return netip.Prefix{}, ecode.Errorf(ecode.State, "pod subnet %s holds the node's address %s", p, ip.Addr())
			}
		}
	}
	return p, nil
}

// reserveKubelet makes the record of a new kube node: its port and the
// pod subnet corrald chose.
func (c *coePlanes) reserveKubelet(a nodeapi.COEKubeletStartArgs, addr netip.Addr, subnet netip.Prefix) (*kubeletRecord, error) {
	held, err := c.heldPorts()
	if err != nil {
		return nil, err
	}
	ports, err := freePorts(addr, 1, held)
	if err != nil {
		return nil, err
	}
	r := &kubeletRecord{Cluster: a.Cluster, ClusterName: a.ClusterName, Node: a.Node, BindAddress: addr.String(),
		Port: ports[0], PodSubnet: subnet.String()}
	return r, c.saveKubelet(r)
}

func (s *Server) coeKubeletStart(ctx context.Context, a nodeapi.COEKubeletStartArgs) (any, error) {
	c := s.coe
	if c.kubeletErr != nil {
		return nil, c.kubeletErr
	}
	if !coeClusterRE.MatchString(a.Cluster) {
		return nil, ecode.Errorf(ecode.Inval, "COE cluster %q is not a plain name", a.Cluster)
	}
	addr, err := netip.ParseAddr(a.BindAddress)
	if err != nil {
		return nil, ecode.Errorf(ecode.Inval, "bind address %q: %w", a.BindAddress, err)
	}
	subnet, err := checkPodSubnet(a.PodSubnet)
	if err != nil {
		return nil, err
	}
	ca, err := certs.TrustAnchor([]byte(a.CACert))
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(ca.CertPEM())
	caSum := hex.EncodeToString(sum[:])
	c.mu.Lock()
	defer c.mu.Unlock()
	r, err := c.kubeletRecord(a.Cluster, a.Node)
	if err != nil {
		return nil, err
	}
	if r == nil {
		if r, err = c.reserveKubelet(a, addr, subnet); err != nil {
			return nil, err
		}
	} else if r.BindAddress != addr.String() {
		return nil, ecode.Errorf(ecode.State, "kube node %s runs on %s here, not %s", a.Node, r.BindAddress, addr)
	}
	id := a.Cluster + "/" + a.Node
	_, supErr := c.sup.Status(id)
	same := r.CA == caSum && r.Server == a.Server && r.ClusterName == a.ClusterName && maps.Equal(r.Labels, a.Labels) &&
		r.PodSubnet == subnet.String()
	if supErr == nil && same {
		return c.kubeletStatus(r), nil
	}
	if r.CA != "" {
		// Running with another CA or settings: stop, rewrite, start.
		old, err := controlplane.NewWorker(c.workerSpec(r))
		if err != nil {
			return nil, err
		}
		if err := c.sup.Stop(old, false); err != nil {
			return nil, err
		}
	}
	r.ClusterName, r.Server, r.Labels, r.PodSubnet = a.ClusterName, a.Server, a.Labels, subnet.String()
	spec := c.workerSpec(r)
	spec.CACert = ca.CertPEM()
	spec.Client = certs.KeyPair{CertPEM: []byte(a.Client.Cert), KeyPEM: secret.Secret(a.Client.Key)}
	spec.Serving = certs.KeyPair{CertPEM: []byte(a.Serving.Cert), KeyPEM: secret.Secret(a.Serving.Key)}
	cp, err := controlplane.NewWorker(spec)
	if err != nil {
		return nil, err
	}
	if err := c.saveKubelet(r); err != nil {
		return nil, err
	}
	if err := cp.WriteWorkerFiles(); err != nil {
		return nil, err
	}
	if err := c.sup.Start(cp); err != nil {
		return nil, err
	}
	r.CA = caSum
	if err := c.saveKubelet(r); err != nil {
		return nil, err
	}
	if err := cp.ImportImages(ctx, kubeletImportWait); err != nil {
		return nil, err
	}
	c.log.Info("kubelet started", "cluster", a.Cluster, "node", a.Node, "port", r.Port, "pod_subnet", r.PodSubnet)
	return c.kubeletStatus(r), nil
}

func (c *coePlanes) kubeletStatus(r *kubeletRecord) nodeapi.COEKubeletStatusReply {
	out := nodeapi.COEKubeletStatusReply{Port: r.Port, PodSubnet: r.PodSubnet, Components: []nodeapi.COEComponentStatus{}}
	sts, err := c.sup.Status(r.Cluster + "/" + r.Node)
	if err != nil {
		return out
	}
	for _, st := range sts {
		out.Components = append(out.Components, nodeapi.COEComponentStatus{Name: st.Name, PID: st.PID, Running: st.Running,
			Restarts: st.Restarts, LastExit: st.LastExit})
	}
	return out
}

// coeKubeletStop stops kube nodes; with purge nothing of them stays: no
// process, pod, mount, cgroup, link, file or record.
func (s *Server) coeKubeletStop(ctx context.Context, a nodeapi.COEKubeletStopArgs) (any, error) {
	c := s.coe
	if !coeClusterRE.MatchString(a.Cluster) {
		return nil, ecode.Errorf(ecode.Inval, "COE cluster %q is not a plain name", a.Cluster)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	rs, err := c.kubeletRecords(a.Cluster)
	if err != nil {
		return nil, err
	}
	var errs []error
	for _, r := range rs {
		if a.Node != "" && r.Node != a.Node {
			continue
		}
		if err := c.stopKubelet(r, a.Purge); err != nil {
			errs = append(errs, err)
		}
	}
	if a.Purge && a.Node == "" {
		_ = os.Remove(filepath.Join(c.dir, "kubelets", a.Cluster))
	}
	return nil, errors.Join(errs...)
}

func (c *coePlanes) stopKubelet(r *kubeletRecord, purge bool) error {
	if c.kubeletErr != nil {
		return c.kubeletErr
	}
	cp, err := controlplane.NewWorker(c.workerSpec(r))
	if err != nil {
		return err
	}
	if err := c.sup.Stop(cp, false); err != nil {
		return err
	}
	if !purge {
		r.CA = ""
		return c.saveKubelet(r)
	}
	w := cp.Worker()
	if err := cp.CleanWorkerHost(15 * time.Second); err != nil {
		return fmt.Errorf("cleaning up after kube node %s: %w", r.Node, err)
	}
	if err := os.RemoveAll(w.Dir); err != nil {
		return fmt.Errorf("removing the directory of kube node %s: %w", r.Node, err)
	}
	if err := os.Remove(c.kubeletRecordPath(r.Cluster, r.Node)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("removing the record of kube node %s: %w", r.Node, err)
	}
	c.log.Info("kubelet removed", "cluster", r.Cluster, "node", r.Node)
	return nil
}
