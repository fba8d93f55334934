package pki

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func newTestCA(t testing.TB, cluster string) *CA {
	t.Helper()
	ca, err := NewCA(cluster, 24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return ca
}

// issue makes a key and a certificate of the given role for name.
func issue(t testing.TB, ca *CA, name string, role Role) (certPEM, keyPEM []byte) {
	t.Helper()
	keyPEM, key, err := NewKeyPair()
	if err != nil {
		t.Fatal(err)
	}
	certPEM, err = ca.Issue(IssueRequest{CommonName: name, Role: role, PublicKey: key.Public(), IPs: []net.IP{net.ParseIP("127.0.0.1")}})
	if err != nil {
		t.Fatal(err)
	}
	return certPEM, keyPEM
}

func parseOne(t testing.TB, certPEM []byte) *x509.Certificate {
	t.Helper()
	certs, err := ParseCertificatesPEM(certPEM)
	if err != nil {
		t.Fatal(err)
	}
	return certs[0]
}

func TestIssueVerifiesAgainstCA(t *testing.T) {
	ca := newTestCA(t, "alpha")
	_, key, err := NewKeyPair()
	if err != nil {
		t.Fatal(err)
	}
	certPEM, err := ca.Issue(IssueRequest{
		CommonName: "node1.example.com",
		Role:       RoleNode,
		DNSNames:   []string{"node1"},
		IPs:        []net.IP{net.ParseIP("192.0.2.7")},
		PublicKey:  key.Public(),
		ValidFor:   1000 * time.Hour, // longer than the CA: must be capped
	})
	if err != nil {
		t.Fatal(err)
	}
	cert := parseOne(t, certPEM)
	pool, _, err := CAPool(ca.CertPEM())
	if err != nil {
		t.Fatal(err)
	}
	for _, usage := range []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth} {
		if _, err := cert.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{usage}, DNSName: "node1.example.com"}); err != nil {
			t.Errorf("verify for usage %v: %v", usage, err)
		}
	}
	if err := cert.VerifyHostname("192.0.2.7"); err != nil {
		t.Errorf("IP SAN: %v", err)
	}
	if got := cert.Subject.Organization; !slices.Equal(got, []string{"alpha"}) {
		t.Errorf("Organization = %v, want [alpha]", got)
	}
	if got := cert.Subject.OrganizationalUnit; !slices.Equal(got, []string{"corral-role=node"}) {
		t.Errorf("OrganizationalUnit = %v", got)
	}
	if r, ok := RoleOf(cert); !ok || r != RoleNode {
		t.Errorf("RoleOf = %q, %v", r, ok)
	}
	if !slices.Equal(cert.DNSNames, []string{"node1.example.com", "node1"}) {
		t.Errorf("DNSNames = %v", cert.DNSNames)
	}
	if cert.NotAfter.After(ca.Certificate().NotAfter) {
		t.Errorf("leaf expires %v after its CA %v", cert.NotAfter, ca.Certificate().NotAfter)
	}
	exp, err := CertExpiry(certPEM)
	if err != nil || !exp.Equal(cert.NotAfter) {
		t.Errorf("CertExpiry = %v, %v; want %v", exp, err, cert.NotAfter)
	}
	if cert.IsCA {
		t.Error("leaf is a CA")
	}
}

func TestIssueCommonNameIPBecomesIPSAN(t *testing.T) {
	ca := newTestCA(t, "alpha")
	_, key, _ := NewKeyPair()
	certPEM, err := ca.Issue(IssueRequest{CommonName: "10.1.2.3", Role: RoleRAPI, PublicKey: key.Public()})
	if err != nil {
		t.Fatal(err)
	}
	cert := parseOne(t, certPEM)
	if len(cert.DNSNames) != 0 || len(cert.IPAddresses) != 1 || !cert.IPAddresses[0].Equal(net.ParseIP("10.1.2.3")) {
		t.Errorf("SANs = %v %v", cert.DNSNames, cert.IPAddresses)
	}
}

func TestIssueRejects(t *testing.T) {
	ca := newTestCA(t, "alpha")
	_, key, _ := NewKeyPair()
	small, err := rsa.GenerateKey(rand.Reader, 1024)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		req  IssueRequest
		want string
	}{
		{"no name", IssueRequest{Role: RoleNode, PublicKey: key.Public()}, "common name"},
		{"bad role", IssueRequest{CommonName: "n", Role: "root", PublicKey: key.Public()}, "unknown role"},
		{"no key", IssueRequest{CommonName: "n", Role: RoleNode}, "missing"},
		{"small rsa", IssueRequest{CommonName: "n", Role: RoleNode, PublicKey: &small.PublicKey}, "too small"},
		{"negative validity", IssueRequest{CommonName: "n", Role: RoleNode, PublicKey: key.Public(), ValidFor: -time.Hour}, "negative"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ca.Issue(tc.req)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want one mentioning %q", err, tc.want)
			}
		})
	}
}

func TestNewCARejects(t *testing.T) {
	if _, err := NewCA("", time.Hour); err == nil {
		t.Error("empty cluster name accepted")
	}
	if _, err := NewCA("c", 0); err == nil {
		t.Error("zero validity accepted")
	}
}

func TestRoleOf(t *testing.T) {
	tests := []struct {
		ou   []string
		want Role
		ok   bool
	}{
		{[]string{"corral-role=master"}, RoleMaster, true},
		{[]string{"corral-role=master-candidate"}, RoleMasterCandidate, true},
		{[]string{"corral-role=admin"}, RoleAdmin, true},
		{nil, "", false},
		{[]string{"master"}, "", false},
		{[]string{"corral-role=root"}, "", false},
		{[]string{"corral-role=node", "corral-role=master"}, "", false},
		{[]string{"corral-role="}, "", false},
	}
	for _, tc := range tests {
		c := &x509.Certificate{Subject: pkix.Name{OrganizationalUnit: tc.ou}}
		r, ok := RoleOf(c)
		if ok != tc.ok || (ok && r != tc.want) {
			t.Errorf("RoleOf(%q) = %q, %v; want %q, %v", tc.ou, r, ok, tc.want, tc.ok)
		}
	}
	if _, ok := RoleOf(nil); ok {
		t.Error("RoleOf(nil) has a role")
	}
}

func TestSignCSRIgnoresRequestedNames(t *testing.T) {
	ca := newTestCA(t, "alpha")
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{
		Subject:     pkix.Name{CommonName: "master.example.com", OrganizationalUnit: []string{"corral-role=master"}},
		DNSNames:    []string{"master.example.com", "*.example.com"},
		IPAddresses: []net.IP{net.ParseIP("10.9.9.9")},
	}, key)
	if err != nil {
		t.Fatal(err)
	}
	csrPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der})
	certPEM, err := ca.SignCSR(csrPEM, RoleNode, "node7", []net.IP{net.ParseIP("192.0.2.70")}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	cert := parseOne(t, certPEM)
	if cert.Subject.CommonName != "node7" {
		t.Errorf("CN = %q", cert.Subject.CommonName)
	}
	if !slices.Equal(cert.DNSNames, []string{"node7"}) {
		t.Errorf("DNSNames = %v", cert.DNSNames)
	}
	if len(cert.IPAddresses) != 1 || !cert.IPAddresses[0].Equal(net.ParseIP("192.0.2.70")) {
		t.Errorf("IPs = %v", cert.IPAddresses)
	}
	if r, _ := RoleOf(cert); r != RoleNode {
		t.Errorf("role = %q", r)
	}
	if !key.PublicKey.Equal(cert.PublicKey) {
		t.Error("certificate is not for the CSR's key")
	}
}

func TestSignCSRChecksSignature(t *testing.T) {
	ca := newTestCA(t, "alpha")
	_, key, _ := NewKeyPair()
	csrPEM, err := NewCSR(key, "node1")
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(csrPEM)
	bad := slices.Clone(block.Bytes)
	bad[len(bad)-3] ^= 0xff // inside the signature
	badPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: bad})
	if _, err := ca.SignCSR(badPEM, RoleNode, "node1", nil, time.Hour); err == nil {
		t.Error("tampered CSR was signed")
	}
	if _, err := ca.SignCSR([]byte("junk"), RoleNode, "node1", nil, time.Hour); err == nil {
		t.Error("non-PEM CSR was signed")
	}
	if _, err := ca.SignCSR(csrPEM, RoleNode, "node1", nil, time.Hour); err != nil {
		t.Errorf("good CSR: %v", err)
	}
}

func TestSaveLoadCA(t *testing.T) {
	dir := t.TempDir()
	ca := newTestCA(t, "alpha")
	certPath, keyPath := filepath.Join(dir, "ca.pem"), filepath.Join(dir, "ca.key")
	if err := ca.Save(certPath, keyPath); err != nil {
		t.Fatal(err)
	}
	// Saving again replaces the read-only key file.
	if err := ca.Save(certPath, keyPath); err != nil {
		t.Fatalf("second save: %v", err)
	}
	checkMode(t, keyPath, 0o400)
	checkMode(t, certPath, 0o644)
	loaded, err := LoadCA(certPath, keyPath)
	if err != nil {
		t.Fatal(err)
	}
	if string(loaded.CertPEM()) != string(ca.CertPEM()) || loaded.ClusterName() != "alpha" {
		t.Fatal("loaded CA differs")
	}
	// The loaded CA issues certificates that chain to the original.
	certPEM, _ := issue(t, loaded, "n1", RoleNode)
	pool, _, _ := CAPool(ca.CertPEM())
	if _, err := parseOne(t, certPEM).Verify(x509.VerifyOptions{Roots: pool}); err != nil {
		t.Errorf("certificate from loaded CA: %v", err)
	}

	// A bundle file: the CA is the certificate matching the key.
	other := newTestCA(t, "beta")
	bundlePath := filepath.Join(dir, "bundle.pem")
	os.WriteFile(bundlePath, append(other.CertPEM(), ca.CertPEM()...), 0o644)
	fromBundle, err := LoadCA(bundlePath, keyPath)
	if err != nil {
		t.Fatal(err)
	}
	if string(fromBundle.CertPEM()) != string(ca.CertPEM()) {
		t.Error("LoadCA picked the wrong certificate from the bundle")
	}
	otherCert := filepath.Join(dir, "other.pem")
	os.WriteFile(otherCert, other.CertPEM(), 0o644)
	if _, err := LoadCA(otherCert, keyPath); err == nil {
		t.Error("LoadCA accepted a key of another CA")
	}
}

func TestCAFingerprint(t *testing.T) {
	ca := newTestCA(t, "alpha")
	sum := sha256.Sum256(ca.Certificate().Raw)
	want := hex.EncodeToString(sum[:])
	got, err := CAFingerprint(ca.CertPEM())
	if err != nil || got != want {
		t.Fatalf("CAFingerprint = %q, %v; want %q", got, err, want)
	}
	// The first certificate of a bundle, after any other block.
	other := newTestCA(t, "beta")
	key := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: []byte{1}})
	got, err = CAFingerprint(slices.Concat(key, ca.CertPEM(), other.CertPEM()))
	if err != nil || got != want {
		t.Fatalf("bundle fingerprint = %q, %v; want %q", got, err, want)
	}
	if _, err := CAFingerprint([]byte("nothing")); err == nil {
		t.Error("fingerprint of no certificate")
	}
}

func TestWriteKeyPair(t *testing.T) {
	dir := t.TempDir()
	ca := newTestCA(t, "alpha")
	certPEM, keyPEM := issue(t, ca, "n1", RoleNode)
	certPath, keyPath := filepath.Join(dir, "node.pem"), filepath.Join(dir, "node.key")
	if err := WriteKeyPair(certPath, keyPath, certPEM, keyPEM); err != nil {
		t.Fatal(err)
	}
	checkMode(t, keyPath, 0o600)
	checkMode(t, certPath, 0o644)
	if b, _ := os.ReadFile(keyPath); string(b) != string(keyPEM) {
		t.Error("key content differs")
	}
	_, otherKey := issue(t, ca, "n2", RoleNode)
	if err := WriteKeyPair(filepath.Join(dir, "x.pem"), filepath.Join(dir, "x.key"), certPEM, otherKey); err == nil {
		t.Error("mismatched pair written")
	}
	if _, err := os.Stat(filepath.Join(dir, "x.key")); !os.IsNotExist(err) {
		t.Error("mismatched pair left a file behind")
	}
	if k, err := ParsePrivateKeyPEM(keyPEM); err != nil || k == nil {
		t.Errorf("ParsePrivateKeyPEM: %v", err)
	}
}

func TestCAPoolRejectsLeaf(t *testing.T) {
	ca := newTestCA(t, "alpha")
	leaf, _ := issue(t, ca, "n1", RoleNode)
	if _, _, err := CAPool(append(ca.CertPEM(), leaf...)); err == nil {
		t.Error("a leaf was accepted into the CA pool")
	}
	if _, _, err := CAPool(nil); err == nil {
		t.Error("empty bundle accepted")
	}
}

func checkMode(t *testing.T, path string, want os.FileMode) {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := fi.Mode().Perm(); got != want {
		t.Errorf("%s mode = %o, want %o", filepath.Base(path), got, want)
	}
}

func FuzzParseCertificatesPEM(f *testing.F) {
	ca := newTestCA(f, "alpha")
	f.Add(ca.CertPEM())
	f.Add([]byte("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"))
	f.Add([]byte(""))
	f.Fuzz(func(t *testing.T, data []byte) {
		certs, err := ParseCertificatesPEM(data)
		if err == nil && len(certs) == 0 {
			t.Fatal("no error and no certificates")
		}
		if err == nil {
			if _, err := CAFingerprint(data); err != nil {
				t.Fatalf("parsed but no fingerprint: %v", err)
			}
		}
	})
}
