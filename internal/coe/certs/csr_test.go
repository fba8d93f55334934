package certs

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/json"
	"encoding/pem"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/corral/corral/internal/ecode"
	"github.com/corral/corral/internal/secret"
)

// rsa2048 is the key python-magnumclient makes for `cluster config`.
var rsa2048 = sync.OnceValues(func() (*rsa.PrivateKey, error) { return rsa.GenerateKey(rand.Reader, 2048) })

func mustRSA(t testing.TB) *rsa.PrivateKey {
	t.Helper()
	k, err := rsa2048()
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func makeCSR(t testing.TB, key crypto.Signer, tmpl *x509.CertificateRequest) []byte {
	t.Helper()
	der, err := x509.CreateCertificateRequest(rand.Reader, tmpl, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der})
}

// magnumCSR is the request python-magnumclient sends: CN admin, O
// system:masters, no extensions.
func magnumCSR(t testing.TB) []byte {
	return makeCSR(t, mustRSA(t), &x509.CertificateRequest{
		Subject: pkix.Name{CommonName: "admin", Organization: []string{"system:masters"}},
	})
}

func TestSignCSROfTheMagnumClient(t *testing.T) {
	ca := mustCA(t)
	key := mustRSA(t)
	csr := makeCSR(t, key, &x509.CertificateRequest{
		Subject: pkix.Name{CommonName: "admin", Organization: []string{"system:masters"}},
		// Asked for, never granted: a client certificate names no host.
		DNSNames: []string{"evil.example.org"},
	})
	certPEM, err := ca.SignCSR(csr)
	if err != nil {
		t.Fatalf("SignCSR: %v", err)
	}
	cert := parseCert(t, certPEM)
	if cert.Subject.CommonName != "admin" || !slices.Equal(cert.Subject.Organization, []string{"system:masters"}) {
		t.Errorf("subject = %v", cert.Subject)
	}
	if cert.IsCA || len(cert.DNSNames) != 0 || !slices.Equal(cert.ExtKeyUsage, []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}) {
		t.Errorf("IsCA %v, DNS SANs %v, ext usage %v: want a plain client certificate", cert.IsCA, cert.DNSNames, cert.ExtKeyUsage)
	}
	if !key.PublicKey.Equal(cert.PublicKey) {
		t.Error("the certificate is for another key than the request's")
	}
	if err := verify(ca, certPEM, x509.ExtKeyUsageClientAuth, ""); err != nil {
		t.Errorf("signed certificate does not verify as a client: %v", err)
	}
}

func TestSignCSRRefuses(t *testing.T) {
	ca := mustCA(t)
	key := mustRSA(t)
	bc, _ := asn1.Marshal(struct{ IsCA bool }{true})
	certSign, _ := asn1.Marshal(asn1.BitString{Bytes: []byte{0x04}, BitLength: 6}) // bit 5: keyCertSign
	weak, err := rsa.GenerateKey(rand.Reader, 1024)
	if err != nil {
		t.Fatal(err)
	}
	p224, _ := ecdsa.GenerateKey(elliptic.P224(), rand.Reader)
	good := magnumCSR(t)
	block, _ := pem.Decode(good)
	tampered := bytes.Clone(block.Bytes)
	tampered[len(tampered)-5] ^= 0x40 // in the signature, at the end of the DER
	subj := pkix.Name{CommonName: "admin", Organization: []string{"system:masters"}}
	for _, c := range []struct {
		name string
		csr  []byte
		want string
	}{
		{"CA request", makeCSR(t, key, &x509.CertificateRequest{Subject: subj,
			ExtraExtensions: []pkix.Extension{{Id: oidBasicConstraints, Critical: true, Value: bc}}}), "asks for a CA"},
		{"certificate signing usage", makeCSR(t, key, &x509.CertificateRequest{Subject: subj,
			ExtraExtensions: []pkix.Extension{{Id: oidKeyUsage, Critical: true, Value: certSign}}}), "asks to sign certificates"},
		{"bad signature", pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: tampered}), "signature does not verify"},
		{"huge input", append(bytes.Repeat([]byte(" "), MaxCSRBytes), good...), "at most"},
		{"RSA-1024", makeCSR(t, weak, &x509.CertificateRequest{Subject: subj}), "1024 bits"},
		{"P-224", makeCSR(t, p224, &x509.CertificateRequest{Subject: subj}), "unsupported curve"},
		{"no common name", makeCSR(t, key, &x509.CertificateRequest{Subject: pkix.Name{Organization: []string{"system:masters"}}}), "without a common name"},
		{"control characters", makeCSR(t, key, &x509.CertificateRequest{Subject: pkix.Name{CommonName: "ad\nmin"}}), "unprintable"},
		{"not PEM", []byte("admin please"), "not a PEM certificate request"},
		{"a certificate", ca.CertPEM(), "not a PEM certificate request"},
		{"trailing data", append(bytes.Clone(good), "-----BEGIN CERTIFICATE REQUEST-----\n"...), "followed by other data"},
	} {
		_, err := ca.SignCSR(c.csr)
		if err == nil {
			t.Errorf("%s: signed", c.name)
			continue
		}
		if ecode.ClassOf(err) != ecode.Inval || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v (class %s), want %s saying %q", c.name, err, ecode.ClassOf(err), ecode.Inval, c.want)
		}
	}
}

// FuzzSignCSR: whatever the input, SignCSR either refuses it as invalid
// input or returns a client certificate, never a CA, for the request's own
// key, that chains to the CA.
func FuzzSignCSR(f *testing.F) {
	ca := mustCA(f)
	good := magnumCSR(f)
	f.Add(good)
	ec, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	f.Add(makeCSR(f, ec, &x509.CertificateRequest{Subject: pkix.Name{CommonName: "system:node:w1", Organization: []string{"system:nodes"}}}))
	bc, _ := asn1.Marshal(struct{ IsCA bool }{true})
	f.Add(makeCSR(f, ec, &x509.CertificateRequest{Subject: pkix.Name{CommonName: "x"},
		ExtraExtensions: []pkix.Extension{{Id: oidBasicConstraints, Value: bc}}}))
	f.Add(ca.CertPEM())
	f.Add([]byte("-----BEGIN CERTIFICATE REQUEST-----\nMIIB\n-----END CERTIFICATE REQUEST-----\n"))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, in []byte) {
		certPEM, err := ca.SignCSR(in)
		if err != nil {
			if ecode.ClassOf(err) != ecode.Inval {
				t.Fatalf("refused with class %s, want %s: %v", ecode.ClassOf(err), ecode.Inval, err)
			}
			return
		}
		csr, err := ParseCSR(in)
		if err != nil {
			t.Fatalf("signed a request ParseCSR refuses: %v", err)
		}
		cert := parseCert(t, certPEM)
		if cert.IsCA || cert.KeyUsage&x509.KeyUsageCertSign != 0 {
			t.Fatal("signed a CA certificate")
		}
		if !slices.Equal(cert.ExtKeyUsage, []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}) || len(cert.DNSNames)+len(cert.IPAddresses)+len(cert.URIs)+len(cert.EmailAddresses) != 0 {
			t.Fatalf("not a plain client certificate: usage %v", cert.ExtKeyUsage)
		}
		if !publicKeysEqual(cert.PublicKey, csr.PublicKey) {
			t.Fatal("certificate for another key than the request's")
		}
		if err := verify(ca, certPEM, x509.ExtKeyUsageClientAuth, ""); err != nil {
			t.Fatalf("does not chain to the CA: %v", err)
		}
	})
}

// TestSignCSRFromTheRealMagnumClient signs what python-magnumclient's own
// code makes for `openstack coe cluster config`, when it is installed.
func TestSignCSRFromTheRealMagnumClient(t *testing.T) {
	// Debian's python3, where python3-magnumclient installs.
	out, err := exec.Command("/usr/bin/python3", "-c",
		"import json; from magnumclient.common import utils; print(json.dumps(utils.generate_csr_and_key()))").Output()
	if err != nil {
		t.Skipf("python3-magnumclient is not usable: %v", err)
	}
	var tls struct{ CSR, Key string }
	if err := json.Unmarshal(out, &tls); err != nil {
		t.Fatal(err)
	}
	ca := mustCA(t)
	certPEM, err := ca.SignCSR([]byte(tls.CSR))
	if err != nil {
		t.Fatalf("SignCSR of the magnum client's request: %v", err)
	}
	cert := parseCert(t, certPEM)
	if cert.Subject.CommonName != "admin" || !slices.Equal(cert.Subject.Organization, []string{"system:masters"}) {
		t.Errorf("subject %v", cert.Subject)
	}
	// The client pairs the certificate with its key in the kubeconfig.
	if _, err := Kubeconfig("k", "https://127.0.0.1:6443", ca.CertPEM(), certPEM, secret.Secret(tls.Key)); err != nil {
		t.Errorf("the signed certificate does not pair with the client's key: %v", err)
	}
}
