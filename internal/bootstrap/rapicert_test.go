package bootstrap

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/corral/corral/internal/ecode"
	"github.com/corral/corral/internal/master"
	"github.com/corral/corral/internal/pki"
)

func readLeaf(t *testing.T, path string) *x509.Certificate {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	certs, err := pki.ParseCertificatesPEM(data)
	if err != nil {
		t.Fatal(err)
	}
	return certs[0]
}

func loadTestCA(t *testing.T, l Layout) *pki.CA {
	t.Helper()
	ca, err := pki.LoadCA(filepath.Join(l.MasterDir(), master.FileCA), filepath.Join(l.MasterDir(), master.FileCAKey))
	if err != nil {
		t.Fatal(err)
	}
	return ca
}

// checkInstalled checks modes, owner, that the pair loads and is signed by
// the cluster CA.
func checkInstalled(t *testing.T, l Layout, wantUID int) *x509.Certificate {
	t.Helper()
	for _, f := range []struct {
		path string
		mode os.FileMode
	}{{l.RAPIKey(), 0o600}, {l.RAPICert(), 0o644}} {
		fi, err := os.Stat(f.path)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode() != f.mode {
			t.Errorf("%s: mode %v, want %v", f.path, fi.Mode(), f.mode)
		}
		if uid := int(fi.Sys().(*syscall.Stat_t).Uid); uid != wantUID {
			t.Errorf("%s: owner %d, want %d", f.path, uid, wantUID)
		}
	}
	if _, err := tls.LoadX509KeyPair(l.RAPICert(), l.RAPIKey()); err != nil {
		t.Fatalf("installed pair: %v", err)
	}
	// No temporary files are left behind.
	ents, _ := os.ReadDir(l.RAPIDir())
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), ".") {
			t.Errorf("left-over file %s", e.Name())
		}
	}
	return readLeaf(t, l.RAPICert())
}

func TestRenewRAPICert(t *testing.T) {
	l := newTestCluster(t)
	old := readLeaf(t, l.RAPICert())
	info, err := RenewRAPICert(l)
	if err != nil {
		t.Fatal(err)
	}
	cert := checkInstalled(t, l, os.Geteuid())
	if cert.SerialNumber.Cmp(old.SerialNumber) == 0 {
		t.Error("the renewed certificate has the old serial")
	}
	if info.Serial != cert.SerialNumber.Text(16) || !info.ClusterCA {
		t.Errorf("info %+v for serial %x", info, cert.SerialNumber)
	}
	if cert.Subject.CommonName != old.Subject.CommonName || !slices.Equal(cert.DNSNames, old.DNSNames) ||
		len(cert.IPAddresses) != len(old.IPAddresses) || !cert.IPAddresses[0].Equal(old.IPAddresses[0]) {
		t.Errorf("renewed for %s %v %v, was %s %v %v", cert.Subject.CommonName, cert.DNSNames, cert.IPAddresses,
			old.Subject.CommonName, old.DNSNames, old.IPAddresses)
	}
	ca := loadTestCA(t, l)
	pool := x509.NewCertPool()
	pool.AddCert(ca.Certificate())
	if _, err := cert.Verify(x509.VerifyOptions{Roots: pool, DNSName: "m1"}); err != nil {
		t.Errorf("renewed certificate does not verify for m1: %v", err)
	}
	if role, _ := pki.RoleOf(cert); role != pki.RoleRAPI {
		t.Errorf("role %q", role)
	}

	// Without a readable RAPI certificate the master's names are used.
	if err := os.Remove(l.RAPICert()); err != nil {
		t.Fatal(err)
	}
	if _, err := RenewRAPICert(l); err != nil {
		t.Fatal(err)
	}
	if c := readLeaf(t, l.RAPICert()); c.Subject.CommonName != "m1" {
		t.Errorf("common name %q, want the master's m1", c.Subject.CommonName)
	}
}

func TestRenewRAPICertNeedsTheCA(t *testing.T) {
	l := newTestCluster(t)
	before, _ := os.ReadFile(l.RAPICert())
	if err := os.Remove(filepath.Join(l.MasterDir(), master.FileCAKey)); err != nil {
		t.Fatal(err)
	}
	_, err := RenewRAPICert(l)
	if ecode.ClassOf(err) != ecode.Environ || !strings.Contains(err.Error(), "master node") {
		t.Fatalf("without the CA key: %v", err)
	}
	if after, _ := os.ReadFile(l.RAPICert()); !bytes.Equal(before, after) {
		t.Error("the certificate changed although renewal failed")
	}
}

func TestRAPICertKeepsOwner(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to give files away")
	}
	l := newTestCluster(t)
	const nobody = 65534
	if err := chownTree(l.RAPIDir(), nobody, nobody); err != nil {
		t.Fatal(err)
	}
	if _, err := RenewRAPICert(l); err != nil {
		t.Fatal(err)
	}
	checkInstalled(t, l, nobody)
}

// testBundle issues a RAPI certificate from the cluster CA for key and
// returns certificate and key as one PEM bundle.
func testBundle(t testing.TB, ca *pki.CA, key crypto.Signer) []byte {
	t.Helper()
	certPEM, err := ca.Issue(pki.IssueRequest{CommonName: "rapi.example", Role: pki.RoleRAPI, PublicKey: key.Public(),
		IPs: []net.IP{net.IPv4(127, 0, 0, 1)}})
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return append(certPEM, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})...)
}

// selfSigned makes a certificate for key valid from notBefore to notAfter
// with the given extended key usages.
func selfSigned(t testing.TB, key crypto.Signer, notBefore, notAfter time.Time, eku ...x509.ExtKeyUsage) []byte {
	t.Helper()
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(7), Subject: pkix.Name{CommonName: "self"},
		NotBefore: notBefore, NotAfter: notAfter, ExtKeyUsage: eku, DNSNames: []string{"self"}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return append(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder})...)
}

func TestInstallRAPICert(t *testing.T) {
	l := newTestCluster(t)
	ca := loadTestCA(t, l)
	key, _ := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	bundle := testBundle(t, ca, key)
	info, err := InstallRAPICert(l, bundle, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	cert := checkInstalled(t, l, os.Geteuid())
	if cert.Subject.CommonName != "rapi.example" || info.Serial != cert.SerialNumber.Text(16) || !info.ClusterCA {
		t.Errorf("installed %s, info %+v", cert.Subject.CommonName, info)
	}

	// A certificate from elsewhere is installed, and reported as not
	// verifiable with the cluster CA.
	now := time.Now()
	other := selfSigned(t, key, now.Add(-time.Hour), now.Add(time.Hour), x509.ExtKeyUsageServerAuth)
	info, err = InstallRAPICert(l, other, now)
	if err != nil {
		t.Fatal(err)
	}
	if info.ClusterCA {
		t.Error("a self-signed certificate is reported as issued by the cluster CA")
	}

	// A refused bundle changes nothing.
	before, _ := os.ReadFile(l.RAPICert())
	if _, err := InstallRAPICert(l, other, now.Add(2*time.Hour)); ecode.ClassOf(err) != ecode.Inval {
		t.Fatalf("expired bundle: %v", err)
	}
	if after, _ := os.ReadFile(l.RAPICert()); !bytes.Equal(before, after) {
		t.Error("a refused bundle replaced the certificate")
	}
}

func TestParseRAPIBundle(t *testing.T) {
	ca, err := pki.NewCA("c1", time.Hour*24)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	ec, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	ec2, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	rsaSmall, _ := rsa.GenerateKey(rand.Reader, 1024)
	_, ed, _ := ed25519.GenerateKey(rand.Reader)
	good := testBundle(t, ca, ec)
	certOnly, keyOnly, _ := bytes.Cut(good, []byte("-----BEGIN PRIVATE KEY"))
	keyOnly = append([]byte("-----BEGIN PRIVATE KEY"), keyOnly...)
	otherKey := testBundle(t, ca, ec2)
	_, otherKeyPEM, _ := bytes.Cut(otherKey, []byte("-----BEGIN PRIVATE KEY"))
	mismatch := append(bytes.Clone(certOnly), append([]byte("-----BEGIN PRIVATE KEY"), otherKeyPEM...)...)
	chain := append(append(bytes.Clone(certOnly), ca.CertPEM()...), keyOnly...)

	tests := []struct {
		name   string
		bundle []byte
		now    time.Time
		want   string // error substring; "" for success
	}{
		{"cert and key", good, now, ""},
		{"key first", append(bytes.Clone(keyOnly), certOnly...), now, ""},
		{"with chain", chain, now, ""},
		{"empty", nil, now, "no certificate"},
		{"garbage", []byte("not pem at all"), now, "no certificate"},
		{"no key", certOnly, now, "0 private keys"},
		{"two keys", append(bytes.Clone(good), keyOnly...), now, "2 private keys"},
		{"key of another cert", mismatch, now, "does not match"},
		{"expired", good, now.Add(48 * time.Hour), "expired"},
		{"not yet valid", good, now.Add(-time.Hour), "not valid before"},
		{"small RSA", selfSigned(t, rsaSmall, now.Add(-time.Hour), now.Add(time.Hour)), now, "1024 bits"},
		{"ed25519", selfSigned(t, ed, now.Add(-time.Hour), now.Add(time.Hour)), now, "ECDSA is needed"},
		{"client only", selfSigned(t, ec, now.Add(-time.Hour), now.Add(time.Hour), x509.ExtKeyUsageClientAuth), now, "serverAuth"},
		{"no EKU", selfSigned(t, ec, now.Add(-time.Hour), now.Add(time.Hour)), now, ""},
		{"encrypted key", append(bytes.Clone(certOnly), pem.EncodeToMemory(&pem.Block{Type: "ENCRYPTED PRIVATE KEY", Bytes: []byte{1}})...), now, "encrypted"},
		{"bad certificate", append(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: []byte{1, 2}}), keyOnly...), now, "invalid certificate"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			certPEM, keyPEM, err := ParseRAPIBundle(tc.bundle, tc.now)
			if tc.want != "" {
				if err == nil || !strings.Contains(err.Error(), tc.want) || ecode.ClassOf(err) != ecode.Inval {
					t.Fatalf("err %v, want an Inval error with %q", err, tc.want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if _, err := tls.X509KeyPair(certPEM, keyPEM); err != nil {
				t.Errorf("returned pair does not load: %v", err)
			}
		})
	}
}

func FuzzParseRAPIBundle(f *testing.F) {
	ca, err := pki.NewCA("c1", time.Hour*24)
	if err != nil {
		f.Fatal(err)
	}
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	good := testBundle(f, ca, key)
	f.Add(good)
	f.Add(append(bytes.Clone(good), ca.CertPEM()...))
	f.Add([]byte("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"))
	f.Add([]byte("-----BEGIN EC PRIVATE KEY-----\n-----END EC PRIVATE KEY-----\n"))
	f.Add([]byte{})
	now := time.Now()
	f.Fuzz(func(t *testing.T, bundle []byte) {
		certPEM, keyPEM, err := ParseRAPIBundle(bundle, now)
		if err != nil {
			if _, ok := ecode.As(err); !ok {
				t.Fatalf("error %v is not classed", err)
			}
			return
		}
		if _, err := tls.X509KeyPair(certPEM, keyPEM); err != nil {
			t.Fatalf("accepted a pair that does not load: %v", err)
		}
	})
}
