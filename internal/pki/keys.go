package pki

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/corral/corral/internal/atomicfile"
)

// NewKeyPair makes a P-256 key: quick to generate and accepted by every TLS 1.3
// peer. keyPEM is PKCS#8.
func NewKeyPair() (keyPEM []byte, key crypto.Signer, err error) {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("pki: generate key: %w", err)
	}
	keyPEM, err = encodeKey(k)
	if err != nil {
		return nil, nil, err
	}
	return keyPEM, k, nil
}

// NewCSR makes a PEM certificate request for name signed by key. The CA
// ignores the name (see SignCSR); it is there for the operator's eyes.
func NewCSR(key crypto.Signer, name string) ([]byte, error) {
	if key == nil {
		return nil, errors.New("pki: CSR key is missing")
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{
		Subject: pkix.Name{CommonName: name},
	}, key)
	if err != nil {
		return nil, fmt.Errorf("pki: create certificate request: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}), nil
}

// ParsePrivateKeyPEM reads the first private key in keyPEM (PKCS#8, SEC 1 or
// PKCS#1).
func ParsePrivateKeyPEM(keyPEM []byte) (crypto.Signer, error) {
	for rest := keyPEM; ; {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			return nil, errors.New("no private key in PEM input")
		}
		var (
			k   any
			err error
		)
		switch block.Type {
		case "PRIVATE KEY":
			k, err = x509.ParsePKCS8PrivateKey(block.Bytes)
		case "EC PRIVATE KEY":
			k, err = x509.ParseECPrivateKey(block.Bytes)
		case "RSA PRIVATE KEY":
			k, err = x509.ParsePKCS1PrivateKey(block.Bytes)
		default:
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("parse %s: %w", strings.ToLower(block.Type), err)
		}
		s, ok := k.(crypto.Signer)
		if !ok {
			return nil, fmt.Errorf("key type %T cannot sign", k)
		}
		return s, nil
	}
}

func encodeKey(k crypto.Signer) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		return nil, fmt.Errorf("pki: encode private key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}

// WriteKeyPair writes a certificate (0644) and its key (0600) atomically,
// after checking that they belong together.
func WriteKeyPair(certPath, keyPath string, certPEM, keyPEM []byte) error {
	if _, err := tls.X509KeyPair(certPEM, keyPEM); err != nil {
		return fmt.Errorf("pki: certificate and key do not form a pair: %w", err)
	}
	if err := atomicfile.WriteFile(keyPath, keyPEM, 0o600); err != nil {
		return fmt.Errorf("pki: write key: %w", err)
	}
	if err := atomicfile.WriteFile(certPath, certPEM, 0o644); err != nil {
		return fmt.Errorf("pki: write certificate: %w", err)
	}
	return nil
}

// ParseCertificatesPEM returns every CERTIFICATE in pemData, skipping other
// block types; it fails when there is none.
func ParseCertificatesPEM(pemData []byte) ([]*x509.Certificate, error) {
	var certs []*x509.Certificate
	for rest := pemData; ; {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			break
		}
		if block.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("parse certificate %d: %w", len(certs)+1, err)
		}
		certs = append(certs, c)
	}
	if len(certs) == 0 {
		return nil, errors.New("no CERTIFICATE in PEM input")
	}
	return certs, nil
}

// CAPool builds a trust pool from a CA bundle. Every certificate must be a
// CA: a leaf in a root pool would be trusted as itself, which would let a
// misplaced node certificate stand in for the CA.
func CAPool(bundlePEM []byte) (*x509.CertPool, []*x509.Certificate, error) {
	certs, err := ParseCertificatesPEM(bundlePEM)
	if err != nil {
		return nil, nil, fmt.Errorf("pki: CA bundle: %w", err)
	}
	pool := x509.NewCertPool()
	for _, c := range certs {
		if !c.IsCA || !c.BasicConstraintsValid {
			return nil, nil, fmt.Errorf("pki: CA bundle: certificate %q is not a CA", c.Subject.CommonName)
		}
		pool.AddCert(c)
	}
	return pool, certs, nil
}

// RoleOf returns the role a certificate carries. A certificate with no role
// OU, an unknown role, or more than one OU has none.
func RoleOf(cert *x509.Certificate) (Role, bool) {
	if cert == nil || len(cert.Subject.OrganizationalUnit) != 1 {
		return "", false
	}
	v, ok := strings.CutPrefix(cert.Subject.OrganizationalUnit[0], roleOUPrefix)
	if !ok {
		return "", false
	}
	r := Role(v)
	return r, r.Valid()
}

// CertExpiry returns NotAfter of the first certificate in certPEM.
func CertExpiry(certPEM []byte) (time.Time, error) {
	certs, err := ParseCertificatesPEM(certPEM)
	if err != nil {
		return time.Time{}, fmt.Errorf("pki: %w", err)
	}
	return certs[0].NotAfter, nil
}
