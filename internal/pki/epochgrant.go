package pki

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// An EpochGrant is the proof a node daemon asks for before it raises the
// master epoch it accepts: a statement that the master named Master holds
// Epoch, signed with the cluster CA's key. Only corrald holds that key
// (master/ca.key, readable by corral-master alone), and it signs a grant
// only after its write of the new epoch to the store succeeded under its
// election term, so an identity that merely holds a certificate of the
// cluster (an etcd member's, a node's, or even the master certificate
// copied without the CA key) cannot fence the real master out of a node.
type EpochGrant struct {
	Cluster string `json:"cluster"`
	Epoch   int64  `json:"epoch"`
	// Master is the candidate that won (or the master node on a cluster
	// without election); Token is its election term's fencing token (0
	// without election). Both are for the node's log.
	Master string `json:"master"`
	Token  int64  `json:"token,omitempty"`
	Issued int64  `json:"issued"` // unix seconds
}

// epochGrantContext separates grant signatures from anything else the CA
// key signs (certificates are DER and never start with this).
const epochGrantContext = "corral-epoch-grant-v1\x00"

// MaxEpochGrantLen bounds an encoded grant, so a header cannot make a node
// parse or verify something large.
const MaxEpochGrantLen = 2048

// SignEpochGrant signs g with the CA's key and encodes it for an HTTP
// header: base64url(JSON) "." base64url(signature).
func (ca *CA) SignEpochGrant(g EpochGrant) (string, error) {
	if g.Epoch <= 0 {
		return "", fmt.Errorf("pki: epoch grant for epoch %d", g.Epoch)
	}
	if g.Cluster == "" {
		g.Cluster = ca.cluster
	}
	payload, err := json.Marshal(g)
	if err != nil {
		return "", fmt.Errorf("pki: encode epoch grant: %w", err)
	}
	sig, err := signBytes(ca.key, append([]byte(epochGrantContext), payload...))
	if err != nil {
		return "", fmt.Errorf("pki: sign epoch grant: %w", err)
	}
	s := base64.RawURLEncoding.EncodeToString(payload) + "." + base64.RawURLEncoding.EncodeToString(sig)
	if len(s) > MaxEpochGrantLen {
		return "", fmt.Errorf("pki: epoch grant is %d bytes, over %d", len(s), MaxEpochGrantLen)
	}
	return s, nil
}

// ErrBadEpochGrant is returned for a grant that does not parse or whose
// signature no CA of the bundle made.
var ErrBadEpochGrant = errors.New("invalid master epoch grant")

// VerifyEpochGrant checks s against the CA certificates cas (the node's
// trusted bundle) and returns the grant it carries.
func VerifyEpochGrant(cas []*x509.Certificate, s string) (EpochGrant, error) {
	var g EpochGrant
	if s == "" {
		return g, fmt.Errorf("%w: none given", ErrBadEpochGrant)
	}
	if len(s) > MaxEpochGrantLen {
		return g, fmt.Errorf("%w: longer than %d bytes", ErrBadEpochGrant, MaxEpochGrantLen)
	}
	p64, s64, ok := strings.Cut(s, ".")
	if !ok {
		return g, fmt.Errorf("%w: not PAYLOAD.SIGNATURE", ErrBadEpochGrant)
	}
	payload, err := base64.RawURLEncoding.DecodeString(p64)
	if err != nil {
		return g, fmt.Errorf("%w: payload: %w", ErrBadEpochGrant, err)
	}
	sig, err := base64.RawURLEncoding.DecodeString(s64)
	if err != nil {
		return g, fmt.Errorf("%w: signature: %w", ErrBadEpochGrant, err)
	}
	signed := append([]byte(epochGrantContext), payload...)
	verified := false
	for _, ca := range cas {
		if verifyBytes(ca, signed, sig) == nil {
			verified = true
			break
		}
	}
	if !verified {
		return g, fmt.Errorf("%w: not signed by the cluster CA", ErrBadEpochGrant)
	}
	if err := json.Unmarshal(payload, &g); err != nil {
		return g, fmt.Errorf("%w: payload: %w", ErrBadEpochGrant, err)
	}
	if g.Epoch <= 0 {
		return g, fmt.Errorf("%w: epoch %d", ErrBadEpochGrant, g.Epoch)
	}
	return g, nil
}

// signBytes signs msg with key in the scheme verifyBytes checks for the
// matching certificate: SHA-256 for ECDSA and RSA (PKCS #1 v1.5), pure
// Ed25519.
func signBytes(key crypto.Signer, msg []byte) ([]byte, error) {
	if _, ok := key.Public().(ed25519.PublicKey); ok {
		return key.Sign(rand.Reader, msg, crypto.Hash(0))
	}
	sum := sha256.Sum256(msg)
	return key.Sign(rand.Reader, sum[:], crypto.SHA256)
}

func verifyBytes(cert *x509.Certificate, msg, sig []byte) error {
	var algo x509.SignatureAlgorithm
	switch cert.PublicKey.(type) {
	case *ecdsa.PublicKey:
		algo = x509.ECDSAWithSHA256
	case *rsa.PublicKey:
		algo = x509.SHA256WithRSA
	case ed25519.PublicKey:
		algo = x509.PureEd25519
	default:
		return fmt.Errorf("pki: unsupported CA key type %T", cert.PublicKey)
	}
	return cert.CheckSignature(algo, msg, sig)
}
