package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// endpoint is one end's identity: a self-signed certificate that the other
// end trusts as its only CA, the way Ganeti pins the peer's certificate in
// the CA file of a transfer.
type endpoint struct {
	name     string // subject CN and DNS name, checked by the peer
	cert     tls.Certificate
	leaf     *x509.Certificate
	pemPath  string // certificate and key, for socat's cert=
	certPath string // certificate alone, for the peer's cafile=
}

// newEndpoint makes a fresh key and certificate and writes both PEM files
// into dir.
func newEndpoint(dir, name string) (*endpoint, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generating the key of %s: %w", name, err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: name},
		DNSNames:     []string{name},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(24 * time.Hour),
		// OpenSSL takes a self-signed certificate as a trust anchor only
		// when it may sign certificates.
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("signing the certificate of %s: %w", name, err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, err
	}
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER})
	e := &endpoint{
		name:     name,
		cert:     tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf},
		leaf:     leaf,
		pemPath:  filepath.Join(dir, name+".pem"),
		certPath: filepath.Join(dir, name+".crt"),
	}
	if err := os.WriteFile(e.pemPath, append(certPEM, keyPEM...), 0o600); err != nil {
		return nil, err
	}
	if err := os.WriteFile(e.certPath, certPEM, 0o600); err != nil {
		return nil, err
	}
	return e, nil
}

// pool is a certificate pool holding only this endpoint's certificate.
func (e *endpoint) pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(e.leaf)
	return p
}
