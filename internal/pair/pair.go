// Package pair lets two clusters share their domain secret without anyone
// copying it by hand. The inviting cluster makes a one-time token that
// expires (its RAPI address, the CA its RAPI certificate verifies against,
// an id and a random secret); the joining cluster connects to that address,
// verifies the server with that CA, and proves it holds the token. The inviter's
// master answers with the domain secret encrypted to an ephemeral X25519
// key of the joiner, under a key derived from both the key exchange and
// the token's secret, so neither corral-rapi (which relays the exchange
// without being able to read it) nor anyone without the token learns it.
package pair

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/ecdh"
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/corral/corral/internal/secret"
)

// tokenPrefix starts every token (and names its version).
const tokenPrefix = "corral-pair-1."

// Token is what the inviting cluster hands over.
type Token struct {
	// URL is the inviting cluster's RAPI, https://host:port.
	URL string `json:"u"`
	// CAPEM is the CA the RAPI server certificate verifies against: the
	// joiner trusts it for this exchange and for later moves.
	CAPEM string `json:"c"`
	// ID names the invitation on the inviting master.
	ID string `json:"i"`
	// Secret authenticates the joiner; it is used once.
	Secret secret.Secret `json:"-"`
	// Expires is when the invitation lapses (unix seconds).
	Expires int64 `json:"e"`
}

type tokenWire struct {
	Token
	Secret string `json:"s"`
}

// The forms of ids, secrets and peer names are checked by hand rather than
// with regular expressions: compiling a bounded repetition such as {0,252}
// at package initialisation cost every process that links this package
// (the CLI included) several milliseconds and 250 KB at start.

// lowerHex reports whether s is n lower-case hexadecimal digits.
func lowerHex(s string, n int) bool {
	if len(s) != n {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// peerName reports whether s is a letter or digit followed by at most 252
// letters, digits, dots, underscores and hyphens.
func peerName(s string) bool {
	if len(s) == 0 || len(s) > 253 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		alnum := 'A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9'
		if !alnum && (i == 0 || c != '.' && c != '_' && c != '-') {
			return false
		}
	}
	return true
}

// NewToken makes an invitation for the RAPI at rapiURL whose certificate
// verifies against caPEM.
func NewToken(rapiURL string, caPEM []byte, valid time.Duration, now time.Time) (Token, error) {
	t := Token{URL: rapiURL, CAPEM: string(caPEM), ID: randomHex(8),
		Secret: secret.Secret(randomHex(32)), Expires: now.Add(valid).Unix()}
	return t, t.check()
}

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b) // never fails
	return hex.EncodeToString(b)
}

// Encode renders the token as one copyable line.
func (t Token) Encode() string {
	b, _ := json.Marshal(tokenWire{Token: t, Secret: t.Secret.Reveal()})
	return tokenPrefix + base64.RawURLEncoding.EncodeToString(b)
}

// String hides the secret.
func (t Token) String() string { return "pairing token " + t.ID + " for " + t.URL }

// ParseToken reads a token made by Encode.
func ParseToken(s string) (Token, error) {
	s = strings.TrimSpace(s)
	rest, ok := strings.CutPrefix(s, tokenPrefix)
	if !ok {
		return Token{}, errors.New("pair: not a Corral pairing token (it starts with " + tokenPrefix + ")")
	}
	b, err := base64.RawURLEncoding.DecodeString(rest)
	if err != nil {
		return Token{}, errors.New("pair: the token is damaged (bad base64); copy it whole")
	}
	var w tokenWire
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&w); err != nil {
		return Token{}, errors.New("pair: the token is damaged (bad content); copy it whole")
	}
	t := w.Token
	t.Secret = secret.Secret(w.Secret)
	return t, t.check()
}

func (t Token) check() error {
	u, err := url.Parse(t.URL)
	if err != nil || u.Scheme != "https" || u.Host == "" || u.User != nil {
		return fmt.Errorf("pair: the token's RAPI address %q is not an https URL", t.URL)
	}
	if _, err := parseCA(t.CAPEM); err != nil {
		return err
	}
	if !lowerHex(t.ID, 16) {
		return errors.New("pair: the token's id is malformed")
	}
	if !lowerHex(t.Secret.Reveal(), 64) {
		return errors.New("pair: the token's secret is malformed")
	}
	if t.Expires <= 0 {
		return errors.New("pair: the token has no expiry")
	}
	return nil
}

// parseCA reads the PEM certificates of a CA bundle.
func parseCA(caPEM string) ([]*x509.Certificate, error) {
	var certs []*x509.Certificate
	rest := []byte(caPEM)
	for {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			break
		}
		if b.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			return nil, fmt.Errorf("pair: the token's CA certificate is damaged: %v", err)
		}
		certs = append(certs, c)
	}
	if len(certs) == 0 {
		return nil, errors.New("pair: the token holds no CA certificate")
	}
	return certs, nil
}

// CAPool is the token's CA as a pool for verifying the RAPI server.
func (t Token) CAPool() (*x509.CertPool, error) {
	certs, err := parseCA(t.CAPEM)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	for _, c := range certs {
		pool.AddCert(c)
	}
	return pool, nil
}

// Fingerprint is the SHA-256 of a PEM bundle's first certificate, as
// operators compare it ("sha256:" and hex).
func Fingerprint(caPEM string) string {
	certs, err := parseCA(caPEM)
	if err != nil {
		return "(none)"
	}
	sum := sha256.Sum256(certs[0].Raw)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// ValidID reports whether id has the form of an invitation id.
func ValidID(id string) bool { return lowerHex(id, 16) }

// ValidPeerName reports whether a cluster name can name a paired cluster's
// files (peers/<name>.json): a DNS-like name, never a path.
func ValidPeerName(name string) bool { return peerName(name) }

// Expired reports whether the invitation lapsed at now.
func (t Token) Expired(now time.Time) bool { return now.Unix() >= t.Expires }

// Peer describes a cluster to the other one.
type Peer struct {
	Cluster string `json:"cluster"`
	RAPIURL string `json:"rapi_url"`
	// RAPICA is the PEM the cluster's RAPI certificate verifies against
	// (what --src-ca-file or --dest-ca-file of a move take).
	RAPICA string `json:"rapi_ca"`
}

// Request is the joiner's half of the exchange.
type Request struct {
	ID    string `json:"id"`
	Pub   []byte `json:"pub"`   // X25519 public key
	Proof string `json:"proof"` // hex HMAC-SHA256(token secret, "request" || pub || joiner JSON)
	// Joiner describes the joining cluster, for the inviter's records.
	Joiner Peer `json:"joiner"`
}

// Reply is the inviter's half.
type Reply struct {
	Pub   []byte `json:"pub"`
	Nonce []byte `json:"nonce"`
	// Box is the domain secret, sealed with AES-256-GCM.
	Box []byte `json:"box"`
	// Inviter describes the inviting cluster; corral-rapi fills RAPICA.
	Inviter Peer `json:"inviter"`
}

// Joiner is the joining side's state between its request and the reply.
type Joiner struct {
	tok Token
	key *ecdh.PrivateKey
	req Request
}

// NewRequest starts the exchange for token t.
func NewRequest(t Token, me Peer) (*Joiner, Request, error) {
	key, err := ecdh.X25519().GenerateKey(rand.Reader)
	if err != nil {
		return nil, Request{}, err
	}
	req := Request{ID: t.ID, Pub: key.PublicKey().Bytes(), Joiner: me}
	req.Proof = proof(t.Secret, req)
	return &Joiner{tok: t, key: key, req: req}, req, nil
}

func proof(s secret.Secret, r Request) string {
	m := hmac.New(sha256.New, []byte(s.Reveal()))
	m.Write([]byte("corral-pair-request\x00"))
	m.Write(r.Pub)
	peer, _ := json.Marshal(r.Joiner)
	m.Write(peer)
	return hex.EncodeToString(m.Sum(nil))
}

// sealKey derives the box key from the key exchange and the token secret.
func sealKey(shared []byte, s secret.Secret, joinerPub, inviterPub []byte) ([]byte, error) {
	info := append(append([]byte("corral-pair-1\x00"), joinerPub...), inviterPub...)
	return hkdf.Key(sha256.New, shared, []byte(s.Reveal()), string(info), 32)
}

// ErrRefused is returned for a request that does not prove the token.
var ErrRefused = errors.New("pair: the request does not match the invitation")

// Answer is the inviter's side: it checks the request against the
// invitation's secret and seals the domain secret for the joiner.
func Answer(tokSecret secret.Secret, req Request, cds secret.Secret, me Peer) (Reply, error) {
	want := proof(tokSecret, req)
	if !hmac.Equal([]byte(want), []byte(req.Proof)) {
		return Reply{}, ErrRefused
	}
	peerPub, err := ecdh.X25519().NewPublicKey(req.Pub)
	if err != nil {
		return Reply{}, fmt.Errorf("pair: bad public key: %w", err)
	}
	key, err := ecdh.X25519().GenerateKey(rand.Reader)
	if err != nil {
		return Reply{}, err
	}
	shared, err := key.ECDH(peerPub)
	if err != nil {
		return Reply{}, fmt.Errorf("pair: key exchange: %w", err)
	}
	pub := key.PublicKey().Bytes()
	k, err := sealKey(shared, tokSecret, req.Pub, pub)
	if err != nil {
		return Reply{}, err
	}
	aead, err := newAEAD(k)
	if err != nil {
		return Reply{}, err
	}
	nonce := make([]byte, aead.NonceSize())
	rand.Read(nonce)
	box := aead.Seal(nil, nonce, []byte(cds.Reveal()), pub)
	return Reply{Pub: pub, Nonce: nonce, Box: box, Inviter: me}, nil
}

func newAEAD(k []byte) (cipher.AEAD, error) {
	b, err := aes.NewCipher(k)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(b)
}

// Open reads the domain secret from the inviter's reply.
func (j *Joiner) Open(r Reply) (secret.Secret, error) {
	peerPub, err := ecdh.X25519().NewPublicKey(r.Pub)
	if err != nil {
		return "", fmt.Errorf("pair: bad public key in the reply: %w", err)
	}
	shared, err := j.key.ECDH(peerPub)
	if err != nil {
		return "", fmt.Errorf("pair: key exchange: %w", err)
	}
	k, err := sealKey(shared, j.tok.Secret, j.req.Pub, r.Pub)
	if err != nil {
		return "", err
	}
	aead, err := newAEAD(k)
	if err != nil {
		return "", err
	}
	if len(r.Nonce) != aead.NonceSize() {
		return "", errors.New("pair: the reply is malformed")
	}
	plain, err := aead.Open(nil, r.Nonce, r.Box, r.Pub)
	if err != nil {
		return "", errors.New("pair: the reply does not open: it was not made for this token")
	}
	s := strings.TrimSpace(string(plain))
	if s == "" || strings.ContainsAny(s, "\r\n") {
		return "", errors.New("pair: the reply holds no usable domain secret")
	}
	return secret.Secret(s), nil
}
