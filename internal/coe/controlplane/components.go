package controlplane

import (
	"net/url"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/corral/corral/internal/coe/k8sbin"
)

// Component names, which are also the names of their log and pid files.
const (
	Etcd              = "etcd"
	APIServer         = "kube-apiserver"
	ControllerManager = "kube-controller-manager"
	Scheduler         = "kube-scheduler"
	Kwok              = "kwok"
)

// Component is one process of the control plane.
type Component struct {
	Name string
	// Path and Args are its command line (Args without argv[0]); a
	// running process whose /proc cmdline is exactly Path and Args is
	// this component.
	Path string
	Args []string
	Env  []string
	// After is an address (host:port, or the absolute path of a unix
	// socket) that must accept connections before the component is first
	// started: the API server waits for etcd, the rest for the API server,
	// a kubelet for its container runtime.
	After string
}

// Argv is the full command line.
func (c Component) Argv() []string { return append([]string{c.Path}, c.Args...) }

// ControlPlane is a validated Spec and the components it runs: a
// cluster's control plane (New), or one kube node's kubelet and container
// runtime (NewWorker).
type ControlPlane struct {
	spec       Spec
	components []Component
	// id names the supervised unit: the cluster's uuid for a control
	// plane, <uuid>/<kube node> for a worker.
	id     string
	worker *WorkerSpec
}

// ID is what the supervisor knows the unit by.
func (cp *ControlPlane) ID() string { return cp.id }

// New validates spec and derives the components' command lines. It
// touches nothing on disk.
func New(spec Spec) (*ControlPlane, error) {
	s, err := spec.withDefaults()
	if err != nil {
		return nil, err
	}
	cp := &ControlPlane{spec: s, id: s.ClusterUUID}
	env := []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "HOME=" + cp.homeDir(), "LANG=C.UTF-8"}
	apiAddr := s.hostPort(s.APIServerPort)
	if s.SharedEtcd == nil {
		cp.components = append(cp.components, Component{Name: Etcd, Path: s.Tools.Path(k8sbin.Etcd), Args: cp.etcdArgs(), Env: env})
	}
	cp.components = append(cp.components,
		Component{Name: APIServer, Path: s.Tools.Path(k8sbin.APIServer), Args: cp.apiServerArgs(), Env: env, After: cp.etcdAddr()},
		Component{Name: ControllerManager, Path: s.Tools.Path(k8sbin.ControllerManager), Args: cp.controllerManagerArgs(), Env: env, After: apiAddr},
		Component{Name: Scheduler, Path: s.Tools.Path(k8sbin.Scheduler), Args: cp.schedulerArgs(), Env: env, After: apiAddr},
	)
	if !s.NoKwok {
		cp.components = append(cp.components, Component{Name: Kwok, Path: s.Tools.Path(k8sbin.Kwok),
			Args: []string{"--kubeconfig=" + cp.KubeconfigPath(Kwok), "--config=" + cp.KwokConfigPath()}, Env: env, After: apiAddr})
	}
	return cp, nil
}

// Spec is the validated spec, defaults filled in.
func (cp *ControlPlane) Spec() Spec { return cp.spec }

// Components in start order.
func (cp *ControlPlane) Components() []Component { return slices.Clone(cp.components) }

// Server is the API server's URL.
func (cp *ControlPlane) Server() string { return cp.spec.Server() }

// Files of the cluster directory.

// PKIPath is a certificate or key file.
func (cp *ControlPlane) PKIPath(name string) string { return filepath.Join(cp.spec.Dir, "pki", name) }

// KubeconfigPath is a component's kubeconfig.
func (cp *ControlPlane) KubeconfigPath(component string) string {
	return filepath.Join(cp.spec.Dir, "kubeconfig", component+".conf")
}

// KwokConfigPath is kwok's configuration with its stages.
func (cp *ControlPlane) KwokConfigPath() string { return filepath.Join(cp.spec.Dir, "kwok.yaml") }

// LogPath is a component's log (appended to across restarts).
func (cp *ControlPlane) LogPath(component string) string {
	return filepath.Join(cp.spec.Dir, "logs", component+".log")
}

// PIDPath holds the pid of a component's running process.
func (cp *ControlPlane) PIDPath(component string) string {
	return filepath.Join(cp.spec.Dir, "run", component+".pid")
}

func (cp *ControlPlane) etcdDataDir() string      { return filepath.Join(cp.spec.Dir, "etcd") }
func (cp *ControlPlane) apiServerCertDir() string { return filepath.Join(cp.spec.Dir, "apiserver") }
func (cp *ControlPlane) runDir() string           { return filepath.Join(cp.spec.Dir, "run") }
func (cp *ControlPlane) homeDir() string          { return filepath.Join(cp.spec.Dir, "home") }
func (cp *ControlPlane) lockPath() string         { return filepath.Join(cp.runDir(), "supervisor.lock") }

// etcdAddr is the first etcd endpoint as host:port.
func (cp *ControlPlane) etcdAddr() string {
	if cp.spec.SharedEtcd != nil {
		u, _ := url.Parse(cp.spec.SharedEtcd.Endpoints[0]) // checked by withDefaults
		return u.Host
	}
	return cp.spec.hostPort(cp.spec.EtcdClientPort)
}

func (cp *ControlPlane) etcdArgs() []string {
	s := cp.spec
	client := "https://" + s.hostPort(s.EtcdClientPort)
	peer := "https://" + s.hostPort(s.EtcdPeerPort)
	initial := EtcdInitialCluster([]EtcdMember{{Name: s.EtcdMember, PeerURL: peer}})
	if len(s.EtcdMembers) > 0 {
		initial = EtcdInitialCluster(s.EtcdMembers)
	}
	return []string{
		"--name=" + s.EtcdMember,
		"--data-dir=" + cp.etcdDataDir(),
		"--listen-client-urls=" + client,
		"--advertise-client-urls=" + client,
		"--listen-peer-urls=" + peer,
		"--initial-advertise-peer-urls=" + peer,
		"--initial-cluster=" + initial,
		"--initial-cluster-state=new",
		"--initial-cluster-token=coe-" + s.ClusterUUID,
		"--cert-file=" + cp.PKIPath("etcd-server.crt"),
		"--key-file=" + cp.PKIPath("etcd-server.key"),
		"--client-cert-auth=true",
		"--trusted-ca-file=" + cp.PKIPath("etcd-ca.crt"),
		"--peer-cert-file=" + cp.PKIPath("etcd-peer.crt"),
		"--peer-key-file=" + cp.PKIPath("etcd-peer.key"),
		"--peer-client-cert-auth=true",
		"--peer-trusted-ca-file=" + cp.PKIPath("etcd-ca.crt"),
		"--snapshot-count=10000",
		"--log-level=warn",
	}
}

func (cp *ControlPlane) apiServerArgs() []string {
	s := cp.spec
	etcdServers, prefix := "https://"+s.hostPort(s.EtcdClientPort), "/registry"
	if len(s.EtcdMembers) > 0 {
		// This node's member first: the others when it is down.
		urls := []string{etcdServers}
		for _, m := range s.EtcdMembers {
			if m.Name != s.EtcdMember {
				urls = append(urls, m.ClientURL)
			}
		}
		etcdServers = strings.Join(urls, ",")
	}
	if s.SharedEtcd != nil {
		etcdServers, prefix = strings.Join(s.SharedEtcd.Endpoints, ","), s.SharedEtcd.Prefix
	}
	args := []string{
		"--etcd-servers=" + etcdServers,
		"--etcd-prefix=" + prefix,
		"--etcd-cafile=" + cp.PKIPath("etcd-ca.crt"),
		"--etcd-certfile=" + cp.PKIPath("apiserver-etcd-client.crt"),
		"--etcd-keyfile=" + cp.PKIPath("apiserver-etcd-client.key"),
		"--bind-address=" + s.BindAddress.String(),
		"--secure-port=" + strconv.Itoa(s.APIServerPort),
		"--advertise-address=" + s.BindAddress.String(),
		"--cert-dir=" + cp.apiServerCertDir(),
		"--tls-cert-file=" + cp.PKIPath("apiserver.crt"),
		"--tls-private-key-file=" + cp.PKIPath("apiserver.key"),
		"--client-ca-file=" + cp.PKIPath("ca.crt"),
		"--kubelet-client-certificate=" + cp.PKIPath("apiserver-kubelet-client.crt"),
		"--kubelet-client-key=" + cp.PKIPath("apiserver-kubelet-client.key"),
		// Logs and exec verify the kubelet's serving certificate: the
		// cluster CA signs it with the kube node's name and address.
		"--kubelet-certificate-authority=" + cp.PKIPath("ca.crt"),
		// A kube node's name need not resolve: logs and exec go to the
		// address its kubelet serves at.
		"--kubelet-preferred-address-types=InternalIP,ExternalIP,Hostname",
		"--service-account-key-file=" + cp.PKIPath("sa.pub"),
		"--service-account-signing-key-file=" + cp.PKIPath("sa.key"),
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-cluster-ip-range=" + s.ServiceCIDR.String(),
		"--authorization-mode=Node,RBAC",
		"--allow-privileged=true",
		"--profiling=false",
	}
	if s.TLSBootstrap {
		args = append(args, "--enable-bootstrap-token-auth=true")
	}
	if s.BindAddress.IsLoopback() {
		// The API server refuses to advertise a loopback address into
		// the kubernetes service's endpoints; with no reconciler it
		// advertises nothing, which pods on kwok nodes never miss.
		args = append(args, "--endpoint-reconciler-type=none")
	}
	return args
}

// clientArgs are the flags the controller manager and the scheduler share:
// no serving port (nothing scrapes them), leader election only when
// several masters run replicas.
func (cp *ControlPlane) clientArgs(component string) []string {
	kc := cp.KubeconfigPath(component)
	return []string{
		"--kubeconfig=" + kc,
		"--authentication-kubeconfig=" + kc,
		"--authorization-kubeconfig=" + kc,
		"--bind-address=" + cp.spec.BindAddress.String(),
		"--secure-port=0",
		"--leader-elect=" + strconv.FormatBool(cp.spec.LeaderElect),
		"--profiling=false",
	}
}

func (cp *ControlPlane) controllerManagerArgs() []string {
	s := cp.spec
	args := append(cp.clientArgs(ControllerManager),
		"--use-service-account-credentials=true",
		"--service-account-private-key-file="+cp.PKIPath("sa.key"),
		"--root-ca-file="+cp.PKIPath("ca.crt"),
		"--allocate-node-cidrs=true",
		"--cluster-cidr="+s.PodCIDR.String(),
		"--service-cluster-ip-range="+s.ServiceCIDR.String(),
	)
	if s.NodeMonitorGracePeriod > 0 {
		args = append(args, "--node-monitor-grace-period="+s.NodeMonitorGracePeriod.String())
	}
	if s.TLSBootstrap {
		// kubeadm's set-up: the bootstrap signer and the token cleaner
		// are off by default; csrapproving and csrsigning are on, the
		// latter signing with the cluster's CA.
		args = append(args,
			"--controllers=*,bootstrapsigner,tokencleaner",
			"--cluster-signing-cert-file="+cp.PKIPath("ca.crt"),
			"--cluster-signing-key-file="+cp.PKIPath("ca.key"),
		)
	}
	return args
}

func (cp *ControlPlane) schedulerArgs() []string { return cp.clientArgs(Scheduler) }
