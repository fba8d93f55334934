package controlplane

import (
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/corral/corral/internal/coe/certs"
	"github.com/corral/corral/internal/ecode"
)

func argsOf(cp *ControlPlane, name string) []string {
	for _, c := range cp.Components() {
		if c.Name == name {
			return c.Args
		}
	}
	return nil
}

func TestNewDerivesTheCommandLines(t *testing.T) {
	base := baseDir(t)
	tools := fakeToolsDir(t, base)
	spec := testSpec(t, base, "c1", tools)
	spec.NodeMonitorGracePeriod = 20e9
	cp, err := New(spec)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, c := range cp.Components() {
		names = append(names, c.Name)
		if c.Path != filepath.Join(tools.Dir(), c.Name) {
			t.Errorf("%s runs %s", c.Name, c.Path)
		}
		if !slices.Contains(c.Env, "HOME="+filepath.Join(spec.Dir, "home")) {
			t.Errorf("%s env %v", c.Name, c.Env)
		}
	}
	if want := []string{Etcd, APIServer, ControllerManager, Scheduler, Kwok}; !slices.Equal(names, want) {
		t.Errorf("components %v, want %v", names, want)
	}
	api := argsOf(cp, APIServer)
	for _, want := range []string{
		"--endpoint-reconciler-type=none",
		"--advertise-address=127.0.0.1",
		"--etcd-servers=https://127.0.0.1:" + strconv.Itoa(spec.EtcdClientPort),
		"--etcd-prefix=/registry",
		"--secure-port=" + strconv.Itoa(spec.APIServerPort),
		"--client-ca-file=" + filepath.Join(spec.Dir, "pki", "ca.crt"),
		"--kubelet-certificate-authority=" + filepath.Join(spec.Dir, "pki", "ca.crt"),
		"--service-cluster-ip-range=10.96.0.0/16",
	} {
		if !slices.Contains(api, want) {
			t.Errorf("kube-apiserver lacks %s: %v", want, api)
		}
	}
	for _, name := range []string{ControllerManager, Scheduler} {
		args := argsOf(cp, name)
		for _, want := range []string{"--secure-port=0", "--leader-elect=false", "--kubeconfig=" + filepath.Join(spec.Dir, "kubeconfig", name+".conf")} {
			if !slices.Contains(args, want) {
				t.Errorf("%s lacks %s: %v", name, want, args)
			}
		}
	}
	if !slices.Contains(argsOf(cp, ControllerManager), "--node-monitor-grace-period=20s") {
		t.Errorf("controller manager without the node monitor grace period: %v", argsOf(cp, ControllerManager))
	}
	if etcd := argsOf(cp, Etcd); !slices.Contains(etcd, "--listen-client-urls=https://127.0.0.1:"+strconv.Itoa(spec.EtcdClientPort)) || !slices.Contains(etcd, "--client-cert-auth=true") {
		t.Errorf("etcd args %v", etcd)
	}
	for _, c := range cp.Components()[2:] {
		if c.After != "127.0.0.1:"+strconv.Itoa(spec.APIServerPort) {
			t.Errorf("%s starts after %q, want the API server", c.Name, c.After)
		}
	}
	if c := cp.Components()[1]; c.After != "127.0.0.1:"+strconv.Itoa(spec.EtcdClientPort) {
		t.Errorf("the API server starts after %q, want etcd", c.After)
	}
}

func TestNewWithSharedEtcd(t *testing.T) {
	base := baseDir(t)
	spec := testSpec(t, base, "c2", fakeToolsDir(t, base))
	spec.SharedEtcd = &SharedEtcd{Endpoints: []string{"https://127.0.0.1:2379"}, Prefix: "/clusters/c2/registry"}
	cp, err := New(spec)
	if err != nil {
		t.Fatal(err)
	}
	if cp.Components()[0].Name != APIServer {
		t.Errorf("a cluster on a shared etcd runs %s", cp.Components()[0].Name)
	}
	api := argsOf(cp, APIServer)
	if !slices.Contains(api, "--etcd-prefix=/clusters/c2/registry") || !slices.Contains(api, "--etcd-servers=https://127.0.0.1:2379") {
		t.Errorf("kube-apiserver on a shared etcd: %v", api)
	}
	if cp.Components()[0].After != "127.0.0.1:2379" {
		t.Errorf("the API server waits for %q", cp.Components()[0].After)
	}
}

func TestNewRefusesBadSpecs(t *testing.T) {
	base := baseDir(t)
	tools := fakeToolsDir(t, base)
	other, err := certs.NewBundle(certs.BundleSpec{ClusterName: "x", APIAddresses: nil})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name   string
		change func(*Spec)
		want   string
	}{
		{"root", func(s *Spec) { s.UID = 0 }, "never root"},
		{"root group", func(s *Spec) { s.GID = 0 }, "never root"},
		{"same ports", func(s *Spec) { s.EtcdPeerPort = s.EtcdClientPort }, "are both"},
		{"relative directory", func(s *Spec) { s.Dir = "c1" }, "absolute path"},
		{"uuid with a slash", func(s *Spec) { s.ClusterUUID = "../x" }, "not a plain name"},
		{"certificate for another address", func(s *Spec) {
			s.BindAddress = netip.MustParseAddr("192.0.2.7")
			s.Certs = other
		}, "does not name the bind address 192.0.2.7"},
		{"shared etcd over http", func(s *Spec) {
			s.SharedEtcd = &SharedEtcd{Endpoints: []string{"http://127.0.0.1:2379"}, Prefix: "/c"}
		}, "not an https URL"},
	} {
		spec := testSpec(t, base, "c1", tools)
		c.change(&spec)
		_, err := New(spec)
		if err == nil || ecode.ClassOf(err) != ecode.Inval || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %s saying %q", c.name, err, ecode.Inval, c.want)
		}
	}
	spec := testSpec(t, base, "c1", tools)
	spec.BindAddress = netip.MustParseAddr("192.0.2.7")
	spec.Certs = nil
	cp, err := New(spec)
	if err != nil {
		t.Fatal(err)
	}
	if slices.Contains(argsOf(cp, APIServer), "--endpoint-reconciler-type=none") {
		t.Error("an API server on a routable address runs without the endpoint reconciler")
	}
}

func TestWriteFilesGivesTheClusterUserItsFilesOnly(t *testing.T) {
	requireRoot(t)
	base := baseDir(t)
	spec := testSpec(t, base, "c1", fakeToolsDir(t, base))
	cp, err := New(spec)
	if err != nil {
		t.Fatal(err)
	}
	if err := cp.WriteFiles(); err != nil {
		t.Fatal(err)
	}
	uid := spec.UID
	for _, c := range []struct {
		rel       string
		uid, mode int
		isDir     bool
		mustExist bool
	}{
		{"", 0, 0o750, true, true},
		{"pki", 0, 0o750, true, true},
		{"kubeconfig", 0, 0o750, true, true},
		{"etcd", uid, 0o700, true, true},
		{"home", uid, 0o700, true, true},
		{"logs", 0, 0o700, true, true},
		{"run", 0, 0o700, true, true},
		{"pki/apiserver.key", uid, 0o600, false, true},
		{"pki/etcd-peer.key", uid, 0o600, false, true},
		{"pki/sa.key", uid, 0o600, false, true},
		{"kubeconfig/kube-scheduler.conf", uid, 0o600, false, true},
		{"kwok.yaml", uid, 0o600, false, true},
	} {
		fi, err := os.Lstat(filepath.Join(spec.Dir, c.rel))
		if err != nil {
			t.Errorf("%s: %v", c.rel, err)
			continue
		}
		st := fi.Sys().(*syscall.Stat_t)
		if int(st.Uid) != c.uid || int(fi.Mode().Perm()) != c.mode || fi.IsDir() != c.isDir {
			t.Errorf("%s: owner %d mode %v dir %v; want owner %d mode %o", c.rel, st.Uid, fi.Mode(), fi.IsDir(), c.uid, c.mode)
		}
	}
	if _, err := os.Stat(filepath.Join(spec.Dir, "pki", "ca.key")); err == nil {
		t.Error("the CA key was written to the control plane's directory")
	}
	kc, err := os.ReadFile(cp.KubeconfigPath(ControllerManager))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(kc), `server: "`+cp.Server()+`"`) || !strings.Contains(string(kc), `name: "system:kube-controller-manager"`) {
		t.Errorf("controller manager kubeconfig:\n%s", kc)
	}
	kwok, err := os.ReadFile(cp.KwokConfigPath())
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"kind: KwokConfiguration", `manageNodesWithLabelSelector: "type=kwok"`, "name: node-initialize", "name: pod-delete"} {
		if !strings.Contains(string(kwok), want) {
			t.Errorf("kwok.yaml lacks %q:\n%s", want, kwok)
		}
	}
	if n := strings.Count(string(kwok), "\n---\n"); n != 5 {
		t.Errorf("kwok.yaml has %d stage documents, want 5", n)
	}
	// Writing again keeps etcd's data.
	marker := filepath.Join(spec.Dir, "etcd", "member")
	if err := os.Mkdir(marker, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := cp.WriteFiles(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(marker); err != nil {
		t.Errorf("a second WriteFiles lost etcd's data: %v", err)
	}
}

func TestWriteFilesRefusesADirectoryTheUserCannotReach(t *testing.T) {
	requireRoot(t)
	base := baseDir(t)
	spec := testSpec(t, base, "c1", fakeToolsDir(t, base))
	closed := filepath.Join(base, "closed")
	if err := os.Mkdir(closed, 0o700); err != nil {
		t.Fatal(err)
	}
	spec.Dir = filepath.Join(closed, "c1")
	cp, err := New(spec)
	if err != nil {
		t.Fatal(err)
	}
	err = cp.WriteFiles()
	if ecode.ClassOf(err) != ecode.Environ || !strings.Contains(err.Error(), "cannot enter "+closed) {
		t.Errorf("WriteFiles under a 0700 root directory: %v", err)
	}
}
