package bootstrap

import (
	"context"
	"crypto/tls"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/corral/corral/internal/etcdproc/etcdtest"
	"github.com/corral/corral/internal/nodeserver"
	"github.com/corral/corral/internal/pki"
	"github.com/corral/corral/internal/store"
	"github.com/corral/corral/internal/store/etcdstore"
	"github.com/corral/corral/internal/storecfg"
	"github.com/corral/corral/internal/storecfg/backend"
)

// newTestCluster initialises a cluster in a temporary directory, with files
// owned by the test's user.
func newTestCluster(t *testing.T) Layout {
	t.Helper()
	dir := etcdtest.ShortTempDir(t)
	l := Layout{StateDir: dir, RunDir: filepath.Join(dir, "run")}
	if err := Init(context.Background(), InitOptions{Name: "c1", Layout: l, MasterName: "m1", EnabledHypervisors: []string{"fake"}}); err != nil {
		t.Fatal(err)
	}
	return l
}

func TestStartEtcd(t *testing.T) {
	bin := etcdtest.Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	l := newTestCluster(t)
	members, err := StartEtcd(ctx, EtcdOptions{Layout: l, Binary: bin, ExitWithParent: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, m := range members {
			_ = syscall.Kill(m.PID, syscall.SIGKILL)
		}
	})
	if len(members) != 1 {
		t.Fatalf("%d members, want 1", len(members))
	}
	m := members[0]
	for _, want := range []string{"--client-cert-allowed-hostname=" + EtcdClientHostname, "--peer-cert-allowed-hostname=" + EtcdPeerHostname,
		"--client-cert-auth=true", "--peer-client-cert-auth=true", "--data-dir=" + filepath.Join(l.EtcdDir(), "m0", "data")} {
		if !slices.Contains(m.Args, want) {
			t.Errorf("member runs without %s: %q", want, m.Args)
		}
	}
	if m.Args[0] != bin || !strings.HasPrefix(m.ClientURL, "https://127.0.0.1:") {
		t.Errorf("member %+v", m)
	}
	if _, err := StartEtcd(ctx, EtcdOptions{Layout: l, Binary: bin, ExitWithParent: true}); err == nil || !strings.Contains(err.Error(), "exists") {
		t.Fatalf("second start: %v", err)
	}

	// corrald's client certificate gets in, through the configuration
	// corrald builds from store.json.
	if err := IssueEtcdClientCert(l, false); err != nil {
		t.Fatal(err)
	}
	cfg := storecfg.Config{Backend: storecfg.BackendEtcd, Endpoints: []string{m.ClientURL}, Prefix: "/corral/c1/",
		CertFile: storecfg.FileEtcdClientCert, KeyFile: storecfg.FileEtcdClientKey, CAFile: storecfg.FileClusterCA}
	st, err := backend.OpenConfig(ctx, l.MasterDir(), cfg, backend.Options{DialTimeout: 10 * time.Second})
	if err != nil {
		t.Fatalf("corrald's certificate refused: %v", err)
	}
	if _, err := st.Txn(ctx, nil, []store.Op{store.Put("/k", []byte("v"))}, nil); err != nil {
		t.Fatal(err)
	}
	st.Close()

	// A node daemon's certificate, from the same CA, does not.
	nd := l.NodeDir("")
	read := func(p string) []byte {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	cert, err := tls.X509KeyPair(read(filepath.Join(nd, nodeserver.FileCert)), read(filepath.Join(nd, nodeserver.FileKey)))
	if err != nil {
		t.Fatal(err)
	}
	pool, _, err := pki.CAPool(read(filepath.Join(nd, nodeserver.FileCA)))
	if err != nil {
		t.Fatal(err)
	}
	node, err := etcdstore.Open(ctx, etcdstore.Options{Endpoints: []string{m.ClientURL}, Prefix: "/corral/c1/", DialTimeout: 2 * time.Second,
		TLS: &tls.Config{MinVersion: tls.VersionTLS13, Certificates: []tls.Certificate{cert}, RootCAs: pool}})
	if err == nil {
		node.Close()
		t.Fatal("a node's certificate reached etcd")
	}

	// The unit runs the member as it runs now.
	unit := filepath.Join(l.EtcdDir(), EtcdUnitName)
	if err := WriteEtcdUnit(unit, m, EtcdUser); err != nil {
		t.Fatal(err)
	}
	b := string(read(unit))
	for _, want := range []string{"User=" + EtcdUser, "ExecStart=" + bin + " --name=m0 ", "--client-cert-allowed-hostname=" + EtcdClientHostname, "WantedBy=multi-user.target"} {
		if !strings.Contains(b, want) {
			t.Errorf("unit lacks %q:\n%s", want, b)
		}
	}
}

func TestStartEtcdRefuses(t *testing.T) {
	l := Layout{StateDir: t.TempDir()}
	for _, o := range []EtcdOptions{{Layout: l, Members: 2, Binary: "/bin/true"}, {Layout: l, Host: "localhost", Binary: "/bin/true"}} {
		if _, err := StartEtcd(context.Background(), o); err == nil {
			t.Errorf("StartEtcd(%+v) succeeded", o)
		}
	}
}

func TestMigrateCommand(t *testing.T) {
	ctx := context.Background()
	l := newTestCluster(t)
	cmd, err := MigrateCommand(ctx, MigrateOptions{Layout: l, CorraldBin: "/opt/corrald", Endpoints: []string{"https://10.0.0.1:2379", "https://10.0.0.2:2379"}, Prefix: "/p/"})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"/opt/corrald", "migrate-store", "--state-dir", l.StateDir, "--etcd-endpoints", "https://10.0.0.1:2379,https://10.0.0.2:2379", "--etcd-prefix", "/p/"}
	if !reflect.DeepEqual(cmd.Args, want) {
		t.Fatalf("args %q, want %q", cmd.Args, want)
	}
	// The client identity is issued by the cluster CA, for the etcd name.
	certPEM, err := os.ReadFile(filepath.Join(l.MasterDir(), storecfg.FileEtcdClientCert))
	if err != nil {
		t.Fatal(err)
	}
	certs, err := pki.ParseCertificatesPEM(certPEM)
	if err != nil {
		t.Fatal(err)
	}
	if certs[0].VerifyHostname(EtcdClientHostname) != nil {
		t.Errorf("client certificate names %v, not %s", certs[0].DNSNames, EtcdClientHostname)
	}
	if role, _ := pki.RoleOf(certs[0]); role != pki.RoleEtcdClient {
		t.Errorf("client certificate role %q", role)
	}

	// An etcd PKI of the operator's is copied in and named.
	src := t.TempDir()
	for _, f := range []string{"ca", "crt", "key"} {
		if err := os.WriteFile(filepath.Join(src, f), []byte(f+" content"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	cmd, err = MigrateCommand(ctx, MigrateOptions{Layout: l, CorraldBin: "/opt/corrald", Endpoints: []string{"https://e:1"},
		CAFile: filepath.Join(src, "ca"), CertFile: filepath.Join(src, "crt"), KeyFile: filepath.Join(src, "key")})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(cmd.Args[6:], " "); got != "--etcd-ca etcd-ca.pem --etcd-cert etcd-client.pem --etcd-key etcd-client.key" {
		t.Fatalf("args %q", got)
	}
	if b, _ := os.ReadFile(filepath.Join(l.MasterDir(), "etcd-ca.pem")); string(b) != "ca content" {
		t.Fatalf("CA copy %q", b)
	}
	if _, err := MigrateCommand(ctx, MigrateOptions{Layout: l, CorraldBin: "/opt/corrald", Endpoints: []string{"https://e:1"}, CAFile: "x"}); err == nil {
		t.Fatal("a CA without certificate and key was accepted")
	}
	if _, err := MigrateCommand(ctx, MigrateOptions{Layout: l, CorraldBin: "/opt/corrald"}); err == nil {
		t.Fatal("no endpoints was accepted")
	}
}

func TestQuoting(t *testing.T) {
	for _, tc := range []struct{ in, sh, sd string }{
		{"/usr/bin/etcd", `'/usr/bin/etcd'`, `/usr/bin/etcd`},
		{"--data-dir=/var/lib/my dir", `'--data-dir=/var/lib/my dir'`, `"--data-dir=/var/lib/my dir"`},
		{`it's`, `'it'\''s'`, `"it's"`},
		{`50%$x"`, `'50%$x"'`, `"50%%$$x\""`},
		{"", `''`, `""`},
	} {
		if got := shellQuote(tc.in); got != tc.sh {
			t.Errorf("shellQuote(%q) = %s, want %s", tc.in, got, tc.sh)
		}
		if got := systemdQuote(tc.in); got != tc.sd {
			t.Errorf("systemdQuote(%q) = %s, want %s", tc.in, got, tc.sd)
		}
	}
}
