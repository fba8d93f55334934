package pki

// Remote import/export ("RIE") messages: what two clusters that share a
// domain secret exchange, through the operator's move tool, to move an
// instance. Every message carries an HMAC-SHA1 keyed with the domain secret
// so that neither cluster acts on values the other did not produce. The
// formats are Ganeti's, so a Corral cluster can move instances to and from a
// Ganeti cluster.

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha1"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"net"
	"strconv"
	"strings"

	"github.com/corral/corral/internal/ecode"
	"github.com/corral/corral/internal/secret"
)

// RIEVersion is the remote import/export protocol version. Both clusters
// must speak the same one.
const RIEVersion = 0

// RIEHandshakeText is the fixed text the handshake authenticates.
const RIEHandshakeText = "Hi, I'm Ganeti"

// maxRIEField bounds every string in a message: the real values are host
// names, salts, digests and key names, all far shorter, and a bound keeps a
// hostile message from costing more than a glance.
const maxRIEField = 1024

// NewSalt returns 16 lowercase hex characters from 8 random bytes, the salt
// every signed message carries.
func NewSalt() string { return randomHex(8) }

// NewMagicBase returns 12 lowercase hex characters; ComputeMagic derives the
// per-disk stream magic from it.
func NewMagicBase() string { return randomHex(6) }

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b) // crypto/rand.Read never fails (it aborts the program instead)
	return hex.EncodeToString(b)
}

// Sha1Hmac is the HMAC-SHA1 of salt+msg keyed with the domain secret's text,
// as lowercase hex. The salt is prepended to the message rather than mixed
// into the key because that is what the peer cluster computes.
func Sha1Hmac(cds secret.Secret, msg, salt string) string {
	return hex.EncodeToString(sha1Hmac(cds, msg, salt))
}

func sha1Hmac(cds secret.Secret, msg, salt string) []byte {
	m := hmac.New(sha1.New, []byte(cds.Reveal()))
	m.Write([]byte(salt))
	m.Write([]byte(msg))
	return m.Sum(nil)
}

// VerifySha1Hmac reports whether digest (hex, either case) is the HMAC of
// salt+msg. The comparison takes the same time wherever the digests differ.
func VerifySha1Hmac(cds secret.Secret, msg, salt, digest string) bool {
	got, err := hex.DecodeString(digest)
	if err != nil {
		return false
	}
	return hmac.Equal(got, sha1Hmac(cds, msg, salt))
}

func handshakeMessage(version int) string {
	return strconv.Itoa(version) + ":" + RIEHandshakeText
}

// ComputeHandshake returns [version, hmac, salt]: the source cluster's proof
// that it holds the domain secret, handed to the destination cluster.
func ComputeHandshake(cds secret.Secret) []any {
	salt := NewSalt()
	return []any{RIEVersion, Sha1Hmac(cds, handshakeMessage(RIEVersion), salt), salt}
}

// CheckHandshake verifies a handshake from the other cluster. The HMAC is
// checked over the version the peer claims before the version itself, so a
// peer with the right secret but another protocol is told exactly that.
func CheckHandshake(cds secret.Secret, v any) error {
	l, err := rieList("handshake", v, 3)
	if err != nil {
		return err
	}
	version, ok := rieInt(l[0])
	if !ok {
		return ecode.Errorf(ecode.Inval, "Invalid handshake: version must be an integer, got %s", describe(l[0]))
	}
	digest, salt, err := rieDigestSalt("handshake", l[1], l[2])
	if err != nil {
		return err
	}
	if !VerifySha1Hmac(cds, handshakeMessage(version), salt, digest) {
		return ecode.Errorf(ecode.Inval, "Handshake does not match: the clusters do not share the same domain secret")
	}
	if version != RIEVersion {
		return ecode.Errorf(ecode.Inval, "Clusters do not use the same remote import/export protocol (local=%d, remote=%d)", RIEVersion, version)
	}
	return nil
}

// SignKeyName returns [name, hmac(name), salt]: the name of the source
// node's transfer key, which the destination hands back unchanged.
func SignKeyName(cds secret.Secret, name string) []any {
	salt := NewSalt()
	return []any{name, Sha1Hmac(cds, name, salt), salt}
}

// CheckKeyName verifies a signed key name and returns the name. Besides the
// HMAC, the name must be a plain file name, since the node keeps the key in
// a directory of that name: a signature proves who sent it, not that it is
// harmless.
func CheckKeyName(cds secret.Secret, v any) (string, error) {
	l, err := rieList("X509 key name", v, 3)
	if err != nil {
		return "", err
	}
	name, ok := l[0].(string)
	if !ok {
		return "", ecode.Errorf(ecode.Inval, "Invalid X509 key name: name must be a string, got %s", describe(l[0]))
	}
	if !validKeyName(name) {
		return "", ecode.Errorf(ecode.Inval, "Invalid X509 key name %q: only letters, digits, '-', '_' and '.' are allowed", truncate(name))
	}
	digest, salt, err := rieDigestSalt("X509 key name", l[1], l[2])
	if err != nil {
		return "", err
	}
	if !VerifySha1Hmac(cds, name, salt, digest) {
		return "", ecode.Errorf(ecode.Inval, "HMAC for X509 key name is wrong: the clusters may not share the same domain secret")
	}
	return name, nil
}

func validKeyName(name string) bool {
	if name == "" || len(name) > 255 || name == "." || name == ".." {
		return false
	}
	for i := 0; i < len(name); i++ {
		if !magicByte(name[i]) {
			return false
		}
	}
	return true
}

func diskInfoMessage(index int, host string, port int, magic string) string {
	return strconv.Itoa(index) + ":" + host + ":" + strconv.Itoa(port) + ":" + magic
}

// SignDiskInfo returns [host, port, magic, hmac, salt] for disk index: where
// the destination listens for that disk. The index is inside the HMAC so
// listeners cannot be swapped between disks. One salt serves all disks of an
// import.
func SignDiskInfo(cds secret.Secret, index int, host string, port int, magic, salt string) []any {
	return []any{host, port, magic, Sha1Hmac(cds, diskInfoMessage(index, host, port, magic), salt), salt}
}

// CheckDiskInfo verifies the destination of disk index and returns it. A
// host name comes back lowercased without a trailing dot; an IP address
// comes back as given.
func CheckDiskInfo(cds secret.Secret, index int, v any) (host string, port int, magic string, err error) {
	what := fmt.Sprintf("disk %d destination", index)
	l, err := rieList(what, v, 5)
	if err != nil {
		return "", 0, "", err
	}
	rawHost, ok := l[0].(string)
	if !ok || rawHost == "" {
		return "", 0, "", ecode.Errorf(ecode.Inval, "Invalid %s: host must be a non-empty string, got %s", what, describe(l[0]))
	}
	port, ok = rieInt(l[1])
	if !ok || port < 1 || port > 65535 {
		return "", 0, "", ecode.Errorf(ecode.Inval, "Invalid %s: port must be an integer from 1 to 65535, got %s", what, describe(l[1]))
	}
	magic, ok = l[2].(string)
	if !ok || !ValidMagic(magic) {
		return "", 0, "", ecode.Errorf(ecode.Inval, "Invalid %s: magic must be 5 to 100 letters, digits, '-', '_' or '.', got %s", what, describe(l[2]))
	}
	digest, salt, err := rieDigestSalt(what, l[3], l[4])
	if err != nil {
		return "", 0, "", err
	}
	if !VerifySha1Hmac(cds, diskInfoMessage(index, rawHost, port, magic), salt, digest) {
		return "", 0, "", ecode.Errorf(ecode.Inval, "HMAC for %s is wrong: the clusters may not share the same domain secret", what)
	}
	host, ok = normalizeHost(rawHost)
	if !ok {
		return "", 0, "", ecode.Errorf(ecode.Inval, "Invalid %s: host %q is neither an IP address nor a host name", what, truncate(rawHost))
	}
	return host, port, magic, nil
}

// normalizeHost keeps IP addresses as they are and folds host names to
// their canonical lower-case form without a trailing dot.
func normalizeHost(h string) (string, bool) {
	if net.ParseIP(h) != nil {
		return h, true
	}
	n := strings.ToLower(strings.TrimSuffix(h, "."))
	return n, ValidNodeName(n)
}

// ComputeMagic derives the stream magic of one disk: the SHA1 of the
// protocol version, the import's magic base, the instance name and the disk
// index, concatenated. Tying it to the disk keeps a misrouted stream from
// being written over the wrong disk.
func ComputeMagic(base, instanceName string, index int) string {
	sum := sha1.Sum([]byte(strconv.Itoa(RIEVersion) + base + instanceName + strconv.Itoa(index)))
	return hex.EncodeToString(sum[:])
}

// ValidMagic reports whether m is 5 to 100 characters of letters, digits,
// '-', '_' and '.': safe on a command line and in a stream header.
func ValidMagic(m string) bool {
	if len(m) < 5 || len(m) > 100 {
		return false
	}
	for i := 0; i < len(m); i++ {
		if !magicByte(m[i]) {
			return false
		}
	}
	return true
}

func magicByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.'
}

// rieList checks that v is a list of n items.
func rieList(what string, v any, n int) ([]any, error) {
	l, ok := v.([]any)
	if !ok {
		return nil, ecode.Errorf(ecode.Inval, "Invalid %s: expected a list of %d items, got %s", what, n, describe(v))
	}
	if len(l) != n {
		return nil, ecode.Errorf(ecode.Inval, "Invalid %s: expected a list of %d items, got %d", what, n, len(l))
	}
	return l, nil
}

// rieDigestSalt checks the HMAC and salt fields of a message.
func rieDigestSalt(what string, d, s any) (digest, salt string, err error) {
	digest, ok := d.(string)
	if !ok || digest == "" || len(digest) > maxRIEField {
		return "", "", ecode.Errorf(ecode.Inval, "Invalid %s: HMAC must be a non-empty string, got %s", what, describe(d))
	}
	salt, ok = s.(string)
	if !ok || len(salt) > maxRIEField {
		return "", "", ecode.Errorf(ecode.Inval, "Invalid %s: salt must be a string, got %s", what, describe(s))
	}
	return digest, salt, nil
}

// rieInt accepts the integer forms a decoded message can hold: float64 from
// encoding/json into any, json.Number when the decoder keeps numbers, and Go
// integers when a message is checked without a JSON round trip.
func rieInt(v any) (int, bool) {
	switch n := v.(type) {
	case float64:
		if n != math.Trunc(n) || n < math.MinInt32 || n > math.MaxInt32 {
			return 0, false
		}
		return int(n), true
	case json.Number:
		i, err := strconv.ParseInt(string(n), 10, 32)
		return int(i), err == nil
	case int:
		return n, n >= math.MinInt32 && n <= math.MaxInt32
	case int64:
		return int(n), n >= math.MinInt32 && n <= math.MaxInt32
	}
	return 0, false
}

// describe names a bad value for an error message without quoting a long
// one in full.
func describe(v any) string {
	switch x := v.(type) {
	case nil:
		return "null"
	case string:
		return fmt.Sprintf("%q", truncate(x))
	case float64, int, int64, json.Number, bool:
		return fmt.Sprintf("%v", x)
	case []any:
		return fmt.Sprintf("a list of %d items", len(x))
	case map[string]any:
		return "an object"
	}
	return fmt.Sprintf("a value of type %T", v)
}

func truncate(s string) string {
	const limit = 64
	if len(s) <= limit {
		return s
	}
	return s[:limit] + "..."
}
