package certs

import (
	"crypto/ecdsa"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/corral/corral/internal/pki"
)

// testCA is one P-384 CA shared by the tests that only need some CA.
var testCA = sync.OnceValues(func() (*CA, error) { return NewCA("test", ECDSAP384) })

func mustCA(t testing.TB) *CA {
	t.Helper()
	ca, err := testCA()
	if err != nil {
		t.Fatal(err)
	}
	return ca
}

func parseCert(t testing.TB, certPEM []byte) *x509.Certificate {
	t.Helper()
	cs, err := pki.ParseCertificatesPEM(certPEM)
	if err != nil || len(cs) != 1 {
		t.Fatalf("parse certificate: %v (%d)", err, len(cs))
	}
	return cs[0]
}

// verify checks that cert chains to ca for usage u (and, for a server
// certificate, for name).
func verify(ca *CA, certPEM []byte, u x509.ExtKeyUsage, name string) error {
	cs, err := pki.ParseCertificatesPEM(certPEM)
	if err != nil {
		return err
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca.Certificate())
	_, err = cs[0].Verify(x509.VerifyOptions{Roots: pool, DNSName: name, KeyUsages: []x509.ExtKeyUsage{u}})
	return err
}

func TestNewCAKeyTypesAndValidity(t *testing.T) {
	for _, c := range []struct {
		kt   KeyType
		want string
	}{{"", "P-384"}, {ECDSAP384, "P-384"}, {RSA4096, "RSA-4096"}} {
		ca, err := NewCA("k1", c.kt)
		if err != nil {
			t.Fatalf("NewCA(%q): %v", c.kt, err)
		}
		cert := ca.Certificate()
		var got string
		switch k := cert.PublicKey.(type) {
		case *ecdsa.PublicKey:
			got = k.Curve.Params().Name
		case *rsa.PublicKey:
			got = fmt.Sprintf("RSA-%d", k.N.BitLen())
		}
		if got != c.want {
			t.Errorf("NewCA(%q) key = %s, want %s", c.kt, got, c.want)
		}
		if !cert.IsCA || !cert.MaxPathLenZero || cert.KeyUsage&x509.KeyUsageCertSign == 0 {
			t.Errorf("NewCA(%q): IsCA %v MaxPathLenZero %v usage %b", c.kt, cert.IsCA, cert.MaxPathLenZero, cert.KeyUsage)
		}
		if life := cert.NotAfter.Sub(time.Now()); life < CAValidity-time.Hour || life > CAValidity+time.Hour {
			t.Errorf("NewCA(%q) lives %v, want %v", c.kt, life, CAValidity)
		}
		back, err := LoadCA(ca.CertPEM(), ca.KeyPEM())
		if err != nil {
			t.Fatalf("LoadCA: %v", err)
		}
		if !back.Certificate().Equal(cert) {
			t.Error("LoadCA read back another certificate")
		}
	}
	if _, err := NewCA("k1", "dsa-1024"); err == nil {
		t.Error("NewCA accepted key type dsa-1024")
	}
}

func TestLoadCARefusesAForeignKey(t *testing.T) {
	a := mustCA(t)
	b, err := NewCA("other", ECDSAP384)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := LoadCA(a.CertPEM(), b.KeyPEM()); err == nil || !strings.Contains(err.Error(), "does not match") {
		t.Errorf("LoadCA with another CA's key: %v", err)
	}
	leaf, err := a.Issue(Request{CommonName: "x", Usage: ClientAuth})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := LoadCA(leaf.CertPEM, leaf.KeyPEM); err == nil || !strings.Contains(err.Error(), "not a CA") {
		t.Errorf("LoadCA of a leaf: %v", err)
	}
}

func TestBundleCertificates(t *testing.T) {
	spec := BundleSpec{
		ClusterName:   "k8s-1",
		APIAddresses:  []net.IP{net.ParseIP("192.0.2.10")},
		APIFQDN:       "k8s-1.example.org",
		ServiceCIDR:   netip.MustParsePrefix("10.100.0.0/16"),
		EtcdAddresses: []net.IP{net.ParseIP("192.0.2.10")},
		Nodes:         []string{"w1", "w2"},
	}
	b, err := NewBundle(spec)
	if err != nil {
		t.Fatal(err)
	}
	api := parseCert(t, b.APIServer.CertPEM)
	var ips []string
	for _, ip := range api.IPAddresses {
		ips = append(ips, ip.String())
	}
	if want := []string{"192.0.2.10", "10.100.0.1", "127.0.0.1"}; !slices.Equal(ips, want) {
		t.Errorf("API server IP SANs = %v, want %v", ips, want)
	}
	wantDNS := []string{"k8s-1.example.org", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"}
	if !slices.Equal(api.DNSNames, wantDNS) {
		t.Errorf("API server DNS SANs = %v, want %v", api.DNSNames, wantDNS)
	}
	for _, name := range append(wantDNS, "192.0.2.10", "10.100.0.1", "127.0.0.1") {
		if err := verify(b.CA, b.APIServer.CertPEM, x509.ExtKeyUsageServerAuth, name); err != nil {
			t.Errorf("API server certificate for %s: %v", name, err)
		}
	}
	if err := verify(b.CA, b.APIServer.CertPEM, x509.ExtKeyUsageClientAuth, ""); err == nil {
		t.Error("the API server certificate is accepted as a client certificate")
	}
	for _, c := range []struct {
		what string
		kp   KeyPair
		cn   string
		orgs []string
	}{
		{"admin", b.Admin, "admin", []string{"system:masters"}},
		{"controller manager", b.ControllerManager, "system:kube-controller-manager", nil},
		{"scheduler", b.Scheduler, "system:kube-scheduler", nil},
		{"kubelet client", b.APIServerKubeletClient, "kube-apiserver-kubelet-client", []string{"system:masters"}},
		{"etcd client", b.APIServerEtcdClient, "kube-apiserver-etcd-client", nil},
		{"kwok", b.Kwok, "kwok-controller", []string{"system:masters"}},
		{"node w2", b.Nodes["w2"], "system:node:w2", []string{"system:nodes"}},
	} {
		cert := parseCert(t, c.kp.CertPEM)
		if cert.Subject.CommonName != c.cn || !slices.Equal(cert.Subject.Organization, c.orgs) {
			t.Errorf("%s: subject %v, want CN %s O %v", c.what, cert.Subject, c.cn, c.orgs)
		}
		if err := verify(b.CA, c.kp.CertPEM, x509.ExtKeyUsageClientAuth, ""); err != nil {
			t.Errorf("%s as a client: %v", c.what, err)
		}
		if err := verify(b.CA, c.kp.CertPEM, x509.ExtKeyUsageServerAuth, ""); err == nil {
			t.Errorf("%s is accepted as a server certificate", c.what)
		}
		if _, err := tls.X509KeyPair(c.kp.CertPEM, []byte(c.kp.KeyPEM.Reveal())); err != nil {
			t.Errorf("%s: key does not match: %v", c.what, err)
		}
	}
	for _, kp := range []KeyPair{b.EtcdServer, b.EtcdPeer} {
		for _, name := range []string{"127.0.0.1", "192.0.2.10", "localhost"} {
			if err := verify(b.CA, kp.CertPEM, x509.ExtKeyUsageServerAuth, name); err != nil {
				t.Errorf("etcd certificate for %s: %v", name, err)
			}
		}
		if err := verify(b.CA, kp.CertPEM, x509.ExtKeyUsageClientAuth, ""); err != nil {
			t.Errorf("etcd certificate as a peer client: %v", err)
		}
	}
	if block, _ := pem.Decode(b.ServiceAccount.PublicPEM); block == nil || block.Type != "PUBLIC KEY" {
		t.Error("service account public key is not a PEM public key")
	}
	if _, err := pki.ParsePrivateKeyPEM([]byte(b.ServiceAccount.PrivatePEM.Reveal())); err != nil {
		t.Errorf("service account private key: %v", err)
	}
	if s := fmt.Sprintf("%v %+v", b.Admin, b.ServiceAccount); strings.Contains(s, "PRIVATE KEY") {
		t.Errorf("printing a key pair shows the private key: %s", s)
	}
}

func TestAPIServerSANsDefaultServiceNetwork(t *testing.T) {
	_, ips, err := APIServerSANs(nil, "", netip.Prefix{})
	if err != nil {
		t.Fatal(err)
	}
	if len(ips) != 2 || ips[0].String() != "10.96.0.1" || ips[1].String() != "127.0.0.1" {
		t.Errorf("SANs without addresses = %v, want [10.96.0.1 127.0.0.1]", ips)
	}
	if _, _, err := APIServerSANs(nil, "", netip.MustParsePrefix("10.0.0.1/32")); err == nil {
		t.Error("a /32 service network has no address for the API, yet it was accepted")
	}
}

func TestLeafNeverOutlivesItsCA(t *testing.T) {
	ca := mustCA(t)
	kp, err := ca.Issue(Request{CommonName: "long", Usage: ClientAuth, ValidFor: 50 * 365 * 24 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if got := parseCert(t, kp.CertPEM).NotAfter; got.After(ca.Certificate().NotAfter) {
		t.Errorf("leaf expires %v, after its CA (%v)", got, ca.Certificate().NotAfter)
	}
}

func TestSecretsPrintRedacted(t *testing.T) {
	ca := mustCA(t)
	if s := fmt.Sprint(ca.KeyPEM()); s != "<redacted>" {
		t.Errorf("CA key prints as %q", s)
	}
}

// BenchmarkNewBundle is the certificate part of a cluster create: a CA
// and the dozen certificates and keys of its control plane.
func BenchmarkNewBundle(b *testing.B) {
	for _, kt := range []KeyType{ECDSAP384, RSA4096} {
		b.Run(string(kt), func(b *testing.B) {
			spec := BundleSpec{ClusterName: "bench", KeyType: kt, APIAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, Nodes: []string{"w1", "w2", "w3"}}
			for b.Loop() {
				if _, err := NewBundle(spec); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
