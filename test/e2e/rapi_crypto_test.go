package e2e

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/corral/corral/internal/bootstrap"
	"github.com/corral/corral/internal/devcluster"
	"github.com/corral/corral/internal/master"
	"github.com/corral/corral/internal/pki"
)

// TestRAPIRenewCrypto replaces corral-rapi's certificate with `corral
// cluster renew-crypto`, first with one issued by the command, then with
// one the test brings, and checks that the running corral-rapi serves each
// from its next handshake without a restart.
func TestRAPIRenewCrypto(t *testing.T) {
	c := newCluster(t, clusterOpts{})
	env, err := devcluster.ReadRAPIEnv(c.dir)
	if err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(env.URL)
	if err != nil {
		t.Fatal(err)
	}
	caPEM, err := os.ReadFile(env.CA)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		t.Fatalf("no certificate in %s", env.CA)
	}
	pid := c.proc(devcluster.RAPIName).PID

	// served makes a fresh, verified handshake (no session resumption) and
	// returns the certificate corral-rapi presented.
	served := func() *x509.Certificate {
		t.Helper()
		d := tls.Dialer{Config: &tls.Config{RootCAs: pool, ServerName: u.Hostname(), MinVersion: tls.VersionTLS12}}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		conn, err := d.DialContext(ctx, "tcp", u.Host)
		if err != nil {
			t.Fatalf("TLS handshake with corral-rapi: %v", err)
		}
		defer conn.Close()
		return conn.(*tls.Conn).ConnectionState().PeerCertificates[0]
	}
	alive := func() {
		t.Helper()
		if now := c.proc(devcluster.RAPIName).PID; now != pid {
			t.Fatalf("corral-rapi pid %d, was %d", now, pid)
		}
		if err := syscall.Kill(pid, 0); err != nil {
			t.Fatalf("corral-rapi (pid %d) is gone: %v", pid, err)
		}
	}

	first := served()
	out, err := c.corral("cluster", "renew-crypto", "--new-rapi-certificate", "--force")
	if err != nil {
		t.Fatalf("renew-crypto --new-rapi-certificate: %v\n%s", err, out)
	}
	second := served()
	if second.SerialNumber.Cmp(first.SerialNumber) == 0 {
		t.Fatalf("corral-rapi still serves serial %x after renew-crypto", first.SerialNumber)
	}
	if !strings.Contains(out, second.SerialNumber.Text(16)) {
		t.Errorf("renew-crypto output %q does not name the new serial %x", out, second.SerialNumber)
	}
	alive()

	// A certificate the operator brings: issued here from the dev cluster's
	// CA for corral-rapi's address.
	l := bootstrap.Layout{StateDir: c.dir, RunDir: c.st.RunDir}
	ca, err := pki.LoadCA(filepath.Join(l.MasterDir(), master.FileCA), filepath.Join(l.MasterDir(), master.FileCAKey))
	if err != nil {
		t.Fatal(err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	certPEM, err := ca.Issue(pki.IssueRequest{CommonName: "rapi-e2e", Role: pki.RoleRAPI, PublicKey: key.Public(),
		IPs: []net.IP{net.ParseIP(u.Hostname())}, ValidFor: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	bundle := filepath.Join(t.TempDir(), "rapi.pem")
	if err := os.WriteFile(bundle, append(certPEM, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})...), 0o600); err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(certPEM)
	want, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	out, err = c.corral("cluster", "renew-crypto", "--rapi-certificate", bundle, "--force")
	if err != nil {
		t.Fatalf("renew-crypto --rapi-certificate: %v\n%s", err, out)
	}
	third := served()
	if third.SerialNumber.Cmp(want.SerialNumber) != 0 || third.Subject.CommonName != "rapi-e2e" {
		t.Fatalf("corral-rapi serves %s serial %x, want rapi-e2e serial %x", third.Subject.CommonName, third.SerialNumber, want.SerialNumber)
	}
	alive()

	// A bundle whose key is not the certificate's is refused and changes
	// nothing.
	other, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	oder, _ := x509.MarshalPKCS8PrivateKey(other)
	bad := filepath.Join(t.TempDir(), "bad.pem")
	if err := os.WriteFile(bad, append(certPEM, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: oder})...), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := c.corral("cluster", "renew-crypto", "--rapi-certificate", bad, "--force"); err == nil || !strings.Contains(out, "does not match") {
		t.Fatalf("mismatched bundle: err %v, output %s", err, out)
	}
	if s := served().SerialNumber; s.Cmp(want.SerialNumber) != 0 {
		t.Errorf("serial %x after a refused bundle, want %x", s, want.SerialNumber)
	}
	alive()
}
