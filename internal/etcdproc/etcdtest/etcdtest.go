// Package etcdtest starts throwaway etcd clusters for tests. A test that
// needs etcd skips when the etcd binary is missing, unless the environment
// says CORRAL_REQUIRE_ETCD=1 (as CI does), when it fails instead.
package etcdtest

import (
	"context"
	"crypto/tls"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/corral/corral/internal/etcdproc"
	"github.com/corral/corral/internal/pki"
)

// RequireEnv names the variable that turns a missing etcd from a skip into
// a failure.
const RequireEnv = "CORRAL_REQUIRE_ETCD"

// Required reports whether the environment demands etcd.
func Required() bool { return os.Getenv(RequireEnv) == "1" }

// Require returns the etcd binary, or skips t (fails it under
// CORRAL_REQUIRE_ETCD=1) when there is none.
func Require(t testing.TB) string {
	t.Helper()
	bin, err := etcdproc.Binary()
	if err != nil {
		missing(t, err)
	}
	return bin
}

// RequireEtcdctl is Require for etcdctl, which restoring a snapshot needs.
func RequireEtcdctl(t testing.TB) string {
	t.Helper()
	bin, err := etcdproc.Etcdctl()
	if err != nil {
		missing(t, err)
	}
	return bin
}

func missing(t testing.TB, err error) {
	t.Helper()
	if Required() {
		t.Fatalf("%s=1 but: %v", RequireEnv, err)
	}
	t.Skipf("skipping: %v", err)
}

// Start starts a cluster described by cfg in a fresh temporary directory
// and stops it when the test ends. Members die with the test binary even if
// it crashes (cfg.ExitWithParent is forced on).
func Start(t testing.TB, cfg etcdproc.Config) *etcdproc.Cluster {
	t.Helper()
	cfg.Binary = Require(t)
	if cfg.Dir == "" {
		cfg.Dir = ShortTempDir(t)
	}
	cfg.ExitWithParent = true
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c, err := etcdproc.Start(ctx, cfg)
	if err != nil {
		t.Fatalf("starting etcd: %v", err)
	}
	t.Cleanup(func() {
		if err := c.Stop(); err != nil {
			t.Errorf("stopping etcd: %v", err)
		}
	})
	return c
}

// ShortTempDir is a temporary directory removed when the test ends. It is
// made directly under the system's temporary directory rather than under
// t.TempDir's long, test-named path, which keeps etcd's file names short
// in its logs.
func ShortTempDir(t testing.TB) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "etcd")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// Certs is a throwaway cluster CA with a certificate for the members (valid
// for the loopback address, for serving clients and peers) and one for a
// client, written as PEM files.
type Certs struct {
	Member etcdproc.TLSFiles
	Client etcdproc.TLSFiles
	// ServerName is the name clients verify the members' certificate
	// against.
	ServerName string
}

// NewCerts issues the certificates into a temporary directory.
func NewCerts(t testing.TB) *Certs {
	t.Helper()
	dir := t.TempDir()
	ca, err := pki.NewCA("etcdtest", 24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	caFile := filepath.Join(dir, "ca.crt")
	if err := os.WriteFile(caFile, ca.CertPEM(), 0o644); err != nil {
		t.Fatal(err)
	}
	issue := func(name string, role pki.Role, ips []net.IP) etcdproc.TLSFiles {
		keyPEM, key, err := pki.NewKeyPair()
		if err != nil {
			t.Fatal(err)
		}
		certPEM, err := ca.Issue(pki.IssueRequest{CommonName: name, Role: role, IPs: ips, PublicKey: key.Public(), ValidFor: 24 * time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		f := etcdproc.TLSFiles{CertFile: filepath.Join(dir, name+".crt"), KeyFile: filepath.Join(dir, name+".key"), CAFile: caFile}
		if err := pki.WriteKeyPair(f.CertFile, f.KeyFile, certPEM, keyPEM); err != nil {
			t.Fatal(err)
		}
		return f
	}
	return &Certs{
		Member:     issue("etcd-member", pki.RoleEtcdMember, []net.IP{net.IPv4(127, 0, 0, 1)}),
		Client:     issue("corrald", pki.RoleEtcdClient, nil),
		ServerName: "127.0.0.1",
	}
}

// ClientTLS is the client's TLS configuration, as Corral's daemons build
// theirs: TLS 1.3, the cluster CA, the member's name checked.
func (c *Certs) ClientTLS(t testing.TB) *tls.Config {
	t.Helper()
	certPEM, err := os.ReadFile(c.Client.CertFile)
	if err != nil {
		t.Fatal(err)
	}
	keyPEM, err := os.ReadFile(c.Client.KeyFile)
	if err != nil {
		t.Fatal(err)
	}
	caPEM, err := os.ReadFile(c.Client.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := pki.ClientTLSConfig(certPEM, keyPEM, caPEM, c.ServerName)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}
