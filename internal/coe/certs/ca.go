// Package certs is the public-key infrastructure of one COE (Kubernetes)
// cluster: its own CA, which Corral's cluster CA has nothing to do with,
// the certificates of the control plane's components and of the cluster's
// users, the signing of users' certificate requests, kubeconfig files, and
// where the CA's private key is kept (KeyStore).
//
// The CA is ECDSA P-384 unless RSA-4096 is asked for and lives ten years,
// as Magnum's does. Leaf keys are ECDSA P-256: quick to make and accepted
// by every Kubernetes component. Private keys cross this package's API as
// secret.Secret (PEM) so that they print redacted.
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
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"time"

	"github.com/corral/corral/internal/ecode"
	"github.com/corral/corral/internal/pki"
	"github.com/corral/corral/internal/secret"
)

// KeyType is the algorithm of a cluster CA's key.
type KeyType string

const (
	// ECDSAP384 is the default CA key.
	ECDSAP384 KeyType = "ecdsa-p384"
	// RSA4096 is for clients that cannot verify ECDSA.
	RSA4096 KeyType = "rsa-4096"
)

// Validities. A leaf never outlives the CA that signed it.
const (
	CAValidity   = 10 * 365 * 24 * time.Hour
	LeafValidity = 5 * 365 * 24 * time.Hour
)

// clockSkew backdates NotBefore so a certificate issued now is accepted by
// a machine whose clock runs a little behind.
const clockSkew = 5 * time.Minute

// KeyPair is a certificate and its private key, both PEM.
type KeyPair struct {
	CertPEM []byte
	KeyPEM  secret.Secret
}

// Usage says which TLS side a certificate is for.
type Usage int

const (
	ClientAuth Usage = 1 << iota
	ServerAuth
)

// CA is a cluster's certificate authority.
type CA struct {
	cert    *x509.Certificate
	certPEM []byte
	key     crypto.Signer
	keyPEM  secret.Secret
}

// NewCA makes a self-signed CA for the cluster (its name goes in the
// subject, for an operator's eyes only).
func NewCA(clusterName string, kt KeyType) (*CA, error) {
	if clusterName == "" {
		return nil, ecode.Errorf(ecode.Inval, "certs: cluster name is empty")
	}
	key, err := newCAKey(kt)
	if err != nil {
		return nil, err
	}
	serial, err := randomSerial()
	if err != nil {
		return nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: clusterName + " kubernetes CA", Organization: []string{"corral-coe"}},
		NotBefore:             now.Add(-clockSkew),
		NotAfter:              now.Add(CAValidity),
		IsCA:                  true,
		BasicConstraintsValid: true,
		// Leaves only: a stolen leaf key cannot mint certificates.
		MaxPathLen:     0,
		MaxPathLenZero: true,
		KeyUsage:       x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, fmt.Errorf("certs: create the CA certificate: %w", err)
	}
	keyPEM, err := encodeKey(key)
	if err != nil {
		return nil, err
	}
	return LoadCA(encodeCert(der), keyPEM)
}

func newCAKey(kt KeyType) (crypto.Signer, error) {
	switch kt {
	case ECDSAP384, "":
		k, err := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
		if err != nil {
			return nil, fmt.Errorf("certs: generate the CA key: %w", err)
		}
		return k, nil
	case RSA4096:
		k, err := rsa.GenerateKey(rand.Reader, 4096)
		if err != nil {
			return nil, fmt.Errorf("certs: generate the CA key: %w", err)
		}
		return k, nil
	}
	return nil, ecode.Errorf(ecode.Inval, "certs: unknown CA key type %q (want %s or %s)", kt, ECDSAP384, RSA4096)
}

// LoadCA reads a CA back from its certificate and private key.
func LoadCA(certPEM []byte, keyPEM secret.Secret) (*CA, error) {
	certs, err := pki.ParseCertificatesPEM(certPEM)
	if err != nil {
		return nil, fmt.Errorf("certs: CA certificate: %w", err)
	}
	if len(certs) != 1 {
		return nil, fmt.Errorf("certs: want one CA certificate, got %d", len(certs))
	}
	cert := certs[0]
	if !cert.IsCA {
		return nil, errors.New("certs: the certificate is not a CA")
	}
	key, err := pki.ParsePrivateKeyPEM([]byte(keyPEM.Reveal()))
	if err != nil {
		return nil, fmt.Errorf("certs: CA key: %w", err)
	}
	if !publicKeysEqual(cert.PublicKey, key.Public()) {
		return nil, errors.New("certs: the CA key does not match its certificate")
	}
	return &CA{cert: cert, certPEM: encodeCert(cert.Raw), key: key, keyPEM: keyPEM}, nil
}

// TrustAnchor is a CA of which only the certificate is known: what a node
// writes as the cluster's ca.crt. It cannot issue or sign.
func TrustAnchor(certPEM []byte) (*CA, error) {
	certs, err := pki.ParseCertificatesPEM(certPEM)
	if err != nil {
		return nil, fmt.Errorf("certs: CA certificate: %w", err)
	}
	if len(certs) != 1 || !certs[0].IsCA {
		return nil, ecode.Errorf(ecode.Inval, "certs: want one CA certificate, got %d certificates", len(certs))
	}
	return &CA{cert: certs[0], certPEM: encodeCert(certs[0].Raw)}, nil
}

// CertPEM is the CA certificate, the trust anchor of the cluster's clients.
func (ca *CA) CertPEM() []byte { return bytes.Clone(ca.certPEM) }

// KeyPEM is the CA's private key.
func (ca *CA) KeyPEM() secret.Secret { return ca.keyPEM }

// Certificate is the parsed CA certificate.
func (ca *CA) Certificate() *x509.Certificate { return ca.cert }

// Request describes a leaf certificate.
type Request struct {
	CommonName    string
	Organizations []string
	DNSNames      []string
	IPs           []net.IP
	Usage         Usage
	// ValidFor is LeafValidity when zero; capped at the CA's expiry.
	ValidFor time.Duration
}

// Issue makes a new P-256 key and a certificate for it.
func (ca *CA) Issue(req Request) (KeyPair, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return KeyPair{}, fmt.Errorf("certs: generate a key: %w", err)
	}
	certPEM, err := ca.sign(req, key.Public())
	if err != nil {
		return KeyPair{}, err
	}
	keyPEM, err := encodeKey(key)
	if err != nil {
		return KeyPair{}, err
	}
	return KeyPair{CertPEM: certPEM, KeyPEM: keyPEM}, nil
}

// sign certifies pub for req. Nothing of a certificate request's own
// extensions ever reaches the certificate: it carries exactly req.
func (ca *CA) sign(req Request, pub crypto.PublicKey) ([]byte, error) {
	if req.CommonName == "" {
		return nil, ecode.Errorf(ecode.Inval, "certs: certificate without a common name")
	}
	if req.Usage&(ClientAuth|ServerAuth) == 0 {
		return nil, fmt.Errorf("certs: certificate for %q has no usage", req.CommonName)
	}
	if ca.key == nil {
		return nil, ecode.Errorf(ecode.State, "certs: the CA of %q is a trust anchor only: its key is not here", req.CommonName)
	}
	serial, err := randomSerial()
	if err != nil {
		return nil, err
	}
	validFor := req.ValidFor
	if validFor <= 0 {
		validFor = LeafValidity
	}
	now := time.Now()
	notAfter := now.Add(validFor)
	if notAfter.After(ca.cert.NotAfter) {
		notAfter = ca.cert.NotAfter
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: req.CommonName, Organization: req.Organizations},
		NotBefore:             now.Add(-clockSkew),
		NotAfter:              notAfter,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageDigitalSignature,
		DNSNames:              req.DNSNames,
		IPAddresses:           req.IPs,
	}
	if _, isRSA := pub.(*rsa.PublicKey); isRSA {
		tmpl.KeyUsage |= x509.KeyUsageKeyEncipherment
	}
	if req.Usage&ServerAuth != 0 {
		tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageServerAuth)
	}
	if req.Usage&ClientAuth != 0 {
		tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageClientAuth)
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, pub, ca.key)
	if err != nil {
		return nil, fmt.Errorf("certs: sign the certificate of %q: %w", req.CommonName, err)
	}
	return encodeCert(der), nil
}

func randomSerial() (*big.Int, error) {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, fmt.Errorf("certs: serial number: %w", err)
	}
	return n.Add(n, big.NewInt(1)), nil
}

func encodeCert(der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

func encodeKey(k crypto.Signer) (secret.Secret, error) {
	der, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		return "", fmt.Errorf("certs: encode a private key: %w", err)
	}
	return secret.Secret(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})), nil
}

func publicKeysEqual(a, b crypto.PublicKey) bool {
	ak, ok := a.(interface{ Equal(crypto.PublicKey) bool })
	return ok && ak.Equal(b)
}
