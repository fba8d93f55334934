package nodeserver

import (
	"bytes"
	"context"
	"crypto/tls"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/corral/corral/internal/nodeapi"
	"github.com/corral/corral/internal/pki"
)

// newCertNode makes a node daemon named node1 whose credentials come from
// a fresh CA; adjust changes its options.
func newCertNode(t *testing.T, adjust ...func(*Options)) (*Server, *pki.CA) {
	t.Helper()
	dir := t.TempDir()
	ca, err := pki.NewCA("alpha", 24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	keyPEM, key, err := pki.NewKeyPair()
	if err != nil {
		t.Fatal(err)
	}
	certPEM, err := ca.Issue(pki.IssueRequest{CommonName: "node1", Role: pki.RoleNode, PublicKey: key.Public(), IPs: []net.IP{net.IPv4(127, 0, 0, 2)}})
	if err != nil {
		t.Fatal(err)
	}
	if err := pki.WriteKeyPair(filepath.Join(dir, FileCert), filepath.Join(dir, FileKey), certPEM, keyPEM); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, FileCA), ca.CertPEM(), 0o644); err != nil {
		t.Fatal(err)
	}
	opts := Options{StateDir: dir, RunDir: filepath.Join(dir, "run"), Listen: "127.0.0.1:0",
		Hypervisors: []string{"fake"}, Logger: slog.New(slog.DiscardHandler)}
	for _, f := range adjust {
		f(&opts)
	}
	s, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	return s, ca
}

func sign(t *testing.T, ca *pki.CA, csr, name string) string {
	t.Helper()
	cert, err := ca.SignCSR([]byte(csr), pki.RoleNode, name, []net.IP{net.IPv4(127, 0, 0, 2)}, 0)
	if err != nil {
		t.Fatal(err)
	}
	return string(cert)
}

func TestNodeCertRenewal(t *testing.T) {
	s, ca := newCertNode(t)
	c := &nodeCert{s: s}
	ctx := context.Background()
	dir := s.opts.StateDir
	oldCert, _ := os.ReadFile(filepath.Join(dir, FileCert))

	r1, err := c.csr(ctx, struct{}{})
	if err != nil {
		t.Fatal(err)
	}
	rep := r1.(nodeapi.NodeCertCSRReply)
	if rep.Current != string(oldCert) {
		t.Error("the request does not carry the current certificate")
	}
	// A repeated request is for the same staged key.
	r2, _ := c.csr(ctx, struct{}{})
	staged, _ := os.ReadFile(filepath.Join(dir, FileStagedKey))
	second := sign(t, ca, r2.(nodeapi.NodeCertCSRReply).CSR, "node1")

	other, err := pki.NewCA("alpha", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	refused := []struct{ name, cert string }{
		{"garbage", "not a certificate"},
		{"another node's name", sign(t, ca, rep.CSR, "node2")},
		{"another CA", sign(t, other, rep.CSR, "node1")},
		{"another key", sign(t, ca, mustCSR(t), "node1")},
	}
	for _, tc := range refused {
		if _, err := c.install(ctx, nodeapi.NodeCertInstallArgs{Cert: tc.cert}); err == nil {
			t.Errorf("%s: installed", tc.name)
		}
		if got, _ := os.ReadFile(filepath.Join(dir, FileCert)); !bytes.Equal(got, oldCert) {
			t.Fatalf("%s: node.pem changed by a refused install", tc.name)
		}
	}

	out, err := c.install(ctx, nodeapi.NodeCertInstallArgs{Cert: second})
	if err != nil {
		t.Fatal(err)
	}
	if !out.(nodeapi.NodeCertInstallReply).Installed {
		t.Error("the first install reports nothing installed")
	}
	gotCert, _ := os.ReadFile(filepath.Join(dir, FileCert))
	gotKey, _ := os.ReadFile(filepath.Join(dir, FileKey))
	if string(gotCert) != second || !bytes.Equal(gotKey, staged) {
		t.Fatal("node.pem/node.key are not the new pair")
	}
	if _, err := tls.X509KeyPair(gotCert, gotKey); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{FileStagedKey, fileSwitchCert} {
		if _, err := os.Stat(filepath.Join(dir, f)); err == nil {
			t.Errorf("%s left behind", f)
		}
	}
	// Repeating the install (a retried step) is answered without change.
	out, err = c.install(ctx, nodeapi.NodeCertInstallArgs{Cert: second})
	if err != nil || out.(nodeapi.NodeCertInstallReply).Installed {
		t.Fatalf("repeated install: %+v %v", out, err)
	}
	// A restarted daemon serves the new certificate.
	s2, err := New(Options{StateDir: dir, RunDir: filepath.Join(dir, "run"), Listen: "127.0.0.1:0",
		Hypervisors: []string{"fake"}, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	if s2.Name() != "node1" {
		t.Fatalf("restarted daemon is %q", s2.Name())
	}
}

func mustCSR(t *testing.T) string {
	t.Helper()
	_, key, err := pki.NewKeyPair()
	if err != nil {
		t.Fatal(err)
	}
	csr, err := pki.NewCSR(key, "node1")
	if err != nil {
		t.Fatal(err)
	}
	return string(csr)
}

// TestRecoverCertSwitch covers a daemon stopped between writing node.key
// and node.pem, and one stopped before writing either.
func TestRecoverCertSwitch(t *testing.T) {
	s, ca := newCertNode(t)
	dir := s.opts.StateDir
	oldCert, _ := os.ReadFile(filepath.Join(dir, FileCert))
	oldKey, _ := os.ReadFile(filepath.Join(dir, FileKey))
	keyPEM, key, _ := pki.NewKeyPair()
	csr, _ := pki.NewCSR(key, "node1")
	newCert := sign(t, ca, string(csr), "node1")
	write := func(name string, b []byte) {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}

	// Stopped before node.key was replaced: the old pair stays.
	write(fileSwitchCert, []byte(newCert))
	if err := recoverCertSwitch(dir); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(filepath.Join(dir, FileCert)); !bytes.Equal(got, oldCert) {
		t.Fatal("node.pem replaced though node.key was the old one")
	}
	if _, err := tls.X509KeyPair(oldCert, oldKey); err != nil {
		t.Fatal(err)
	}

	// Stopped after node.key was replaced: node.pem is finished.
	write(fileSwitchCert, []byte(newCert))
	write(FileKey, keyPEM)
	if err := recoverCertSwitch(dir); err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(filepath.Join(dir, FileCert))
	if string(got) != newCert {
		t.Fatal("node.pem not finished")
	}
	if _, err := os.Stat(filepath.Join(dir, fileSwitchCert)); err == nil {
		t.Fatal("switch file left behind")
	}
	if _, err := New(Options{StateDir: dir, RunDir: filepath.Join(dir, "run"), Listen: "127.0.0.1:0",
		Hypervisors: []string{"fake"}, Logger: slog.New(slog.DiscardHandler)}); err != nil {
		t.Fatalf("the daemon does not start after recovery: %v", err)
	}
}
