package pki

// Signed certificates and transfer certificates of inter-cluster moves.
//
// A transfer certificate is self-signed and made per move by the node that
// sends or receives the disks; the peer node pins it exactly. It reaches the
// other cluster through the operator's move tool, so it travels signed with
// the domain secret: "X-Ganeti-Signature: <salt>/<hmac>", an empty line, and
// the certificate as PEM, Ganeti's format. The HMAC covers the canonical PEM
// (the DER re-encoded as 64-column base64), not the bytes received, so a PEM
// that was reflowed, given CRLF line ends or a comment on the way still
// verifies, as it does on a Ganeti cluster.

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"slices"
	"strings"
	"time"

	"github.com/corral/corral/internal/ecode"
	"github.com/corral/corral/internal/secret"
)

// x509SignatureHeader names the header line of a signed certificate.
const x509SignatureHeader = "X-Ganeti-Signature"

// maxSignedX509Len bounds a signed certificate. A transfer certificate is
// under 2 KiB even with a text dump before it; the bound stops a hostile
// request from making us scan megabytes.
const maxSignedX509Len = 64 << 10

// MaxTransferCertValidity caps the life of a transfer certificate: long
// enough for the slowest move, short enough that a leaked key soon stops
// mattering.
const MaxTransferCertValidity = 7 * 24 * time.Hour

// signedX509ClockSkew is how far in the future a received certificate may
// start: the two clusters' clocks need not agree, and the peer made the
// certificate a moment ago by its own clock.
const signedX509ClockSkew = 5 * time.Minute

// transferCertBackdate lets a peer whose clock runs a little behind accept a
// certificate made a moment ago.
const transferCertBackdate = time.Minute

// transferCertKeyBits is the RSA key size of transfer certificates. RSA, not
// the package's usual P-256, because the peer may be a Ganeti node whose
// tooling expects it.
const transferCertKeyBits = 2048

// SignX509 signs the first certificate in certPEM with the domain secret,
// using a fresh salt. The result is Ganeti's signed format over the
// canonical PEM of the certificate.
func SignX509(cds secret.Secret, certPEM []byte) (string, error) {
	cert, err := firstCertificate(certPEM)
	if err != nil {
		return "", err
	}
	canonical := encodeCert(cert.Raw)
	salt := NewSalt()
	return x509SignatureHeader + ": " + salt + "/" + Sha1Hmac(cds, string(canonical), salt) + "\n\n" + string(canonical), nil
}

// LoadSignedX509 checks a signed certificate from the other cluster and
// returns the certificate. The signature is checked before the dates, so a
// certificate from a cluster with another domain secret is reported as that
// whatever its dates. A certificate that starts within signedX509ClockSkew
// (5 minutes) after now is accepted.
func LoadSignedX509(cds secret.Secret, signed string, now time.Time) (*x509.Certificate, error) {
	if len(signed) > maxSignedX509Len {
		return nil, ecode.Errorf(ecode.Inval, "Signed X509 certificate is too long (%d bytes, at most %d)", len(signed), maxSignedX509Len)
	}
	salt, digest, ok := x509Signature(signed)
	if !ok {
		return nil, ecode.Errorf(ecode.Inval, "X509 certificate signature is missing")
	}
	cert, err := firstCertificate([]byte(signed))
	if err != nil {
		return nil, err
	}
	if !VerifySha1Hmac(cds, string(encodeCert(cert.Raw)), salt, digest) {
		return nil, ecode.Errorf(ecode.Inval, "X509 certificate signature is invalid: the clusters may not share the same domain secret")
	}
	if now.After(cert.NotAfter) {
		return nil, ecode.Errorf(ecode.Inval, "X509 certificate expired at %s", cert.NotAfter.UTC().Format(time.RFC3339))
	}
	if now.Add(signedX509ClockSkew).Before(cert.NotBefore) {
		return nil, ecode.Errorf(ecode.Inval, "X509 certificate is not valid before %s (now %s, allowed clock skew %s)",
			cert.NotBefore.UTC().Format(time.RFC3339), now.UTC().Format(time.RFC3339), signedX509ClockSkew)
	}
	return cert, nil
}

// x509Signature finds the signature header among the lines before the PEM
// armour. Ganeti scans the same way: any line up to the first one starting
// with "---" may carry it, in any letter case.
func x509Signature(signed string) (salt, digest string, ok bool) {
	signed = strings.ReplaceAll(signed, "\r\n", "\n")
	signed = strings.ReplaceAll(signed, "\r", "\n")
	for line := range strings.SplitSeq(signed, "\n") {
		if strings.HasPrefix(line, "---") {
			break
		}
		if salt, digest, ok = parseSignatureLine(strings.TrimSpace(line)); ok {
			return salt, digest, true
		}
	}
	return "", "", false
}

func parseSignatureLine(line string) (salt, digest string, ok bool) {
	name, rest, found := strings.Cut(line, ":")
	if !found || !strings.EqualFold(name, x509SignatureHeader) {
		return "", "", false
	}
	salt, digest, found = strings.Cut(strings.TrimLeft(rest, " \t\v\f"), "/")
	if !found || !alnum(salt) || !alnum(digest) {
		return "", "", false
	}
	return salt, digest, true
}

func alnum(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

// firstCertificate parses the first certificate block in data, skipping
// text and blocks of other types around it as OpenSSL's loader does.
func firstCertificate(data []byte) (*x509.Certificate, error) {
	for rest := data; ; {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			return nil, ecode.Errorf(ecode.Inval, "Text holds no PEM X509 certificate")
		}
		// "X509 CERTIFICATE" is the older label some tools still write.
		if block.Type != "CERTIFICATE" && block.Type != "X509 CERTIFICATE" {
			continue
		}
		cert, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, ecode.Errorf(ecode.Inval, "Invalid X509 certificate: %w", err)
		}
		return cert, nil
	}
}

// TransferStreamOU is the organizational unit of Corral's transfer
// certificates: it tells a peer that this end speaks Corral's own disk
// stream. Ganeti's transfer certificates carry no such unit, so a peer
// whose certificate lacks it gets Ganeti's stream (impexp.StreamFor). The
// certificate travels signed with the cluster domain secret, so the unit
// cannot be added or removed on the way.
const TransferStreamOU = "corral-stream=1"

// GanetiTransferName is the host name Ganeti 3.0's exporting socat checks
// the importer's certificate against (its X509_CERT_CN, whatever the
// importer's real name): Corral's transfer certificates list it as an
// extra DNS name so that Ganeti can send to a Corral node.
const GanetiTransferName = "ganeti.example.com"

// IsCorralTransferCert reports whether c is a transfer certificate made by
// Corral (it carries TransferStreamOU).
func IsCorralTransferCert(c *x509.Certificate) bool {
	return c != nil && slices.Contains(c.Subject.OrganizationalUnit, TransferStreamOU)
}

// NewTransferCert makes a self-signed certificate and its key (PKCS#8 PEM)
// for one transfer: CN and first DNS name cn, then GanetiTransferName, plus
// an IP address SAN when cn is an address, and the unit TransferStreamOU;
// valid from a minute before now for validity, at most
// MaxTransferCertValidity. The serial is now in Unix seconds, as Ganeti
// numbers these certificates; the peer pins the whole certificate, so the
// serial need not be unpredictable.
func NewTransferCert(cn string, validity time.Duration, now time.Time) (certPEM, keyPEM []byte, err error) {
	ip := net.ParseIP(cn)
	if ip == nil && !ValidNodeName(cn) {
		return nil, nil, ecode.Errorf(ecode.Inval, "Transfer certificate name %q is neither a host name nor an IP address", truncate(cn))
	}
	if validity <= 0 {
		return nil, nil, ecode.Errorf(ecode.Inval, "Transfer certificate validity %s is not positive", validity)
	}
	validity = min(validity, MaxTransferCertValidity)
	if now.Unix() <= 0 {
		return nil, nil, ecode.Errorf(ecode.Inval, "Transfer certificate time %s is before 1970", now.UTC().Format(time.RFC3339))
	}
	key, err := rsa.GenerateKey(rand.Reader, transferCertKeyBits)
	if err != nil {
		return nil, nil, fmt.Errorf("pki: generate transfer key: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:       big.NewInt(now.Unix()),
		Subject:            pkix.Name{CommonName: cn, OrganizationalUnit: []string{TransferStreamOU}},
		NotBefore:          now.Add(-transferCertBackdate),
		NotAfter:           now.Add(validity),
		SignatureAlgorithm: x509.SHA256WithRSA,
		KeyUsage:           x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		// Both: the exporting node connects and the importing one listens,
		// and each presents its transfer certificate.
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		DNSNames:    []string{cn, GanetiTransferName},
	}
	if ip != nil {
		tmpl.IPAddresses = []net.IP{ip}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, nil, fmt.Errorf("pki: create transfer certificate: %w", err)
	}
	keyPEM, err = encodeKey(key)
	if err != nil {
		return nil, nil, err
	}
	return encodeCert(der), keyPEM, nil
}
