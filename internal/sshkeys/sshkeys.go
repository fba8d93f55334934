// Package sshkeys makes SSH key pairs in OpenSSH's own formats with the
// standard library only, and reads and writes the two files Corral keeps
// for per-node SSH keys: the public-key file of potential master
// candidates ("<node uuid> <key line>" per line) and the block of
// cluster keys inside a node's authorized_keys.
package sshkeys

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"strings"
)

// Key types Corral makes. Ganeti also knows dsa, which current OpenSSH
// refuses by default; it is rejected with a clear message.
const (
	TypeRSA     = "rsa"
	TypeECDSA   = "ecdsa"
	TypeED25519 = "ed25519"
)

// DefaultType and DefaultBits are Ganeti's defaults.
const (
	DefaultType = TypeRSA
	DefaultBits = 2048
)

// CheckType validates a key type and its size, returning the size to use
// (bits 0 means the type's default).
func CheckType(typ string, bits int) (int, error) {
	switch typ {
	case TypeRSA:
		if bits == 0 {
			return DefaultBits, nil
		}
		if bits < 2048 || bits > 16384 {
			return 0, fmt.Errorf("RSA keys must have 2048 to 16384 bits, not %d", bits)
		}
		return bits, nil
	case TypeECDSA:
		switch bits {
		case 0:
			return 256, nil
		case 256, 384, 521:
			return bits, nil
		}
		return 0, fmt.Errorf("ECDSA keys have 256, 384 or 521 bits, not %d", bits)
	case TypeED25519:
		if bits != 0 && bits != 256 {
			return 0, fmt.Errorf("ed25519 keys have a fixed size; do not give %d bits", bits)
		}
		return 256, nil
	case "dsa":
		return 0, errors.New("DSA keys are not supported (OpenSSH disables them); use rsa, ecdsa or ed25519")
	}
	return 0, fmt.Errorf("unknown SSH key type %q (rsa, ecdsa or ed25519)", typ)
}

// FileName is the private key's file name in an SSH directory, as
// ssh-keygen names it (the public key adds ".pub").
func FileName(typ string) string { return "id_" + typ }

// Pair is a new key pair.
type Pair struct {
	// Private is the private key in OpenSSH's format (unencrypted).
	Private []byte
	// Public is the authorized_keys line: "<algorithm> <base64> <comment>".
	Public string
}

// Generate makes a key pair of the given type and size; comment ends the
// public key line (usually user@host).
func Generate(typ string, bits int, comment string) (*Pair, error) {
	bits, err := CheckType(typ, bits)
	if err != nil {
		return nil, err
	}
	comment = strings.Map(func(r rune) rune {
		if r == '\n' || r == '\r' {
			return ' '
		}
		return r
	}, comment)
	var algo string
	var pub, priv []byte // wire blob of the public key; private fields
	switch typ {
	case TypeRSA:
		k, err := rsa.GenerateKey(rand.Reader, bits)
		if err != nil {
			return nil, err
		}
		algo = "ssh-rsa"
		pub = cat(str([]byte(algo)), mpint(big.NewInt(int64(k.E))), mpint(k.N))
		priv = cat(mpint(k.N), mpint(big.NewInt(int64(k.E))), mpint(k.D), mpint(k.Precomputed.Qinv), mpint(k.Primes[0]), mpint(k.Primes[1]))
	case TypeECDSA:
		curve, name := elliptic.P256(), "nistp256"
		switch bits {
		case 384:
			curve, name = elliptic.P384(), "nistp384"
		case 521:
			curve, name = elliptic.P521(), "nistp521"
		}
		k, err := ecdsa.GenerateKey(curve, rand.Reader)
		if err != nil {
			return nil, err
		}
		point, err := k.PublicKey.Bytes()
		if err != nil {
			return nil, err
		}
		d, err := k.Bytes()
		if err != nil {
			return nil, err
		}
		algo = "ecdsa-sha2-" + name
		pub = cat(str([]byte(algo)), str([]byte(name)), str(point))
		priv = cat(str([]byte(name)), str(point), mpint(new(big.Int).SetBytes(d)))
	case TypeED25519:
		p, k, err := ed25519.GenerateKey(rand.Reader)
		if err != nil {
			return nil, err
		}
		algo = "ssh-ed25519"
		pub = cat(str([]byte(algo)), str(p))
		priv = cat(str(p), str(k))
	}
	return &Pair{
		Private: openSSHPrivate(algo, pub, priv, comment),
		Public:  strings.TrimSpace(algo + " " + base64.StdEncoding.EncodeToString(pub) + " " + comment),
	}, nil
}

// openSSHPrivate encodes an unencrypted "openssh-key-v1" private key, the
// format ssh-keygen writes by default (PROTOCOL.key in OpenSSH).
func openSSHPrivate(algo string, pub, privFields []byte, comment string) []byte {
	var check [4]byte
	_, _ = rand.Read(check[:])
	inner := cat(check[:], check[:], str([]byte(algo)), privFields, str([]byte(comment)))
	for i := byte(1); len(inner)%8 != 0; i++ {
		inner = append(inner, i)
	}
	body := cat([]byte("openssh-key-v1\x00"), str([]byte("none")), str([]byte("none")), str(nil), u32(1), str(pub), str(inner))
	return pem.EncodeToMemory(&pem.Block{Type: "OPENSSH PRIVATE KEY", Bytes: body})
}

func u32(n int) []byte { return binary.BigEndian.AppendUint32(nil, uint32(n)) }

func str(b []byte) []byte { return append(u32(len(b)), b...) }

// mpint is RFC 4251's encoding of a non-negative integer.
func mpint(n *big.Int) []byte {
	b := n.Bytes()
	if len(b) > 0 && b[0]&0x80 != 0 {
		b = append([]byte{0}, b...)
	}
	return str(b)
}

func cat(parts ...[]byte) []byte { return bytes.Join(parts, nil) }

// PublicFromPrivate returns the public key line of an unencrypted
// OpenSSH private key (what `ssh-keygen -y` prints, with the comment).
func PublicFromPrivate(privPEM []byte) (string, error) {
	b, _ := pem.Decode(privPEM)
	if b == nil || b.Type != "OPENSSH PRIVATE KEY" {
		return "", errors.New("not an OpenSSH private key")
	}
	rest, ok := bytes.CutPrefix(b.Bytes, []byte("openssh-key-v1\x00"))
	if !ok {
		return "", errors.New("not an openssh-key-v1 private key")
	}
	var cipher, blob []byte
	var err error
	if cipher, rest, err = readString(rest); err != nil {
		return "", err
	}
	if string(cipher) != "none" {
		return "", errors.New("encrypted private keys are not supported")
	}
	for range 2 { // kdf name and options
		if _, rest, err = readString(rest); err != nil {
			return "", err
		}
	}
	if len(rest) < 4 || binary.BigEndian.Uint32(rest) != 1 {
		return "", errors.New("only single-key files are supported")
	}
	if blob, rest, err = readString(rest[4:]); err != nil {
		return "", err
	}
	algo, _, err := readString(blob)
	if err != nil {
		return "", err
	}
	inner, _, err := readString(rest)
	if err != nil {
		return "", err
	}
	if len(inner) < 8 || !bytes.Equal(inner[:4], inner[4:8]) {
		return "", errors.New("private key check bytes differ")
	}
	return string(algo) + " " + base64.StdEncoding.EncodeToString(blob), nil
}

func readString(b []byte) ([]byte, []byte, error) {
	if len(b) < 4 {
		return nil, nil, errors.New("truncated key data")
	}
	n := binary.BigEndian.Uint32(b)
	if uint64(n) > uint64(len(b)-4) {
		return nil, nil, errors.New("truncated key data")
	}
	return b[4 : 4+n], b[4+n:], nil
}

// Key is a parsed public key line.
type Key struct {
	Algo    string
	Blob    []byte
	Comment string
}

// ParsePublic parses an authorized_keys-style line without options:
// "<algorithm> <base64 blob> [comment]". The blob must name the same
// algorithm, so a line cannot pass off one key type as another.
func ParsePublic(line string) (*Key, error) {
	fields := strings.Fields(line)
	if len(fields) < 2 {
		return nil, fmt.Errorf("not a public key line: %q", trunc(line))
	}
	if !knownAlgo(fields[0]) {
		return nil, fmt.Errorf("unsupported key algorithm %q", trunc(fields[0]))
	}
	blob, err := base64.StdEncoding.DecodeString(fields[1])
	if err != nil {
		return nil, fmt.Errorf("bad key data: %w", err)
	}
	algo, _, err := readString(blob)
	if err != nil {
		return nil, err
	}
	if string(algo) != fields[0] {
		return nil, fmt.Errorf("key data is %q, the line says %q", trunc(string(algo)), fields[0])
	}
	return &Key{Algo: fields[0], Blob: blob, Comment: strings.Join(fields[2:], " ")}, nil
}

func knownAlgo(a string) bool {
	switch a {
	case "ssh-rsa", "ssh-ed25519", "ecdsa-sha2-nistp256", "ecdsa-sha2-nistp384", "ecdsa-sha2-nistp521", "ssh-dss":
		return true
	}
	return false
}

func trunc(s string) string {
	if len(s) > 40 {
		return s[:40] + "..."
	}
	return s
}

// Line is the key without its comment: two lines are the same key when
// their Line is equal.
func (k *Key) Line() string { return k.Algo + " " + base64.StdEncoding.EncodeToString(k.Blob) }

// Fingerprint is OpenSSH's SHA256 fingerprint ("SHA256:...").
func (k *Key) Fingerprint() string {
	sum := sha256.Sum256(k.Blob)
	return "SHA256:" + base64.RawStdEncoding.EncodeToString(sum[:])
}

// SameKey reports whether two public key lines hold the same key,
// whatever their comments.
func SameKey(a, b string) bool {
	ka, err := ParsePublic(a)
	if err != nil {
		return false
	}
	kb, err := ParsePublic(b)
	if err != nil {
		return false
	}
	return ka.Line() == kb.Line()
}
