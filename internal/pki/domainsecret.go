package pki

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/corral/corral/internal/atomicfile"
	"github.com/corral/corral/internal/secret"
)

// NewDomainSecret makes a cluster domain secret in Ganeti's format: 20 random
// bytes as 40 lowercase hex characters. Clusters that move instances between
// them share it as the HMAC key of their handshakes.
func NewDomainSecret() secret.Secret {
	var b [20]byte
	rand.Read(b[:]) // crypto/rand.Read never fails (it aborts the program instead)
	return secret.Secret(hex.EncodeToString(b[:]))
}

// WriteSecretFile stores s as one line, mode 0400, atomically.
func WriteSecretFile(path string, s secret.Secret) error {
	v := s.Reveal()
	if v == "" || strings.ContainsAny(v, "\r\n") {
		return errors.New("pki: secret must be one non-empty line")
	}
	if err := atomicfile.WriteFile(path, []byte(v+"\n"), 0o400); err != nil {
		return fmt.Errorf("pki: write secret file: %w", err)
	}
	return nil
}

// ReadSecretFile reads a secret written by WriteSecretFile, or Ganeti's
// cluster-domain-secret file: the first line, stripped of white space.
func ReadSecretFile(path string) (secret.Secret, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("pki: read secret file: %w", err)
	}
	line, _, _ := strings.Cut(string(b), "\n")
	line = strings.TrimSpace(line)
	if line == "" {
		return "", fmt.Errorf("pki: secret file %s is empty", path)
	}
	return secret.Secret(line), nil
}

// domainSecretAD binds a sealed domain secret to its purpose and format.
const domainSecretAD = "corral cluster domain secret v1"

// sealedDomainSecret is the domain secret as the cluster's store keeps it.
type sealedDomainSecret struct {
	Version int    `json:"v"`
	Nonce   []byte `json:"nonce"`
	Box     []byte `json:"box"`
}

// domainSecretAEAD is AES-256-GCM under a key derived with HKDF-SHA256
// from the CA's private key: every master candidate holds that key (a
// master cannot run without it), the CA is never rotated in place, and the
// users who may read the store's files (corral-etcd for etcd's data) may
// not read it.
func (ca *CA) domainSecretAEAD() (cipher.AEAD, error) {
	der, err := x509.MarshalPKCS8PrivateKey(ca.key)
	if err != nil {
		return nil, fmt.Errorf("pki: encode the CA key: %w", err)
	}
	k, err := hkdf.Key(sha256.New, der, []byte("corral-domain-secret-seal"), domainSecretAD, 32)
	if err != nil {
		return nil, fmt.Errorf("pki: derive the domain secret key: %w", err)
	}
	b, err := aes.NewCipher(k)
	if err != nil {
		return nil, fmt.Errorf("pki: domain secret cipher: %w", err)
	}
	return cipher.NewGCM(b)
}

// SealDomainSecret encrypts the domain secret for the cluster's store, so
// that every master candidate, and nobody without the CA key, can open it.
func (ca *CA) SealDomainSecret(s secret.Secret) ([]byte, error) {
	if s.Reveal() == "" {
		return nil, errors.New("pki: empty domain secret")
	}
	aead, err := ca.domainSecretAEAD()
	if err != nil {
		return nil, err
	}
	nonce := make([]byte, aead.NonceSize())
	rand.Read(nonce)
	box := aead.Seal(nil, nonce, []byte(s.Reveal()), []byte(domainSecretAD))
	return json.Marshal(sealedDomainSecret{Version: 1, Nonce: nonce, Box: box})
}

// OpenDomainSecret decrypts what SealDomainSecret made with this CA.
func (ca *CA) OpenDomainSecret(b []byte) (secret.Secret, error) {
	var sealed sealedDomainSecret
	if err := json.Unmarshal(b, &sealed); err != nil {
		return "", fmt.Errorf("pki: decoding the sealed domain secret: %w", err)
	}
	if sealed.Version != 1 {
		return "", fmt.Errorf("pki: sealed domain secret of version %d (this program knows 1)", sealed.Version)
	}
	aead, err := ca.domainSecretAEAD()
	if err != nil {
		return "", err
	}
	if len(sealed.Nonce) != aead.NonceSize() {
		return "", errors.New("pki: sealed domain secret with a bad nonce")
	}
	plain, err := aead.Open(nil, sealed.Nonce, sealed.Box, []byte(domainSecretAD))
	if err != nil {
		return "", errors.New("pki: the sealed domain secret does not open with this cluster's CA key")
	}
	return secret.Secret(plain), nil
}
