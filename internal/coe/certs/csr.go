package certs

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"
	"crypto/x509"
	"encoding/asn1"
	"encoding/pem"
	"strings"
	"unicode"

	"github.com/corral/corral/internal/ecode"
)

// MaxCSRBytes bounds a certificate request: an RSA-4096 request is under
// 2 KiB of PEM.
const MaxCSRBytes = 16 << 10

// Bounds on what a request may name.
const (
	maxNameLen = 128
	maxGroups  = 16
	minRSABits = 2048
	maxRSABits = 8192
)

var (
	oidBasicConstraints = asn1.ObjectIdentifier{2, 5, 29, 19}
	oidKeyUsage         = asn1.ObjectIdentifier{2, 5, 29, 15}
)

// SignCSR signs a user's certificate request (PEM) as a client certificate
// of the cluster: what Magnum's POST /v1/certificates does for `openstack
// coe cluster config`, whose client sends an RSA-2048 request for CN admin,
// O system:masters. The certificate carries the request's common name and
// organizations (Kubernetes' user and groups) and nothing else of it:
// neither its SANs nor its extensions. Requests for a CA, with a bad
// signature, a weak or unknown key, or too large are refused with
// ecode.Inval.
func (ca *CA) SignCSR(csrPEM []byte) ([]byte, error) {
	csr, err := ParseCSR(csrPEM)
	if err != nil {
		return nil, err
	}
	return ca.sign(Request{
		CommonName:    csr.Subject.CommonName,
		Organizations: csr.Subject.Organization,
		Usage:         ClientAuth,
	}, csr.PublicKey)
}

// ParseCSR reads and checks a certificate request as SignCSR does.
func ParseCSR(csrPEM []byte) (*x509.CertificateRequest, error) {
	if len(csrPEM) > MaxCSRBytes {
		return nil, ecode.Errorf(ecode.Inval, "certificate request of %d bytes (at most %d)", len(csrPEM), MaxCSRBytes)
	}
	block, rest := pem.Decode(csrPEM)
	if block == nil || (block.Type != "CERTIFICATE REQUEST" && block.Type != "NEW CERTIFICATE REQUEST") {
		return nil, ecode.Errorf(ecode.Inval, "not a PEM certificate request")
	}
	if len(bytes.TrimSpace(rest)) != 0 {
		return nil, ecode.Errorf(ecode.Inval, "certificate request followed by other data")
	}
	csr, err := x509.ParseCertificateRequest(block.Bytes)
	if err != nil {
		return nil, ecode.Errorf(ecode.Inval, "certificate request does not parse: %w", err)
	}
	if err := csr.CheckSignature(); err != nil {
		return nil, ecode.Errorf(ecode.Inval, "certificate request signature does not verify: %w", err)
	}
	if err := checkCSRKey(csr.PublicKey); err != nil {
		return nil, err
	}
	if err := checkCSRSubject(csr); err != nil {
		return nil, err
	}
	if err := refuseCARequest(csr); err != nil {
		return nil, err
	}
	return csr, nil
}

func checkCSRKey(pub any) error {
	switch k := pub.(type) {
	case *rsa.PublicKey:
		if n := k.N.BitLen(); n < minRSABits || n > maxRSABits {
			return ecode.Errorf(ecode.Inval, "RSA key of %d bits in the certificate request (want %d to %d)", n, minRSABits, maxRSABits)
		}
	case *ecdsa.PublicKey:
		switch k.Curve {
		case elliptic.P256(), elliptic.P384(), elliptic.P521():
		default:
			return ecode.Errorf(ecode.Inval, "ECDSA key on an unsupported curve in the certificate request")
		}
	case ed25519.PublicKey:
	default:
		return ecode.Errorf(ecode.Inval, "certificate request with a %T key (want RSA, ECDSA or Ed25519)", pub)
	}
	return nil
}

func checkCSRSubject(csr *x509.CertificateRequest) error {
	if err := checkName("common name", csr.Subject.CommonName); err != nil {
		return err
	}
	if len(csr.Subject.Organization) > maxGroups {
		return ecode.Errorf(ecode.Inval, "certificate request with %d organizations (at most %d)", len(csr.Subject.Organization), maxGroups)
	}
	for _, o := range csr.Subject.Organization {
		if err := checkName("organization", o); err != nil {
			return err
		}
	}
	return nil
}

// checkName admits the user and group names Kubernetes uses: printable,
// no spaces at the ends, bounded.
func checkName(what, s string) error {
	if s == "" {
		return ecode.Errorf(ecode.Inval, "certificate request without a %s", what)
	}
	if len(s) > maxNameLen {
		return ecode.Errorf(ecode.Inval, "certificate request %s of %d bytes (at most %d)", what, len(s), maxNameLen)
	}
	if strings.TrimSpace(s) != s || strings.IndexFunc(s, func(r rune) bool { return !unicode.IsPrint(r) }) >= 0 {
		return ecode.Errorf(ecode.Inval, "certificate request %s %q has unprintable characters or surrounding spaces", what, s)
	}
	return nil
}

// refuseCARequest refuses requests that ask to be a CA or to sign
// certificates. Nothing a request asks for is ever copied into a
// certificate, so this is about telling the requester, not about safety.
func refuseCARequest(csr *x509.CertificateRequest) error {
	for _, ext := range csr.Extensions {
		switch {
		case ext.Id.Equal(oidBasicConstraints):
			var bc struct {
				IsCA       bool `asn1:"optional"`
				MaxPathLen int  `asn1:"optional,default:-1"`
			}
			if _, err := asn1.Unmarshal(ext.Value, &bc); err != nil {
				return ecode.Errorf(ecode.Inval, "certificate request with unreadable basic constraints: %w", err)
			}
			if bc.IsCA {
				return ecode.Errorf(ecode.Inval, "certificate request asks for a CA certificate: only client certificates are signed")
			}
		case ext.Id.Equal(oidKeyUsage):
			var bits asn1.BitString
			if _, err := asn1.Unmarshal(ext.Value, &bits); err != nil {
				return ecode.Errorf(ecode.Inval, "certificate request with an unreadable key usage: %w", err)
			}
			// keyCertSign is bit 5, cRLSign bit 6 (RFC 5280, 4.2.1.3).
			if bits.At(5) == 1 || bits.At(6) == 1 {
				return ecode.Errorf(ecode.Inval, "certificate request asks to sign certificates: only client certificates are signed")
			}
		}
	}
	return nil
}
