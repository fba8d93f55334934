// Package pki is the cluster's public-key infrastructure: the cluster CA,
// certificates that carry a role, the node join token, the cluster domain
// secret, and the TLS configurations every Corral connection uses.
//
// A certificate names its holder in Subject.CommonName (also repeated as a
// SAN so standard hostname verification applies), the cluster in
// Subject.Organization and its role in exactly one
// Subject.OrganizationalUnit of the form "corral-role=<role>". Trust is a CA
// bundle (several CA certificates in one PEM file) so the CA can rotate.
package pki

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"slices"
	"time"

	"github.com/corral/corral/internal/atomicfile"
)

// Role is what a certificate's holder may do in the cluster. Every
// certificate gets the narrowest role for its job; roles.go says which
// roles each Corral listener accepts.
type Role string

const (
	// RoleMaster is corrald's certificate (master.pem), held by every
	// master candidate: the one role node daemons take calls from.
	RoleMaster Role = "master"
	// RoleMasterCandidate is not issued any more: it was the role of etcd
	// members' certificates. Certificates that still carry it are accepted
	// only where an etcd member's are (see roles.go).
	RoleMasterCandidate Role = "master-candidate"
	RoleNode            Role = "node"
	RoleRAPI            Role = "rapi"
	RoleAdmin           Role = "admin"
	// RoleEtcdMember is an etcd member's peer and server certificate.
	RoleEtcdMember Role = "etcd-member"
	// RoleEtcdClient is corrald's client certificate towards etcd.
	RoleEtcdClient Role = "etcd-client"
	// RoleMigration is a short-lived certificate a node daemon hands to one
	// qemu process for one live migration (qemu's TLS migration). No
	// Corral daemon accepts it: it only proves to the peer qemu that the
	// other end is a node of this cluster.
	RoleMigration Role = "migration"
)

// MigrationCertValidity is how long a migration certificate lives: long
// enough for a slow migration, short enough that a copy left behind by a
// compromised qemu is soon worthless.
const MigrationCertValidity = 2 * time.Hour

// roleOUPrefix marks the OrganizationalUnit that carries the role, so other
// OUs (none today) can never be mistaken for one.
const roleOUPrefix = "corral-role="

// DefaultCertValidity is how long role certificates live when the caller
// does not say: Ganeti's five years, since rotation is an operator action.
const DefaultCertValidity = 5 * 365 * 24 * time.Hour

// clockSkew backdates NotBefore so a freshly issued certificate is accepted by
// a peer whose clock runs a little behind.
const clockSkew = 5 * time.Minute

// Valid reports whether r is one of the known roles.
func (r Role) Valid() bool {
	switch r {
	case RoleMaster, RoleMasterCandidate, RoleNode, RoleRAPI, RoleAdmin, RoleEtcdMember, RoleEtcdClient, RoleMigration:
		return true
	}
	return false
}

// CA is the cluster certificate authority: one certificate and its key.
type CA struct {
	cert    *x509.Certificate
	certPEM []byte
	key     crypto.Signer
	cluster string
}

// IssueRequest describes a role certificate. Every issued certificate is
// valid for both TLS server and client authentication, because node daemons
// and masters act as both.
type IssueRequest struct {
	CommonName string
	Role       Role
	DNSNames   []string
	IPs        []net.IP
	PublicKey  crypto.PublicKey
	ValidFor   time.Duration // 0 means DefaultCertValidity; capped at the CA's expiry
}

// NewCA makes a self-signed P-256 CA for clusterName.
func NewCA(clusterName string, validFor time.Duration) (*CA, error) {
	if clusterName == "" {
		return nil, errors.New("pki: cluster name is empty")
	}
	if validFor <= 0 {
		return nil, fmt.Errorf("pki: CA validity %v is not positive", validFor)
	}
	_, key, err := NewKeyPair()
	if err != nil {
		return nil, err
	}
	serial, err := randomSerial()
	if err != nil {
		return nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject: pkix.Name{
			CommonName:   "corral-ca " + clusterName,
			Organization: []string{clusterName},
		},
		NotBefore:             now.Add(-clockSkew),
		NotAfter:              now.Add(validFor),
		IsCA:                  true,
		BasicConstraintsValid: true,
		// Path length 0: the CA signs leaves only, so a stolen leaf key can
		// never mint further certificates.
		MaxPathLen:     0,
		MaxPathLenZero: true,
		KeyUsage:       x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, fmt.Errorf("pki: create CA certificate: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("pki: parse new CA certificate: %w", err)
	}
	return &CA{cert: cert, certPEM: encodeCert(der), key: key, cluster: clusterName}, nil
}

// LoadCA reads a CA saved by Save. The certificate file may be a bundle; the
// CA is the certificate that matches the key.
func LoadCA(certPath, keyPath string) (*CA, error) {
	certPEM, err := os.ReadFile(certPath)
	if err != nil {
		return nil, fmt.Errorf("pki: read CA certificate: %w", err)
	}
	keyPEM, err := os.ReadFile(keyPath)
	if err != nil {
		return nil, fmt.Errorf("pki: read CA key: %w", err)
	}
	key, err := ParsePrivateKeyPEM(keyPEM)
	if err != nil {
		return nil, fmt.Errorf("pki: CA key %s: %w", keyPath, err)
	}
	certs, err := ParseCertificatesPEM(certPEM)
	if err != nil {
		return nil, fmt.Errorf("pki: CA certificate %s: %w", certPath, err)
	}
	for _, c := range certs {
		if !publicKeysEqual(c.PublicKey, key.Public()) {
			continue
		}
		if !c.IsCA {
			return nil, fmt.Errorf("pki: certificate in %s matching the key is not a CA", certPath)
		}
		cluster := ""
		if len(c.Subject.Organization) > 0 {
			cluster = c.Subject.Organization[0]
		}
		return &CA{cert: c, certPEM: encodeCert(c.Raw), key: key, cluster: cluster}, nil
	}
	return nil, fmt.Errorf("pki: no certificate in %s matches the key in %s", certPath, keyPath)
}

// Save writes the certificate (0644: it is public) and the key (0400), each
// atomically.
func (ca *CA) Save(certPath, keyPath string) error {
	keyPEM, err := encodeKey(ca.key)
	if err != nil {
		return err
	}
	if err := atomicfile.WriteFile(keyPath, keyPEM, 0o400); err != nil {
		return fmt.Errorf("pki: save CA key: %w", err)
	}
	if err := atomicfile.WriteFile(certPath, ca.certPEM, 0o644); err != nil {
		return fmt.Errorf("pki: save CA certificate: %w", err)
	}
	return nil
}

// CertPEM returns the CA certificate in PEM form.
func (ca *CA) CertPEM() []byte { return bytes.Clone(ca.certPEM) }

// Certificate returns the parsed CA certificate.
func (ca *CA) Certificate() *x509.Certificate { return ca.cert }

// ClusterName is the cluster the CA was made for.
func (ca *CA) ClusterName() string { return ca.cluster }

// Issue signs a role certificate for req.PublicKey.
func (ca *CA) Issue(req IssueRequest) ([]byte, error) {
	if req.CommonName == "" {
		return nil, errors.New("pki: certificate common name is empty")
	}
	if !req.Role.Valid() {
		return nil, fmt.Errorf("pki: unknown role %q", req.Role)
	}
	if err := checkPublicKey(req.PublicKey); err != nil {
		return nil, err
	}
	validFor := req.ValidFor
	if validFor == 0 {
		validFor = DefaultCertValidity
	}
	if validFor < 0 {
		return nil, fmt.Errorf("pki: certificate validity %v is negative", validFor)
	}
	serial, err := randomSerial()
	if err != nil {
		return nil, err
	}
	now := time.Now()
	notAfter := now.Add(validFor)
	// A leaf outliving its CA would only fail later, with a confusing error.
	if notAfter.After(ca.cert.NotAfter) {
		notAfter = ca.cert.NotAfter
	}
	dns := slices.Clone(req.DNSNames)
	ips := slices.Clone(req.IPs)
	// The name doubles as a SAN because Go (and every modern verifier)
	// ignores CommonName when checking host names.
	if ip := net.ParseIP(req.CommonName); ip != nil {
		if !slices.ContainsFunc(ips, ip.Equal) {
			ips = append(ips, ip)
		}
	} else if !slices.Contains(dns, req.CommonName) {
		dns = append([]string{req.CommonName}, dns...)
	}
	keyUsage := x509.KeyUsageDigitalSignature
	if _, isRSA := req.PublicKey.(*rsa.PublicKey); isRSA {
		keyUsage |= x509.KeyUsageKeyEncipherment
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject: pkix.Name{
			CommonName:         req.CommonName,
			Organization:       []string{ca.cluster},
			OrganizationalUnit: []string{roleOUPrefix + string(req.Role)},
		},
		NotBefore:             now.Add(-clockSkew),
		NotAfter:              notAfter,
		KeyUsage:              keyUsage,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		BasicConstraintsValid: true,
		DNSNames:              dns,
		IPAddresses:           ips,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, req.PublicKey, ca.key)
	if err != nil {
		return nil, fmt.Errorf("pki: sign certificate for %s: %w", req.CommonName, err)
	}
	return encodeCert(der), nil
}

// SignCSR issues a role certificate for the key in a certificate request.
// Only the key is taken from the request: the name and addresses come from
// the caller, so a node cannot ask for more than the master grants.
func (ca *CA) SignCSR(csrPEM []byte, role Role, name string, ips []net.IP, validFor time.Duration) ([]byte, error) {
	block, _ := pem.Decode(csrPEM)
	if block == nil || block.Type != "CERTIFICATE REQUEST" {
		return nil, errors.New("pki: no CERTIFICATE REQUEST in PEM input")
	}
	csr, err := x509.ParseCertificateRequest(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("pki: parse certificate request: %w", err)
	}
	if err := csr.CheckSignature(); err != nil {
		return nil, fmt.Errorf("pki: certificate request signature: %w", err)
	}
	return ca.Issue(IssueRequest{
		CommonName: name,
		Role:       role,
		IPs:        ips,
		PublicKey:  csr.PublicKey,
		ValidFor:   validFor,
	})
}

// CAFingerprint is the lowercase hex SHA-256 of the first certificate's DER
// in certPEM: the pin a join token carries.
func CAFingerprint(certPEM []byte) (string, error) {
	for rest := certPEM; ; {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			return "", errors.New("pki: no CERTIFICATE in PEM input")
		}
		if block.Type == "CERTIFICATE" {
			return fingerprint(block.Bytes), nil
		}
	}
}

func fingerprint(der []byte) string {
	sum := sha256.Sum256(der)
	return hex.EncodeToString(sum[:])
}

func randomSerial() (*big.Int, error) {
	// 128 random bits, as CA/Browser guidance asks for unpredictable serials.
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
	if err != nil {
		return nil, fmt.Errorf("pki: serial number: %w", err)
	}
	return n.Add(n, big.NewInt(1)), nil
}

func checkPublicKey(pub crypto.PublicKey) error {
	switch k := pub.(type) {
	case *ecdsa.PublicKey:
		return nil
	case ed25519.PublicKey:
		return nil
	case *rsa.PublicKey:
		if k.N.BitLen() < 2048 {
			return fmt.Errorf("pki: RSA key of %d bits is too small", k.N.BitLen())
		}
		return nil
	case nil:
		return errors.New("pki: public key is missing")
	default:
		return fmt.Errorf("pki: unsupported public key type %T", pub)
	}
}

func publicKeysEqual(a, b crypto.PublicKey) bool {
	ka, ok := a.(interface{ Equal(crypto.PublicKey) bool })
	return ok && ka.Equal(b)
}

func encodeCert(der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}
