package controlplane

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/corral/corral/internal/atomicfile"
	"github.com/corral/corral/internal/coe/certs"
	"github.com/corral/corral/internal/ecode"
	"github.com/corral/corral/internal/secret"
)

// The worker directory, root's alone (0700 throughout):
//
//	DIR/
//	  pki/              ca.crt, kubelet-client.{crt,key}, kubelet.{crt,key}
//	  kubeconfig/       kubelet.conf
//	  kubelet.yaml      the kubelet's configuration
//	  containerd.toml   containerd's configuration
//	  containerd/       containerd's root, state and opt directories
//	  runc/             runc's state (--root)
//	  cni/net.d/        the pod network (a bridge), cni/networks its leases
//	  kubelet/          the kubelet's --root-dir (pod volumes are mounts here)
//	  pod-logs/         container logs
//	  images/           the busybox and pause images, imported at each start
//	  home/ logs/ run/  as for a control plane
var workerDirs = []string{"pki", "kubeconfig", "containerd", "runc", "cni", "cni/net.d", "cni/networks",
	"kubelet", "pod-logs", "volume-plugins", "images", "home", "logs", "run"}

// WriteWorkerFiles makes the worker's directory and its socket directory,
// writes the configurations, certificates and images, and makes the
// cgroup its pods go under (a kubelet refuses a cgroup root that does
// not exist). It keeps containerd's and the kubelet's state, so calling
// it again (a new CA) only rewrites files.
func (cp *ControlPlane) WriteWorkerFiles() error {
	w := cp.worker
	if w == nil {
		return ecode.Errorf(ecode.Inval, "controlplane: %s is not a worker", cp.id)
	}
	if err := os.MkdirAll(filepath.Dir(w.SocketDir), 0o700); err != nil {
		return fmt.Errorf("controlplane: %w", err)
	}
	for _, d := range append([]string{w.Dir, w.SocketDir}, prefixAll(w.Dir, workerDirs)...) {
		if err := mkdirOwned(d, 0, 0, 0o700); err != nil {
			return err
		}
	}
	files, err := cp.workerFiles()
	if err != nil {
		return err
	}
	for path, data := range files {
		if err := atomicfile.WriteFile(path, []byte(data.Reveal()), 0o600); err != nil {
			return fmt.Errorf("controlplane: write %s: %w", path, err)
		}
	}
	busybox, err := os.ReadFile(w.Host.Busybox)
	if err != nil {
		return ecode.Errorf(ecode.Environ, "controlplane: the images of kubelet workers are built from busybox-static: %w", err)
	}
	for name, img := range map[string]ociImage{
		"busybox": {Ref: BusyboxImage, Cmd: []string{"sh"}},
		"pause":   {Ref: PauseImage, Cmd: []string{"sh", "-c", "trap 'exit 0' TERM INT; while :; do sleep 3600 & wait; done"}},
	} {
		img.Busybox = busybox
		if err := atomicfile.WriteFrom(cp.imagePath(name), 0o600, img.writeArchive); err != nil {
			return fmt.Errorf("controlplane: write the %s image: %w", name, err)
		}
	}
	return makeCgroup(w.Host.CgroupFS, cp.CgroupRoot())
}

func prefixAll(dir string, rels []string) []string {
	out := make([]string, len(rels))
	for i, r := range rels {
		out[i] = filepath.Join(dir, r)
	}
	return out
}

func (cp *ControlPlane) workerFiles() (map[string]secret.Secret, error) {
	w := cp.worker
	out := map[string]secret.Secret{
		cp.PKIPath("ca.crt"):                                secret.Secret(w.CACert),
		cp.kubeletConfigPath():                              secret.Secret(cp.kubeletConfig()),
		cp.containerdConfigPath():                           secret.Secret(cp.containerdConfig()),
		cp.workerPath("cni", "net.d", "10-corral.conflist"): secret.Secret(cp.cniConfig()),
	}
	if len(w.Serving.CertPEM) > 0 {
		out[cp.PKIPath("kubelet.crt")] = secret.Secret(w.Serving.CertPEM)
		out[cp.PKIPath("kubelet.key")] = w.Serving.KeyPEM
	}
	if w.BootstrapKubeconfig != "" {
		// The kubelet writes its kubeconfig once the cluster signed its
		// certificate request.
		out[cp.BootstrapKubeconfigPath()] = w.BootstrapKubeconfig
		return out, nil
	}
	out[cp.PKIPath("kubelet-client.crt")] = secret.Secret(w.Client.CertPEM)
	out[cp.PKIPath("kubelet-client.key")] = w.Client.KeyPEM
	kc, err := certs.Kubeconfig(w.ClusterName, w.Server, w.CACert, w.Client.CertPEM, w.Client.KeyPEM)
	if err != nil {
		return nil, err
	}
	out[cp.KubeconfigPath(Kubelet)] = kc
	return out, nil
}

// kubeletConfig is the KubeletConfiguration: the cgroupfs driver on the
// host's cgroup v1 hierarchies, pods under the worker's cgroup root, no
// read-only or healthz port, the API authenticated by the cluster's CA
// and authorized by the API server, image garbage collection off (the
// images cannot be pulled again), the host's iptables left alone.
func (cp *ControlPlane) kubeletConfig() string {
	w := cp.worker
	var sb strings.Builder
	line := func(format string, args ...any) { fmt.Fprintf(&sb, format+"\n", args...) }
	line("apiVersion: kubelet.config.k8s.io/v1beta1")
	line("kind: KubeletConfiguration")
	line("address: %q", w.BindAddress.String())
	line("port: %d", w.KubeletPort)
	line("readOnlyPort: 0")
	line("healthzPort: 0")
	line("failCgroupV1: false")
	line("cgroupDriver: cgroupfs")
	line("cgroupRoot: %q", cp.CgroupRoot())
	line("containerRuntimeEndpoint: %q", "unix://"+cp.ContainerdSocket())
	line("imageServiceEndpoint: %q", "unix://"+cp.ContainerdSocket())
	line("failSwapOn: false")
	if len(w.Serving.CertPEM) > 0 {
		line("tlsCertFile: %q", cp.PKIPath("kubelet.crt"))
		line("tlsPrivateKeyFile: %q", cp.PKIPath("kubelet.key"))
	}
	line("rotateCertificates: false")
	line("serverTLSBootstrap: false")
	line("authentication:")
	line("  anonymous: {enabled: false}")
	line("  webhook: {enabled: true}")
	line("  x509: {clientCAFile: %q}", cp.PKIPath("ca.crt"))
	line("authorization: {mode: Webhook}")
	line("clusterDomain: cluster.local")
	if _, err := os.Stat("/etc/resolv.conf"); err == nil {
		line("resolvConf: /etc/resolv.conf")
	} else {
		line("resolvConf: \"\"")
	}
	line("podLogsDir: %q", cp.workerPath("pod-logs"))
	line("volumePluginDir: %q", cp.workerPath("volume-plugins"))
	line("evictionHard: {memory.available: \"100Mi\", nodefs.available: \"1%%\", imagefs.available: \"1%%\"}")
	line("imageGCHighThresholdPercent: 100")
	line("imageGCLowThresholdPercent: 99")
	line("serializeImagePulls: false")
	// The kubelet's iptables chains (a canary, a hint, a rule dropping
	// outside traffic to 127.0.0.0/8) are the host's, shared by every
	// worker and outliving them: a worker adds none.
	line("makeIPTablesUtilChains: false")
	return sb.String()
}

// containerdConfig is containerd 1.6's configuration: every directory the
// worker's own, runc's state under it, network namespaces mounted under
// its state directory, and the sandbox image local.
//
// A pod sandbox asks for an oom_score_adj of -998 (and a kubelet gives
// Guaranteed pods -997); lowering it needs CAP_SYS_RESOURCE, which a
// confined host may not grant root, and runc then fails every sandbox.
// restrict_oom_score_adj has containerd raise such values to its own.
func (cp *ControlPlane) containerdConfig() string {
	w := cp.worker
	q := strconv.Quote
	var sb strings.Builder
	line := func(format string, args ...any) { fmt.Fprintf(&sb, format+"\n", args...) }
	line("version = 2")
	line("root = %s", q(cp.containerdRoot()))
	line("state = %s", q(cp.containerdState()))
	line("disabled_plugins = [%s, %s, %s, %s]", q("io.containerd.snapshotter.v1.aufs"), q("io.containerd.snapshotter.v1.btrfs"),
		q("io.containerd.snapshotter.v1.zfs"), q("io.containerd.snapshotter.v1.devmapper"))
	line("[grpc]")
	line("  address = %s", q(cp.ContainerdSocket()))
	line("[ttrpc]")
	line("  address = %s", q(cp.ContainerdSocket()+".ttrpc"))
	line("[plugins]")
	line("  [plugins.\"io.containerd.internal.v1.opt\"]")
	line("    path = %s", q(cp.workerPath("containerd", "opt")))
	line("  [plugins.\"io.containerd.grpc.v1.cri\"]")
	line("    sandbox_image = %s", q("docker.io/"+PauseImage))
	line("    stream_server_address = %s", q("127.0.0.1"))
	line("    stream_server_port = %s", q("0"))
	line("    restrict_oom_score_adj = true")
	line("    netns_mounts_under_state_dir = true")
	line("    enable_selinux = false")
	line("    [plugins.\"io.containerd.grpc.v1.cri\".containerd]")
	line("      default_runtime_name = %s", q("runc"))
	line("      snapshotter = %s", q("overlayfs"))
	line("      [plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.runc]")
	line("        runtime_type = %s", q("io.containerd.runc.v2"))
	line("        [plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.runc.options]")
	line("          BinaryName = %s", q(w.Host.Runc))
	line("          Root = %s", q(cp.workerPath("runc")))
	line("          SystemdCgroup = false")
	line("    [plugins.\"io.containerd.grpc.v1.cri\".cni]")
	line("      bin_dir = %s", q(w.Host.CNIBinDir))
	line("      conf_dir = %s", q(cp.workerPath("cni", "net.d")))
	line("      max_conf_num = 1")
	return sb.String()
}

// cniConfig is the pod network: a bridge of the worker's own with the
// gateway address, leases kept in the worker's directory, and loopback.
// No masquerading and no port mapping, so nothing is added to the host's
// firewall.
func (cp *ControlPlane) cniConfig() string {
	w := cp.worker
	conf := map[string]any{
		"cniVersion": "0.4.0",
		"name":       "corral-" + WorkerID(w.ClusterUUID, w.NodeName),
		"plugins": []any{
			map[string]any{"type": "bridge", "bridge": cp.Bridge(), "isGateway": true, "ipMasq": false,
				"ipam": map[string]any{"type": "host-local", "dataDir": cp.workerPath("cni", "networks"),
					"ranges": [][]map[string]string{{{"subnet": w.PodSubnet.String()}}}}},
			map[string]any{"type": "loopback"},
		},
	}
	b, _ := json.MarshalIndent(conf, "", "  ") // plain maps always marshal
	return string(b) + "\n"
}

// ImportImages loads the worker's images into its containerd, once the
// containerd answers (within wait). Importing an image that is there
// already changes nothing.
func (cp *ControlPlane) ImportImages(ctx context.Context, wait time.Duration) error {
	w := cp.worker
	wctx, cancel := context.WithTimeout(ctx, wait)
	err := waitForAddress(wctx, cp.ContainerdSocket())
	cancel()
	if err != nil {
		return ecode.Errorf(ecode.Environ, "controlplane: containerd of %s did not answer at %s within %v (see %s): %w",
			w.NodeName, cp.ContainerdSocket(), wait, cp.LogPath(Containerd), err)
	}
	for _, name := range []string{"pause", "busybox"} {
		cmd := exec.CommandContext(ctx, w.Host.Ctr, "--address", cp.ContainerdSocket(), "--namespace", criNamespace,
			"images", "import", cp.imagePath(name))
		if out, err := cmd.CombinedOutput(); err != nil {
			return ecode.Errorf(ecode.Environ, "controlplane: import the %s image into the containerd of %s: %w: %s",
				name, w.NodeName, err, strings.TrimSpace(string(out)))
		}
	}
	return nil
}
