package pki

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/corral/corral/internal/ecode"
	"github.com/corral/corral/internal/secret"
)

// tokenPrefix versions the token format; a future format gets a new prefix
// so old nodes reject it with a clear message instead of misreading it.
const tokenPrefix = "corral1."

// maxTokenLen bounds what ParseJoinToken will decode; real tokens are ~300
// characters.
const maxTokenLen = 4096

// JoinToken is what an operator hands to a new node: where the master's join
// listener is, which CA to trust (by SHA-256 pin), and a one-time credential.
// The master stores only HashTokenSecret(Secret), keyed by ID.
type JoinToken struct {
	Master   string // host:port of corrald's join listener
	CASHA256 string // CAFingerprint of the cluster CA
	Node     string // name the node will be certified as
	ID       string // 16 lowercase hex characters
	Secret   secret.Secret
	Expires  time.Time
}

// tokenWire is the encoded form. Secret is a plain string here because
// secret.Secret deliberately refuses to marshal its value.
type tokenWire struct {
	Master   string `json:"m"`
	CASHA256 string `json:"ca"`
	Node     string `json:"n"`
	ID       string `json:"id"`
	Secret   string `json:"s"`
	Expires  int64  `json:"exp"`
}

// NewJoinToken makes a token with a fresh ID and secret, expiring validFor
// from now (whole seconds, as encoded).
func NewJoinToken(master, caSHA256, node string, validFor time.Duration) (JoinToken, error) {
	if validFor <= 0 {
		return JoinToken{}, ecode.Errorf(ecode.Inval, "join token validity %v is not positive", validFor)
	}
	var id [8]byte
	var sec [32]byte
	rand.Read(id[:])
	rand.Read(sec[:])
	t := JoinToken{
		Master:   master,
		CASHA256: caSHA256,
		Node:     node,
		ID:       hex.EncodeToString(id[:]),
		Secret:   secret.Secret(hex.EncodeToString(sec[:])),
		Expires:  time.Now().Add(validFor).Truncate(time.Second),
	}
	if err := t.validate(); err != nil {
		return JoinToken{}, err
	}
	return t, nil
}

// Encode returns the token as one URL-safe word: "corral1." followed by the
// unpadded base64url of its JSON.
func (t JoinToken) Encode() string {
	b, _ := json.Marshal(tokenWire{
		Master:   t.Master,
		CASHA256: t.CASHA256,
		Node:     t.Node,
		ID:       t.ID,
		Secret:   t.Secret.Reveal(),
		Expires:  t.Expires.Unix(),
	})
	return tokenPrefix + base64.RawURLEncoding.EncodeToString(b)
}

// ParseJoinToken decodes and checks a token. It does not check expiry: the
// master does, against its own clock and its record of the token. Errors
// are ecode.Inval and never quote the secret.
func ParseJoinToken(s string) (JoinToken, error) {
	s = strings.TrimSpace(s)
	if len(s) > maxTokenLen {
		return JoinToken{}, ecode.Errorf(ecode.Inval, "join token is too long (%d bytes)", len(s))
	}
	body, ok := strings.CutPrefix(s, tokenPrefix)
	if !ok {
		return JoinToken{}, ecode.Errorf(ecode.Inval, "not a join token: it must start with %q", tokenPrefix)
	}
	raw, err := base64.RawURLEncoding.DecodeString(body)
	if err != nil {
		return JoinToken{}, ecode.Errorf(ecode.Inval, "join token is not valid base64url (was it truncated?)")
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	var w tokenWire
	if err := dec.Decode(&w); err != nil {
		return JoinToken{}, ecode.Errorf(ecode.Inval, "join token content is malformed")
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return JoinToken{}, ecode.Errorf(ecode.Inval, "join token content has trailing data")
	}
	t := JoinToken{
		Master:   w.Master,
		CASHA256: w.CASHA256,
		Node:     w.Node,
		ID:       w.ID,
		Secret:   secret.Secret(w.Secret),
	}
	if w.Expires != 0 {
		t.Expires = time.Unix(w.Expires, 0)
	}
	if err := t.validate(); err != nil {
		return JoinToken{}, err
	}
	return t, nil
}

// HashTokenSecret is the lowercase hex SHA-256 of the secret: what the master
// stores, so a copy of its store cannot be replayed as a token.
func HashTokenSecret(s secret.Secret) string {
	sum := sha256.Sum256([]byte(s.Reveal()))
	return hex.EncodeToString(sum[:])
}

// TokenSecretMatches compares s against a stored HashTokenSecret in constant
// time.
func TokenSecretMatches(hash string, s secret.Secret) bool {
	return subtle.ConstantTimeCompare([]byte(hash), []byte(HashTokenSecret(s))) == 1
}

func (t JoinToken) validate() error {
	var missing []string
	for _, f := range []struct{ name, v string }{
		{"master address", t.Master}, {"CA pin", t.CASHA256}, {"node", t.Node},
		{"id", t.ID}, {"secret", t.Secret.Reveal()},
	} {
		if f.v == "" {
			missing = append(missing, f.name)
		}
	}
	if t.Expires.IsZero() {
		missing = append(missing, "expiry")
	}
	if len(missing) > 0 {
		return ecode.Errorf(ecode.Inval, "join token lacks %s", strings.Join(missing, ", "))
	}
	host, port, err := net.SplitHostPort(t.Master)
	if err != nil || host == "" {
		return ecode.Errorf(ecode.Inval, "join token master address %q is not host:port", t.Master)
	}
	if p, err := strconv.Atoi(port); err != nil || p < 1 || p > 65535 {
		return ecode.Errorf(ecode.Inval, "join token master port %q is not a number in 1-65535", port)
	}
	if !isLowerHex(t.CASHA256, 64) {
		return ecode.Errorf(ecode.Inval, "join token CA pin is not 64 lowercase hex characters")
	}
	if !ValidNodeName(t.Node) {
		return ecode.Errorf(ecode.Inval, "join token node name %q is not a valid host name", t.Node)
	}
	if !isLowerHex(t.ID, 16) {
		return ecode.Errorf(ecode.Inval, "join token id is not 16 lowercase hex characters")
	}
	if !isLowerHex(t.Secret.Reveal(), 64) {
		return ecode.Errorf(ecode.Inval, "join token secret is not 64 lowercase hex characters")
	}
	return nil
}

// ValidNodeName reports whether name can be a node's certificate name: a host
// name of letters, digits, '-', '_' and '.', at most 253 characters, with no
// empty label.
func ValidNodeName(name string) bool {
	if name == "" || len(name) > 253 {
		return false
	}
	for _, label := range strings.Split(name, ".") {
		if label == "" || len(label) > 63 {
			return false
		}
		for _, c := range label {
			ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_'
			if !ok {
				return false
			}
		}
	}
	return true
}

func isLowerHex(s string, n int) bool {
	if len(s) != n {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// String prints the token without its secret, so logging a token is safe.
func (t JoinToken) String() string {
	return fmt.Sprintf("join token %s for %s via %s (expires %s)", t.ID, t.Node, t.Master, t.Expires.UTC().Format(time.RFC3339))
}
