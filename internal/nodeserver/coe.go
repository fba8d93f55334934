package nodeserver

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	mrand "math/rand/v2"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/corral/corral/internal/atomicfile"
	"github.com/corral/corral/internal/coe/controlplane"
	"github.com/corral/corral/internal/coe/k8sbin"
	"github.com/corral/corral/internal/ecode"
	"github.com/corral/corral/internal/nodeapi"
	"github.com/corral/corral/internal/secret"
	"github.com/corral/corral/internal/uidpool"
)

// DefaultCOEUIDPool is the uids the control planes of COE clusters run
// under on a node (one per cluster), unless --coe-uid-pool says others.
const DefaultCOEUIDPool = "2100000-2100999"

// coePlanes runs the control planes of the COE clusters placed on this
// node. Each cluster has a record, <dir>/records/<uuid>.json: its ports
// (chosen once, by the reserve call), its uid and the CA it runs with, so
// that a call made again finds what the first one chose and a new daemon
// adopts the processes the last one left running. The clusters'
// directories are <dir>/clusters/<uuid>.
type coePlanes struct {
	dir      string
	tools    k8sbin.Tools
	toolsErr error
	// kubeletTools and workerHost run kubelet workers (coekubelet.go);
	// kubeletErr says why none can run here.
	kubeletTools k8sbin.Tools
	kubeletErr   error
	workerHost   controlplane.WorkerHost
	pool         uidpool.Pool
	uids         *uidpool.Allocator
	sup          *controlplane.Supervisor
	log          *slog.Logger
	mu           sync.Mutex // serializes every call: records, uids, ports
}

// coeRecord is what the node keeps of a cluster.
type coeRecord struct {
	Cluster     string                       `json:"cluster"`
	Name        string                       `json:"name"`
	BindAddress string                       `json:"bind_address"`
	Ports       nodeapi.COEControlPlanePorts `json:"ports"`
	UID         int                          `json:"uid,omitempty"`
	GraceSecs   int                          `json:"node_monitor_grace_seconds,omitempty"`
	// TLSBootstrap: the components run with kubelet TLS bootstrapping.
	TLSBootstrap bool `json:"tls_bootstrap,omitempty"`
	// CA is the SHA-256 of the CA certificate the components were last
	// started with; "" until the first start.
	CA string `json:"ca,omitempty"`
	// Masters is this node's part in a cluster of several masters.
	Masters *nodeapi.COEMasters `json:"masters,omitempty"`
}

var coeClusterRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

// openCOEPlanes prepares the directories and adopts the control planes a
// previous daemon left running. Missing Kubernetes tools are not fatal:
// the calls then fail naming `make k8s-tools`.
func openCOEPlanes(dir, toolsDir, pool string, log *slog.Logger) (*coePlanes, error) {
	p, err := uidpool.Parse(pool)
	if err != nil {
		return nil, fmt.Errorf("--coe-uid-pool: %w", err)
	}
	c := &coePlanes{dir: dir, pool: p, log: log,
		uids: &uidpool.Allocator{Dir: filepath.Join(dir, "uids")},
		sup:  controlplane.NewSupervisor(controlplane.Options{Logger: log})}
	c.tools, c.toolsErr = k8sbin.Locate(k8sbin.Dir(toolsDir))
	c.workerHost = controlplane.DefaultWorkerHost()
	c.kubeletTools, c.kubeletErr = k8sbin.Locate(k8sbin.Dir(toolsDir), k8sbin.Kubelet)
	if c.kubeletErr == nil {
		c.kubeletErr = checkWorkerHost(c.workerHost)
	}
	for _, d := range []struct {
		path string
		mode os.FileMode
	}{{dir, 0o711}, {filepath.Join(dir, "records"), 0o700}, {filepath.Join(dir, "clusters"), 0o711},
		{filepath.Join(dir, "kubelets"), 0o700}, {filepath.Join(dir, "workers"), 0o700}} {
		if err := os.MkdirAll(d.path, d.mode); err != nil {
			return nil, fmt.Errorf("COE control planes: %w", err)
		}
		if err := os.Chmod(d.path, d.mode); err != nil {
			return nil, fmt.Errorf("COE control planes: %w", err)
		}
	}
	if d := unsearchableAbove(dir); d != "" {
		log.Warn("COE control planes cannot start here: their uids cannot enter a directory above the COE directory (use --coe-dir)",
			"dir", dir, "blocking", d)
	}
	c.adoptAll()
	c.adoptKubelets()
	return c, nil
}

// checkWorkerHost says which of the host's programs a kubelet worker
// needs are missing, naming their Debian packages.
func checkWorkerHost(h controlplane.WorkerHost) error {
	var missing []string
	for _, p := range []string{h.Containerd, h.Ctr, h.Runc, filepath.Join(h.CNIBinDir, "bridge"),
		filepath.Join(h.CNIBinDir, "host-local"), filepath.Join(h.CNIBinDir, "loopback"), h.Busybox} {
		if fi, err := os.Stat(p); err != nil || fi.Mode()&0o111 == 0 {
			missing = append(missing, p)
		}
	}
	if len(missing) > 0 {
		return ecode.Errorf(ecode.Environ, "kubelet workers need %v: install the Debian packages containerd, runc, "+
			"containernetworking-plugins and busybox-static (scripts/install-deps.sh)", missing)
	}
	return nil
}

// unsearchableAbove is the first directory above dir that others may not
// enter, "" when there is none.
func unsearchableAbove(dir string) string {
	for d := filepath.Dir(filepath.Clean(dir)); ; d = filepath.Dir(d) {
		if fi, err := os.Stat(d); err == nil && fi.Mode().Perm()&0o001 == 0 {
			return d
		}
		if d == "/" || d == "." {
			return ""
		}
	}
}

// adoptAll supervises again every cluster that was started here: running
// processes are adopted (same pids), dead ones started.
func (c *coePlanes) adoptAll() {
	ents, err := os.ReadDir(filepath.Join(c.dir, "records"))
	if err != nil {
		c.log.Error("reading the COE cluster records", "err", err)
		return
	}
	for _, e := range ents {
		uuid, ok := cutSuffix(e.Name(), ".json")
		if !ok {
			continue
		}
		r, err := c.record(uuid)
		if err != nil || r == nil || r.CA == "" {
			continue
		}
		if c.toolsErr != nil {
			c.log.Error("cannot supervise a COE control plane", "cluster", uuid, "err", c.toolsErr)
			continue
		}
		cp, err := controlplane.New(c.spec(r))
		if err == nil {
			err = c.sup.Start(cp)
		}
		if err != nil {
			c.log.Error("supervising a COE control plane again", "cluster", uuid, "err", err)
		}
	}
}

func cutSuffix(s, suffix string) (string, bool) {
	if len(s) > len(suffix) && s[len(s)-len(suffix):] == suffix {
		return s[:len(s)-len(suffix)], true
	}
	return "", false
}

// close stops supervising and leaves every control plane running.
func (c *coePlanes) close() { c.sup.Close() }

func (c *coePlanes) recordPath(uuid string) string {
	return filepath.Join(c.dir, "records", uuid+".json")
}

// record reads a cluster's record; nil when there is none.
func (c *coePlanes) record(uuid string) (*coeRecord, error) {
	if !coeClusterRE.MatchString(uuid) {
		return nil, ecode.Errorf(ecode.Inval, "COE cluster %q is not a plain name", uuid)
	}
	b, err := os.ReadFile(c.recordPath(uuid))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading the record of COE cluster %s: %w", uuid, err)
	}
	var r coeRecord
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("the record of COE cluster %s does not decode: %w", uuid, err)
	}
	return &r, nil
}

func (c *coePlanes) save(r *coeRecord) error {
	b, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("encoding the record of COE cluster %s: %w", r.Cluster, err)
	}
	if err := atomicfile.WriteFile(c.recordPath(r.Cluster), b, 0o600); err != nil {
		return fmt.Errorf("writing the record of COE cluster %s: %w", r.Cluster, err)
	}
	return nil
}

// spec is the control plane of a record (without certificates: enough to
// adopt, stop or compare command lines).
func (c *coePlanes) spec(r *coeRecord) controlplane.Spec {
	addr, _ := netip.ParseAddr(r.BindAddress) // checked by reserve
	s := controlplane.Spec{ClusterUUID: r.Cluster, ClusterName: r.Name, Dir: filepath.Join(c.dir, "clusters", r.Cluster),
		UID: r.UID, GID: r.UID, BindAddress: addr, APIServerPort: r.Ports.APIServer,
		EtcdClientPort: r.Ports.EtcdClient, EtcdPeerPort: r.Ports.EtcdPeer,
		NodeMonitorGracePeriod: time.Duration(r.GraceSecs) * time.Second, TLSBootstrap: r.TLSBootstrap, Tools: c.tools}
	if m := r.Masters; m != nil {
		s.EtcdMember, s.LeaderElect, s.NoKwok = m.Member, true, !m.Kwok
		for _, x := range m.Members {
			s.EtcdMembers = append(s.EtcdMembers, controlplane.EtcdMember{Name: x.Name, PeerURL: x.PeerURL, ClientURL: x.ClientURL})
		}
	}
	return s
}

// heldPorts are the ports every record holds.
func (c *coePlanes) heldPorts() (map[int]bool, error) {
	ents, err := os.ReadDir(filepath.Join(c.dir, "records"))
	if err != nil {
		return nil, fmt.Errorf("reading the COE cluster records: %w", err)
	}
	held := map[int]bool{}
	for _, e := range ents {
		uuid, ok := cutSuffix(e.Name(), ".json")
		if !ok {
			continue
		}
		if r, err := c.record(uuid); err == nil && r != nil {
			held[r.Ports.APIServer], held[r.Ports.EtcdClient], held[r.Ports.EtcdPeer] = true, true, true
		}
	}
	kubelets, err := c.kubeletRecords("")
	if err != nil {
		return nil, err
	}
	for _, r := range kubelets {
		held[r.Port] = true
	}
	return held, nil
}

// coePortRange is where control plane ports are chosen: below Linux's
// default ephemeral range (32768-60999), so that the outgoing connections
// of the machine never take a cluster's port while its component is down.
var coePortRange = [2]int{20000, 32767}

// freePorts finds n ports on addr that nothing listens on and no record
// holds, tried in a random order of coePortRange.
func freePorts(addr netip.Addr, n int, held map[int]bool) ([]int, error) {
	var out []int
	var lns []net.Listener
	defer func() {
		for _, l := range lns {
			l.Close()
		}
	}()
	span := coePortRange[1] - coePortRange[0] + 1
	for tries := 0; len(out) < n && tries < 500; tries++ {
		p := coePortRange[0] + mrand.IntN(span)
		if held[p] || slices.Contains(out, p) {
			continue
		}
		l, err := net.Listen("tcp", net.JoinHostPort(addr.String(), strconv.Itoa(p)))
		if err != nil {
			continue // taken
		}
		lns = append(lns, l)
		out = append(out, p)
	}
	if len(out) < n {
		return nil, ecode.Errorf(ecode.NoRes, "no %d ports free on %s in %d-%d", n, addr, coePortRange[0], coePortRange[1])
	}
	return out, nil
}

func (s *Server) coeReserve(ctx context.Context, a nodeapi.COEControlPlaneReserveArgs) (any, error) {
	c := s.coe
	c.mu.Lock()
	defer c.mu.Unlock()
	r, err := c.record(a.Cluster)
	if err != nil {
		return nil, err
	}
	if r != nil {
		if r.BindAddress != a.BindAddress {
			return nil, ecode.Errorf(ecode.State, "COE cluster %s runs on %s here, not %s", a.Cluster, r.BindAddress, a.BindAddress)
		}
		return r.Ports, nil
	}
	addr, err := netip.ParseAddr(a.BindAddress)
	if err != nil {
		return nil, ecode.Errorf(ecode.Inval, "bind address %q: %w", a.BindAddress, err)
	}
	held, err := c.heldPorts()
	if err != nil {
		return nil, err
	}
	ports, err := freePorts(addr, 3, held)
	if err != nil {
		return nil, err
	}
	r = &coeRecord{Cluster: a.Cluster, Name: a.Name, BindAddress: addr.String(),
		Ports: nodeapi.COEControlPlanePorts{APIServer: ports[0], EtcdClient: ports[1], EtcdPeer: ports[2]}}
	if err := c.save(r); err != nil {
		return nil, err
	}
	c.log.Info("COE control plane ports reserved", "cluster", a.Cluster, "apiserver", r.Ports.APIServer,
		"etcd_client", r.Ports.EtcdClient, "etcd_peer", r.Ports.EtcdPeer)
	return r.Ports, nil
}

func (s *Server) coeStart(ctx context.Context, a nodeapi.COEControlPlaneStartArgs) (any, error) {
	c := s.coe
	if c.toolsErr != nil {
		return nil, c.toolsErr
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	r, err := c.record(a.Cluster)
	if err != nil {
		return nil, err
	}
	if r == nil {
		return nil, ecode.Errorf(ecode.State, "COE cluster %s has no ports on this node (reserve them first)", a.Cluster)
	}
	if r.BindAddress != a.BindAddress {
		return nil, ecode.Errorf(ecode.State, "COE cluster %s runs on %s here, not %s", a.Cluster, r.BindAddress, a.BindAddress)
	}
	bundle, err := controlplane.BundleFromWire(a.Certs)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(bundle.CA.CertPEM())
	ca := hex.EncodeToString(sum[:])
	_, supErr := c.sup.Status(a.Cluster)
	supervised := supErr == nil
	if a.TLSBootstrap && a.Certs.CAKey == "" {
		return nil, ecode.Errorf(ecode.Inval, "COE cluster %s: kubelet TLS bootstrapping needs the CA key", a.Cluster)
	}
	if supervised && r.CA == ca && r.Name == a.Name && r.GraceSecs == a.NodeMonitorGraceSeconds && r.TLSBootstrap == a.TLSBootstrap && reflect.DeepEqual(r.Masters, a.Masters) {
		return c.status(r)
	}
	if r.CA != "" {
		// Running with another CA (a rotation) or other settings: the
		// components stop and start again with the new files.
		old, err := controlplane.New(c.spec(r))
		if err != nil {
			return nil, err
		}
		if err := c.sup.Stop(old, false); err != nil {
			return nil, err
		}
	}
	if r.UID == 0 {
		uid, err := c.uids.Acquire(c.pool, a.Cluster)
		if err != nil {
			return nil, err
		}
		r.UID = int(uid)
	}
	r.Name, r.GraceSecs, r.TLSBootstrap, r.Masters = a.Name, a.NodeMonitorGraceSeconds, a.TLSBootstrap, a.Masters
	spec := c.spec(r)
	spec.Certs = bundle
	if a.TLSBootstrap {
		spec.ClusterSigningKey = secret.Secret(a.Certs.CAKey)
	}
	cp, err := controlplane.New(spec)
	if err != nil {
		return nil, err
	}
	// The record names the uid before any file is handed to it.
	if err := c.save(r); err != nil {
		return nil, err
	}
	if err := cp.WriteFiles(); err != nil {
		return nil, err
	}
	if err := c.sup.Start(cp); err != nil {
		return nil, err
	}
	r.CA = ca
	if err := c.save(r); err != nil {
		return nil, err
	}
	c.log.Info("COE control plane started", "cluster", a.Cluster, "uid", r.UID, "server", cp.Server())
	return c.status(r)
}

// status is the reply about a recorded cluster.
func (c *coePlanes) status(r *coeRecord) (nodeapi.COEControlPlaneStatusReply, error) {
	out := nodeapi.COEControlPlaneStatusReply{Known: true, UID: r.UID, Ports: r.Ports, Components: []nodeapi.COEComponentStatus{}}
	sts, err := c.sup.Status(r.Cluster)
	if err != nil {
		return out, nil // recorded, not running here
	}
	for _, st := range sts {
		out.Components = append(out.Components, nodeapi.COEComponentStatus{Name: st.Name, PID: st.PID, Running: st.Running,
			Restarts: st.Restarts, LastExit: st.LastExit})
	}
	return out, nil
}

func (s *Server) coeStatus(ctx context.Context, a nodeapi.COEControlPlaneStatusArgs) (any, error) {
	c := s.coe
	c.mu.Lock()
	defer c.mu.Unlock()
	r, err := c.record(a.Cluster)
	if err != nil {
		return nil, err
	}
	if r == nil {
		return nodeapi.COEControlPlaneStatusReply{Components: []nodeapi.COEComponentStatus{}}, nil
	}
	return c.status(r)
}

// coeStop stops a cluster's components; with purge nothing of the cluster
// stays: no process, no file, no record, no uid (and so no port).
func (s *Server) coeStop(ctx context.Context, a nodeapi.COEControlPlaneStopArgs) (any, error) {
	c := s.coe
	c.mu.Lock()
	defer c.mu.Unlock()
	r, err := c.record(a.Cluster)
	if err != nil {
		return nil, err
	}
	if r == nil {
		return nil, nil // never here, or purged already
	}
	if r.UID != 0 {
		if c.toolsErr != nil {
			return nil, c.toolsErr
		}
		cp, err := controlplane.New(c.spec(r))
		if err != nil {
			return nil, err
		}
		if err := c.sup.Stop(cp, a.Purge); err != nil {
			return nil, err
		}
	}
	if !a.Purge {
		r.CA = "" // stopped: not adopted at the next start
		return nil, c.save(r)
	}
	if err := c.uids.Release(a.Cluster); err != nil {
		return nil, err
	}
	if err := os.Remove(c.recordPath(a.Cluster)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("removing the record of COE cluster %s: %w", a.Cluster, err)
	}
	c.log.Info("COE control plane removed", "cluster", a.Cluster, "uid", strconv.Itoa(r.UID))
	return nil, nil
}
