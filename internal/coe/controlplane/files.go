package controlplane

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/corral/corral/internal/atomicfile"
	"github.com/corral/corral/internal/coe/certs"
	"github.com/corral/corral/internal/coe/kube"
	"github.com/corral/corral/internal/ecode"
	"github.com/corral/corral/internal/secret"
)

// The cluster directory. Root owns the directories the cluster's user
// must not rearrange (a user who could swap pki/ for a symbolic link
// would have root write certificates wherever it points); the user owns
// its files in them, and the directories its processes write to.
//
//	DIR/            root:GID 0750
//	  pki/          root:GID 0750   certificates and keys, UID 0600
//	  kubeconfig/   root:GID 0750   one per client component, UID 0600
//	  kwok.yaml                     UID 0600
//	  etcd/         UID 0700        etcd's data
//	  apiserver/    UID 0700        the API server's --cert-dir
//	  home/         UID 0700        HOME of the processes
//	  logs/         root 0700       component logs (written through an inherited descriptor)
//	  run/          root 0700       pid files, the supervisor's lock
type dirSpec struct {
	rel   string
	owned bool // by the cluster's user, else root:GID or root
	mode  os.FileMode
}

var clusterDirs = []dirSpec{
	{"pki", false, 0o750},
	{"kubeconfig", false, 0o750},
	{"etcd", true, 0o700},
	{"apiserver", true, 0o700},
	{"home", true, 0o700},
	{"logs", false, 0o700},
	{"run", false, 0o700},
}

// WriteFiles makes the cluster directory and writes every file the
// components read: certificates, keys, kubeconfigs and kwok's
// configuration. It keeps etcd's data. Calling it again (e.g. after a CA
// rotation) rewrites the files; the running processes read them when they
// restart.
func (cp *ControlPlane) WriteFiles() error {
	s := cp.spec
	if s.Certs == nil {
		return fmt.Errorf("controlplane: no certificates to write for %s", s.ClusterUUID)
	}
	if err := checkTraversable(filepath.Dir(s.Dir), s.UID, s.GID); err != nil {
		return err
	}
	if err := mkdirOwned(s.Dir, 0, s.GID, 0o750); err != nil {
		return err
	}
	for _, d := range clusterDirs {
		uid, gid := 0, s.GID
		if d.owned {
			uid = s.UID
		}
		if d.mode&0o070 == 0 && !d.owned {
			gid = 0
		}
		if err := mkdirOwned(filepath.Join(s.Dir, d.rel), uid, gid, d.mode); err != nil {
			return err
		}
	}
	files, err := cp.files()
	if err != nil {
		return err
	}
	for path, data := range files {
		if err := atomicfile.WriteFile(path, []byte(data.Reveal()), 0o600); err != nil {
			return fmt.Errorf("controlplane: write %s: %w", path, err)
		}
		if err := os.Lchown(path, s.UID, s.GID); err != nil {
			return fmt.Errorf("controlplane: hand %s to uid %d: %w", path, s.UID, err)
		}
	}
	return nil
}

// files are the contents of every file WriteFiles writes; secret because
// some hold keys.
func (cp *ControlPlane) files() (map[string]secret.Secret, error) {
	s, b := cp.spec, cp.spec.Certs
	out := map[string]secret.Secret{}
	pair := func(name string, kp certs.KeyPair) {
		out[cp.PKIPath(name+".crt")] = secret.Secret(kp.CertPEM)
		out[cp.PKIPath(name+".key")] = kp.KeyPEM
	}
	out[cp.PKIPath("ca.crt")] = secret.Secret(b.CA.CertPEM())
	if s.TLSBootstrap {
		if s.ClusterSigningKey == "" {
			return nil, ecode.Errorf(ecode.Inval, "controlplane: %s signs kubelet certificates but has no CA key", s.ClusterUUID)
		}
		out[cp.PKIPath("ca.key")] = s.ClusterSigningKey
	}
	pair("apiserver", b.APIServer)
	pair("apiserver-kubelet-client", b.APIServerKubeletClient)
	out[cp.PKIPath("sa.pub")] = secret.Secret(b.ServiceAccount.PublicPEM)
	out[cp.PKIPath("sa.key")] = b.ServiceAccount.PrivatePEM
	if s.SharedEtcd != nil {
		out[cp.PKIPath("etcd-ca.crt")] = secret.Secret(s.SharedEtcd.CAPEM)
		pair("apiserver-etcd-client", s.SharedEtcd.Client)
	} else {
		out[cp.PKIPath("etcd-ca.crt")] = secret.Secret(b.CA.CertPEM())
		pair("apiserver-etcd-client", b.APIServerEtcdClient)
		pair("etcd-server", b.EtcdServer)
		pair("etcd-peer", b.EtcdPeer)
	}
	for component, kp := range map[string]certs.KeyPair{
		ControllerManager: b.ControllerManager,
		Scheduler:         b.Scheduler,
		Kwok:              b.Kwok,
	} {
		kc, err := certs.Kubeconfig(s.ClusterName, s.Server(), b.CA.CertPEM(), kp.CertPEM, kp.KeyPEM)
		if err != nil {
			return nil, err
		}
		out[cp.KubeconfigPath(component)] = kc
	}
	kwok, err := cp.kwokConfig()
	if err != nil {
		return nil, err
	}
	out[cp.KwokConfigPath()] = secret.Secret(kwok)
	return out, nil
}

// kwokConfig is kwok's configuration followed by its stages, so that the
// cluster keeps running the stages it was created with whatever the tools
// directory later holds.
func (cp *ControlPlane) kwokConfig() (string, error) {
	s := cp.spec
	var sb strings.Builder
	sb.WriteString("apiVersion: config.kwok.x-k8s.io/v1alpha1\nkind: KwokConfiguration\noptions:\n")
	sb.WriteString("  manageAllNodes: false\n")
	// The nodes kube.CreateKwokNode makes; a node that loses the label
	// goes NotReady, which is how auto-healing is exercised.
	fmt.Fprintf(&sb, "  manageNodesWithLabelSelector: %q\n", kube.SelectorLabelKey+"="+kube.SelectorLabelValue)
	fmt.Fprintf(&sb, "  nodeIP: %q\n", s.BindAddress.String())
	fmt.Fprintf(&sb, "  cidr: %q\n", s.PodCIDR.String())
	// kwok fills in its defaults only when it is given no configuration,
	// so every option that must not be zero is spelled out (values of
	// kwok's own defaults and manifests).
	sb.WriteString("  podPlayStageParallelism: 4\n  nodePlayStageParallelism: 4\n  nodeLeaseParallelism: 4\n")
	sb.WriteString("  nodeLeaseDurationSeconds: 40\n  podsOnNodeSyncParallelism: 1\n")
	sb.WriteString("  enablePodsOnNodeSyncListPager: true\n  enablePodsOnNodeSyncStreamWatch: false\n")
	sb.WriteString("  enableDebuggingHandlers: true\n  enableContentionProfiling: false\n  enableProfilingHandler: false\n")
	if s.KwokPort != 0 {
		fmt.Fprintf(&sb, "  serverAddress: %q\n", s.hostPort(s.KwokPort))
		fmt.Fprintf(&sb, "  nodePort: %d\n", s.KwokPort)
	}
	for _, path := range s.Tools.KwokStageConfigs() {
		b, err := os.ReadFile(path)
		if err != nil {
			return "", ecode.Errorf(ecode.Environ, "controlplane: kwok stage config: %w", err)
		}
		sb.WriteString("---\n")
		sb.Write(b)
		if len(b) > 0 && b[len(b)-1] != '\n' {
			sb.WriteByte('\n')
		}
	}
	return sb.String(), nil
}

// mkdirOwned makes dir (its parent must exist) or fixes an existing one
// to the owner and mode, refusing a symbolic link in its place.
func mkdirOwned(dir string, uid, gid int, mode os.FileMode) error {
	if err := os.Mkdir(dir, mode); err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("controlplane: make %s: %w", dir, err)
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return fmt.Errorf("controlplane: %w", err)
	}
	if !fi.IsDir() {
		return ecode.Errorf(ecode.State, "controlplane: %s is not a directory", dir)
	}
	if err := os.Lchown(dir, uid, gid); err != nil {
		return fmt.Errorf("controlplane: hand %s to uid %d: %w", dir, uid, err)
	}
	if err := os.Chmod(dir, mode); err != nil {
		return fmt.Errorf("controlplane: %w", err)
	}
	return nil
}

// checkTraversable says, before any process fails on it, when a directory
// above the cluster's keeps its user out.
func checkTraversable(dir string, uid, gid int) error {
	for d := dir; ; d = filepath.Dir(d) {
		fi, err := os.Stat(d)
		if err != nil {
			return fmt.Errorf("controlplane: %w", err)
		}
		st := fi.Sys().(*syscall.Stat_t)
		perm := fi.Mode().Perm()
		ok := perm&0o001 != 0 ||
			(int(st.Uid) == uid && perm&0o100 != 0) ||
			(int(st.Gid) == gid && perm&0o010 != 0)
		if !ok {
			return ecode.Errorf(ecode.Environ, "controlplane: uid %d cannot enter %s (mode %v, owner %d:%d)", uid, d, perm, st.Uid, st.Gid)
		}
		if d == "/" || d == "." {
			return nil
		}
	}
}

// pidString is how pid files hold a pid.
func pidString(pid int) string { return strconv.Itoa(pid) + "\n" }
