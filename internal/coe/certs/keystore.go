package certs

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/corral/corral/internal/ecode"
	"github.com/corral/corral/internal/secret"
	"github.com/corral/corral/internal/store"
)

// KeyStore keeps clusters' private keys (the CA's above all) outside the
// objects that describe the clusters, so that a key manager of its own can
// hold them. Names are short words such as "ca"; a cluster is its uuid.
type KeyStore interface {
	// PutKey stores (or replaces) a key.
	PutKey(ctx context.Context, cluster, name string, key secret.Secret) error
	// Key reads a key back; ecode.NoEnt when there is none.
	Key(ctx context.Context, cluster, name string) (secret.Secret, error)
	// DeleteKeys forgets every key of the cluster.
	DeleteKeys(ctx context.Context, cluster string) error
}

// Local is the KeyStore in Corral's own store (Magnum's "local" backend),
// where every key is sealed: the store only ever holds ciphertext, bound
// to its cluster and name so that one key cannot be passed off as another.
type Local struct {
	st     store.Store
	prefix string
	seal   *Sealer
}

var _ KeyStore = (*Local)(nil)

// NewLocal keeps keys under prefix in st, sealed with a key derived from
// sealKey (which the caller keeps away from the store: e.g. a file of its
// own in the master's directory).
func NewLocal(st store.Store, prefix string, sealKey secret.Secret) (*Local, error) {
	if !strings.HasSuffix(prefix, "/") {
		return nil, fmt.Errorf("certs: key store prefix %q must end in /", prefix)
	}
	s, err := NewSealer(sealKey)
	if err != nil {
		return nil, err
	}
	return &Local{st: st, prefix: prefix, seal: s}, nil
}

func (l *Local) path(cluster, name string) (string, error) {
	if err := checkSlot(cluster, name); err != nil {
		return "", err
	}
	return l.prefix + cluster + "/" + name, nil
}

// PutKey seals the key and stores it.
func (l *Local) PutKey(ctx context.Context, cluster, name string, key secret.Secret) error {
	p, err := l.path(cluster, name)
	if err != nil {
		return err
	}
	box, err := l.seal.Seal(cluster, name, key)
	if err != nil {
		return err
	}
	if _, err := l.st.Txn(ctx, nil, []store.Op{store.Put(p, box)}, nil); err != nil {
		return fmt.Errorf("certs: store the %s key of cluster %s: %w", name, cluster, err)
	}
	return nil
}

// Key reads and opens a key.
func (l *Local) Key(ctx context.Context, cluster, name string) (secret.Secret, error) {
	p, err := l.path(cluster, name)
	if err != nil {
		return "", err
	}
	kv, err := l.st.Get(ctx, p)
	if err != nil {
		return "", fmt.Errorf("certs: read the %s key of cluster %s: %w", name, cluster, err)
	}
	if kv == nil {
		return "", ecode.Errorf(ecode.NoEnt, "certs: cluster %s has no %s key", cluster, name)
	}
	return l.seal.Open(cluster, name, kv.Value)
}

// DeleteKeys removes the cluster's keys.
func (l *Local) DeleteKeys(ctx context.Context, cluster string) error {
	if err := checkSlot(cluster, "x"); err != nil {
		return err
	}
	if _, err := l.st.Txn(ctx, nil, []store.Op{store.DeletePrefix(l.prefix + cluster + "/")}, nil); err != nil {
		return fmt.Errorf("certs: delete the keys of cluster %s: %w", cluster, err)
	}
	return nil
}

func checkSlot(cluster, name string) error {
	for _, s := range []string{cluster, name} {
		if s == "" || len(s) > 128 || strings.ContainsAny(s, "/\x00") {
			return ecode.Errorf(ecode.Inval, "certs: bad key slot %q/%q", cluster, name)
		}
	}
	return nil
}

// Sealer encrypts private keys with AES-256-GCM under a key derived with
// HKDF-SHA256 from the caller's key, the way the cluster domain secret is
// sealed (internal/pki): a versioned JSON box, the purpose and slot bound
// in as additional data.
type Sealer struct {
	aead cipher.AEAD
}

// sealAD names what a box holds; the slot follows it.
const sealAD = "corral coe private key v1"

// MinSealKeyBytes is the least key material NewSealer takes.
const MinSealKeyBytes = 16

// NewSealer derives the sealing key from key.
func NewSealer(key secret.Secret) (*Sealer, error) {
	if len(key.Reveal()) < MinSealKeyBytes {
		return nil, fmt.Errorf("certs: sealing key of %d bytes (at least %d)", len(key.Reveal()), MinSealKeyBytes)
	}
	k, err := hkdf.Key(sha256.New, []byte(key.Reveal()), []byte("corral-coe-key-seal"), sealAD, 32)
	if err != nil {
		return nil, fmt.Errorf("certs: derive the sealing key: %w", err)
	}
	b, err := aes.NewCipher(k)
	if err != nil {
		return nil, fmt.Errorf("certs: sealing cipher: %w", err)
	}
	aead, err := cipher.NewGCM(b)
	if err != nil {
		return nil, fmt.Errorf("certs: sealing cipher: %w", err)
	}
	return &Sealer{aead: aead}, nil
}

type sealedKey struct {
	Version int    `json:"v"`
	Nonce   []byte `json:"nonce"`
	Box     []byte `json:"box"`
}

func slotAD(cluster, name string) []byte {
	return []byte(sealAD + "\x00" + cluster + "\x00" + name)
}

// Seal encrypts key for the slot (cluster, name).
func (s *Sealer) Seal(cluster, name string, key secret.Secret) ([]byte, error) {
	if key.Empty() {
		return nil, ecode.Errorf(ecode.Inval, "certs: empty %s key", name)
	}
	nonce := make([]byte, s.aead.NonceSize())
	rand.Read(nonce) // crypto/rand.Read never fails
	box := s.aead.Seal(nil, nonce, []byte(key.Reveal()), slotAD(cluster, name))
	return json.Marshal(sealedKey{Version: 1, Nonce: nonce, Box: box})
}

// Open decrypts what Seal made for the same slot.
func (s *Sealer) Open(cluster, name string, b []byte) (secret.Secret, error) {
	var sk sealedKey
	if err := json.Unmarshal(b, &sk); err != nil {
		return "", fmt.Errorf("certs: sealed %s key of cluster %s does not decode: %w", name, cluster, err)
	}
	if sk.Version != 1 {
		return "", fmt.Errorf("certs: sealed %s key of cluster %s has version %d (this program knows 1)", name, cluster, sk.Version)
	}
	if len(sk.Nonce) != s.aead.NonceSize() {
		return "", fmt.Errorf("certs: sealed %s key of cluster %s has a bad nonce", name, cluster)
	}
	plain, err := s.aead.Open(nil, sk.Nonce, sk.Box, slotAD(cluster, name))
	if err != nil {
		return "", fmt.Errorf("certs: the sealed %s key of cluster %s does not open with this sealing key", name, cluster)
	}
	return secret.Secret(plain), nil
}
