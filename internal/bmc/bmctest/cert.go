package bmctest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// SelfSignedCert writes a self-signed TLS server certificate for
// 127.0.0.1 named commonName and its key to dir/name.crt and
// dir/name.key, both with mode 0644 so that a server the test runs as
// another user can load them (only ever in a test's directory). A client
// trusts such a certificate by pinning it.
func SelfSignedCert(t testing.TB, dir, name, commonName string) (certFile, keyFile string) {
	t.Helper()
	key := newKey(t)
	tmpl := serverTemplate(1, commonName)
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, name+".crt"), filepath.Join(dir, name+".key")
	writePEM(t, certFile, "CERTIFICATE", der, 0o644)
	writePEM(t, keyFile, "EC PRIVATE KEY", marshalKey(t, key), 0o644)
	return certFile, keyFile
}

// caSignedCert writes a certificate authority (certFile's issuer, in
// caFile) and a server certificate for 127.0.0.1 signed by it: strict TLS
// clients refuse a lone self-signed server certificate.
func caSignedCert(t testing.TB, dir string) (caFile, certFile, keyFile string) {
	t.Helper()
	caKey := newKey(t)
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "corral-bmc test CA"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		IsCA:         true, BasicConstraintsValid: true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatal(err)
	}
	key := newKey(t)
	der, err := x509.CreateCertificate(rand.Reader, serverTemplate(2, "127.0.0.1"), ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caFile, certFile, keyFile = filepath.Join(dir, "ca.pem"), filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	writePEM(t, caFile, "CERTIFICATE", caDER, 0o600)
	writePEM(t, certFile, "CERTIFICATE", der, 0o600)
	writePEM(t, keyFile, "EC PRIVATE KEY", marshalKey(t, key), 0o600)
	return caFile, certFile, keyFile
}

// serverTemplate is a TLS server certificate for 127.0.0.1, valid from an
// hour ago for a day.
func serverTemplate(serial int64, commonName string) *x509.Certificate {
	return &x509.Certificate{
		SerialNumber: big.NewInt(serial),
		Subject:      pkix.Name{CommonName: commonName},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
}

func newKey(t testing.TB) *ecdsa.PrivateKey {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return key
}

func marshalKey(t testing.TB, key *ecdsa.PrivateKey) []byte {
	t.Helper()
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return der
}

// writePEM writes der as one PEM block of type typ.
func writePEM(t testing.TB, path, typ string, der []byte, mode os.FileMode) {
	t.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), mode); err != nil {
		t.Fatal(err)
	}
}
