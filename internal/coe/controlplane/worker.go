package controlplane

import (
	"crypto/sha256"
	"encoding/hex"
	"maps"
	"net/netip"
	"net/url"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/corral/corral/internal/coe/certs"
	"github.com/corral/corral/internal/coe/k8sbin"
	"github.com/corral/corral/internal/ecode"
	"github.com/corral/corral/internal/secret"
)

// Component names of a kubelet worker.
const (
	Containerd = "containerd"
	Kubelet    = "kubelet"
)

// Images every kubelet worker has without a registry: built from the
// host's static busybox and imported into its containerd. Pods name
// BusyboxImage with imagePullPolicy Never; PauseImage is the sandbox.
const (
	BusyboxImage = "corral/busybox:1"
	PauseImage   = "corral/pause:1"
	// criNamespace is the containerd namespace the CRI plugin works in.
	criNamespace = "k8s.io"
)

// WorkerHost are the host's programs a kubelet worker runs with: Debian's
// containerd, runc and CNI plugins, and busybox-static for the images.
type WorkerHost struct {
	Containerd string
	Ctr        string
	Runc       string
	CNIBinDir  string
	Busybox    string
	// CgroupFS is where the cgroup hierarchies are mounted.
	CgroupFS string
}

// DefaultWorkerHost is where Debian's packages put them.
func DefaultWorkerHost() WorkerHost {
	return WorkerHost{Containerd: "/usr/bin/containerd", Ctr: "/usr/bin/ctr", Runc: "/usr/sbin/runc",
		CNIBinDir: "/usr/lib/cni", Busybox: "/bin/busybox", CgroupFS: "/sys/fs/cgroup"}
}

// WorkerSpec is one real kube node on this host: a kubelet and the
// containerd it runs pods with, both as root (a kubelet mounts, makes
// cgroups and network namespaces).
type WorkerSpec struct {
	ClusterUUID string
	ClusterName string
	// NodeName is the kube node's name; the kubelet's client certificate
	// must be system:node:<NodeName>.
	NodeName string
	// Dir is the worker's directory (root's alone); everything the worker
	// writes goes under it, except the containerd sockets (SocketDir) and
	// what the kernel keeps: cgroups, the pod bridge.
	Dir string
	// SocketDir holds the containerd sockets: a unix socket's path must
	// be short, which Dir may not be.
	SocketDir string
	// Server is the cluster's API server URL.
	Server string
	// BindAddress is where the kubelet serves (logs, exec), at
	// KubeletPort.
	BindAddress netip.Addr
	KubeletPort int
	// PodSubnet is where the worker's pods get their addresses, unique
	// on the host (pods of every worker share its network namespace).
	PodSubnet netip.Prefix
	// Labels are the kube node's labels, set when it registers.
	Labels map[string]string
	CACert []byte
	// Client is the kubelet's client certificate (system:node:<name>),
	// Serving its serving certificate.
	Client, Serving certs.KeyPair
	// BootstrapKubeconfig, when set, replaces Client: the kubelet joins
	// with it (--bootstrap-kubeconfig, a bootstrap token) and writes the
	// kubeconfig of the certificate the cluster signs for it. Without a
	// Serving pair the kubelet serves with a certificate of its own.
	BootstrapKubeconfig secret.Secret
	Tools               k8sbin.Tools
	Host                WorkerHost
}

var (
	kubeNodeNameRE  = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`)
	kubeLabelPartRE = regexp.MustCompile(`^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$`)
)

// WorkerID is the short name of a cluster's kube node on a host: its
// cgroup root, pod bridge and socket directory are named after it.
func WorkerID(clusterUUID, nodeName string) string {
	sum := sha256.Sum256([]byte(clusterUUID + "/" + nodeName))
	return hex.EncodeToString(sum[:6])
}

// NewWorker validates spec and derives the command lines of the worker's
// containerd and kubelet. It touches nothing on disk.
func NewWorker(spec WorkerSpec) (*ControlPlane, error) {
	w, err := spec.withDefaults()
	if err != nil {
		return nil, err
	}
	cp := &ControlPlane{id: w.ClusterUUID + "/" + w.NodeName, worker: &w,
		spec: Spec{ClusterUUID: w.ClusterUUID, ClusterName: w.ClusterName, Dir: w.Dir, BindAddress: w.BindAddress, Tools: w.Tools}}
	env := []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "HOME=" + cp.homeDir(), "LANG=C.UTF-8"}
	cp.components = []Component{
		{Name: Containerd, Path: w.Host.Containerd, Args: []string{"--config=" + cp.containerdConfigPath()}, Env: env},
		{Name: Kubelet, Path: w.Tools.Path(k8sbin.Kubelet), Args: cp.kubeletArgs(), Env: env, After: cp.ContainerdSocket()},
	}
	return cp, nil
}

func (w WorkerSpec) withDefaults() (WorkerSpec, error) {
	bad := func(format string, args ...any) (WorkerSpec, error) {
		return WorkerSpec{}, ecode.Errorf(ecode.Inval, "controlplane: "+format, args...)
	}
	if !uuidRE.MatchString(w.ClusterUUID) {
		return bad("cluster uuid %q is not a plain name", w.ClusterUUID)
	}
	if w.ClusterName == "" {
		w.ClusterName = w.ClusterUUID
	}
	if len(w.NodeName) > 253 || !kubeNodeNameRE.MatchString(w.NodeName) {
		return bad("kube node name %q is not a DNS subdomain", w.NodeName)
	}
	for what, d := range map[string]string{"worker": w.Dir, "socket": w.SocketDir} {
		if d == "" || !filepath.IsAbs(d) {
			return bad("%s directory %q of %s is not an absolute path", what, d, w.NodeName)
		}
	}
	w.Dir, w.SocketDir = filepath.Clean(w.Dir), filepath.Clean(w.SocketDir)
	// sun_path holds 108 bytes; containerd adds ".ttrpc" to its socket.
	if len(filepath.Join(w.SocketDir, "containerd.sock.ttrpc")) >= 108 {
		return bad("socket directory %q is too long for a unix socket", w.SocketDir)
	}
	if u, err := url.Parse(w.Server); err != nil || u.Scheme != "https" || u.Host == "" {
		return bad("API server %q is not an https URL", w.Server)
	}
	if !w.BindAddress.IsValid() {
		return bad("kube node %s has no address to serve at", w.NodeName)
	}
	if w.KubeletPort <= 0 || w.KubeletPort > 65535 {
		return bad("kubelet port %d of %s is out of range", w.KubeletPort, w.NodeName)
	}
	if !w.PodSubnet.IsValid() || !w.PodSubnet.Addr().Is4() || w.PodSubnet.Bits() > 28 {
		return bad("pod subnet %v of %s is not an IPv4 prefix of /28 or wider", w.PodSubnet, w.NodeName)
	}
	w.PodSubnet = w.PodSubnet.Masked()
	for k, v := range w.Labels {
		name := k
		if i := strings.LastIndexByte(k, '/'); i >= 0 {
			name = k[i+1:]
		}
		if len(name) > 63 || !kubeLabelPartRE.MatchString(name) || (v != "" && (len(v) > 63 || !kubeLabelPartRE.MatchString(v))) ||
			strings.ContainsAny(k+v, ",=") {
			return bad("kube node label %q=%q of %s is not a label", k, v, w.NodeName)
		}
	}
	w.Labels = maps.Clone(w.Labels)
	if w.Tools.Dir() == "" {
		return bad("no Kubernetes tools for %s (k8sbin.Locate)", w.NodeName)
	}
	if w.Host == (WorkerHost{}) {
		w.Host = DefaultWorkerHost()
	}
	return w, nil
}

// Worker is the worker's spec, nil for a control plane.
func (cp *ControlPlane) Worker() *WorkerSpec { return cp.worker }

// ContainerdSocket is the worker's containerd's address.
func (cp *ControlPlane) ContainerdSocket() string {
	return filepath.Join(cp.worker.SocketDir, "containerd.sock")
}

// CgroupRoot is the cgroup (relative to each hierarchy's root) the
// worker's pods run under: <root>/kubepods/...
func (cp *ControlPlane) CgroupRoot() string {
	return "/corral-coe-" + WorkerID(cp.worker.ClusterUUID, cp.worker.NodeName)
}

// Bridge is the worker's pod bridge (15 characters, IFNAMSIZ).
func (cp *ControlPlane) Bridge() string {
	return "ckb" + WorkerID(cp.worker.ClusterUUID, cp.worker.NodeName)
}

func (cp *ControlPlane) workerPath(parts ...string) string {
	return filepath.Join(append([]string{cp.spec.Dir}, parts...)...)
}

func (cp *ControlPlane) containerdConfigPath() string { return cp.workerPath("containerd.toml") }
func (cp *ControlPlane) kubeletConfigPath() string    { return cp.workerPath("kubelet.yaml") }
func (cp *ControlPlane) containerdRoot() string       { return cp.workerPath("containerd", "root") }
func (cp *ControlPlane) containerdState() string      { return cp.workerPath("containerd", "state") }
func (cp *ControlPlane) kubeletRoot() string          { return cp.workerPath("kubelet") }
func (cp *ControlPlane) imagePath(name string) string { return cp.workerPath("images", name+".tar") }

// BootstrapKubeconfigPath is where a worker joining with a bootstrap
// token keeps its bootstrap kubeconfig.
func (cp *ControlPlane) BootstrapKubeconfigPath() string {
	return cp.KubeconfigPath("bootstrap-kubelet")
}

func (cp *ControlPlane) kubeletArgs() []string {
	w := cp.worker
	args := []string{
		"--config=" + cp.kubeletConfigPath(),
		"--kubeconfig=" + cp.KubeconfigPath(Kubelet),
		"--root-dir=" + cp.kubeletRoot(),
		"--cert-dir=" + cp.workerPath("kubelet", "pki"),
		"--hostname-override=" + w.NodeName,
		// A kubelet refuses a loopback node IP and then reports no
		// address at all (rather than one it guessed, where it does not
		// serve): the driver sets the kube node's address after
		// registration.
		"--node-ip=" + w.BindAddress.String(),
	}
	if w.BootstrapKubeconfig != "" {
		args = append(args, "--bootstrap-kubeconfig="+cp.BootstrapKubeconfigPath())
	}
	if len(w.Labels) > 0 {
		var ls []string
		for _, k := range slices.Sorted(maps.Keys(w.Labels)) {
			ls = append(ls, k+"="+w.Labels[k])
		}
		args = append(args, "--node-labels="+strings.Join(ls, ","))
	}
	return args
}
