// Package cryptpw hashes passwords the way crypt(3) does with SHA-crypt
// (Ulrich Drepper's "Unix crypt using SHA-256 and SHA-512"): "$5$" strings
// for SHA-256, "$6$" for SHA-512, an optional "rounds=N$", a salt of up to
// 16 characters and the encoded digest. These are the strings /etc/shadow
// holds, so a rescue password hashed here can be written there as is and
// checked by the rescue system's own login: Corral keeps and sends on only
// this hash of a rescue password, never the password.
package cryptpw

import (
	"crypto/rand"
	"crypto/subtle"
	"strconv"
	"strings"

	"github.com/corral/corral/internal/ecode"
)

// An Algorithm is a hash named as Ironic's
// [conductor]rescue_password_hash_algorithm names it.
type Algorithm string

// The algorithms.
const (
	SHA256 Algorithm = "sha256" // "$5$"
	SHA512 Algorithm = "sha512" // "$6$"

	Default = SHA256
)

// Rounds limits and the default from the SHA-crypt specification. A
// setting asking for fewer or more rounds is clamped to these.
const (
	DefaultRounds = 5000
	MinRounds     = 1000
	MaxRounds     = 999_999_999
)

// MaxSaltLen is the longest salt used; a longer one is cut to this length.
const MaxSaltLen = 16

// MaxPasswordLen is the longest password accepted. The work to hash grows
// with the square of the length, and the crypt(3) of current Linux systems
// (libxcrypt) refuses longer passphrases, so a longer password could not
// log in on the rescued machine anyway.
const MaxPasswordLen = 511

func variantOf(alg Algorithm) (*variant, error) {
	switch alg {
	case SHA256:
		return sha256Variant, nil
	case SHA512:
		return sha512Variant, nil
	}
	return nil, ecode.Errorf(ecode.Inval, "unknown password hash algorithm %q (known: %s, %s)", string(alg), SHA256, SHA512)
}

// ParseAlgorithm checks an algorithm name; "" is the default (sha256).
func ParseAlgorithm(name string) (Algorithm, error) {
	if name == "" {
		return Default, nil
	}
	v, err := variantOf(Algorithm(name))
	if err != nil {
		return "", err
	}
	return v.alg, nil
}

// AlgorithmOf returns the algorithm a crypt string was made with, from its
// "$5$" or "$6$" prefix.
func AlgorithmOf(hash string) (Algorithm, bool) {
	switch {
	case strings.HasPrefix(hash, "$5$"):
		return SHA256, true
	case strings.HasPrefix(hash, "$6$"):
		return SHA512, true
	}
	return "", false
}

// Hash returns the crypt string of password with alg, a fresh random salt
// of 16 characters and the default 5000 rounds.
func Hash(alg Algorithm, password string) (string, error) {
	v, err := variantOf(alg)
	if err != nil {
		return "", err
	}
	return crypt(v, password, newSalt(), DefaultRounds, false)
}

// HashRounds is Hash with a chosen number of rounds, written into the
// string as "rounds=N$" (clamped to MinRounds..MaxRounds).
func HashRounds(alg Algorithm, password string, rounds int) (string, error) {
	v, err := variantOf(alg)
	if err != nil {
		return "", err
	}
	return crypt(v, password, newSalt(), clampRounds(uint64(max(rounds, 0))), true)
}

// Crypt is crypt(3) for SHA-crypt: setting is "$5$" or "$6$", optionally
// "rounds=N$", then the salt, ended by "$" or the string's end; whatever
// follows the salt's "$" (a previous hash) is ignored. It returns the full
// crypt string. Salt characters must be from "./0-9A-Za-z".
func Crypt(password, setting string) (string, error) {
	v, salt, rounds, custom, err := parseSetting(setting)
	if err != nil {
		return "", err
	}
	return crypt(v, password, salt, rounds, custom)
}

// Verify reports whether password is the one hash was made from. The
// comparison takes the same time wherever the strings differ. A malformed
// hash matches no password.
func Verify(hash, password string) bool {
	got, err := Crypt(password, hash)
	if err != nil {
		return false
	}
	return subtle.ConstantTimeCompare([]byte(got), []byte(hash)) == 1
}

func crypt(v *variant, password, salt string, rounds int, custom bool) (string, error) {
	if len(password) > MaxPasswordLen {
		return "", ecode.Errorf(ecode.Inval, "password longer than %d bytes", MaxPasswordLen)
	}
	if strings.IndexByte(password, 0) >= 0 {
		return "", ecode.Errorf(ecode.Inval, "password contains a NUL byte")
	}
	key := []byte(password)
	d := v.digest(key, []byte(salt), rounds)
	clear(key)

	out := make([]byte, 0, 3+len("rounds=999999999$")+len(salt)+1+(v.size*4+2)/3)
	out = append(out, '$')
	out = append(out, v.id...)
	out = append(out, '$')
	if custom {
		out = append(out, "rounds="...)
		out = strconv.AppendInt(out, int64(rounds), 10)
		out = append(out, '$')
	}
	out = append(out, salt...)
	out = append(out, '$')
	out = v.encode(out, d)
	clear(d)
	return string(out), nil
}

// parseSetting splits a setting into its variant, salt and rounds; custom
// says whether the setting named the rounds (and so the result does too).
// Errors do not quote the setting: it may be a stored hash.
func parseSetting(setting string) (v *variant, salt string, rounds int, custom bool, err error) {
	alg, ok := AlgorithmOf(setting)
	if !ok {
		return nil, "", 0, false, ecode.Errorf(ecode.Inval, "not a SHA-crypt setting: it must start with $5$ or $6$")
	}
	v, _ = variantOf(alg)
	rest := setting[3:]
	rounds = DefaultRounds
	if num, ok := strings.CutPrefix(rest, "rounds="); ok {
		digits, after, found := strings.Cut(num, "$")
		if !found || digits == "" || strings.Trim(digits, "0123456789") != "" {
			return nil, "", 0, false, ecode.Errorf(ecode.Inval, "malformed rounds= in a SHA-crypt setting")
		}
		n, perr := strconv.ParseUint(digits, 10, 64)
		if perr != nil {
			n = MaxRounds // only overflow is left: all digits, not empty
		}
		rounds, custom, rest = clampRounds(n), true, after
	}
	salt, _, _ = strings.Cut(rest, "$")
	if len(salt) > MaxSaltLen {
		salt = salt[:MaxSaltLen]
	}
	if strings.Trim(salt, b64) != "" {
		return nil, "", 0, false, ecode.Errorf(ecode.Inval, "SHA-crypt salt has characters outside ./0-9A-Za-z")
	}
	return v, salt, rounds, custom, nil
}

func clampRounds(n uint64) int {
	return int(min(max(n, MinRounds), MaxRounds))
}

// newSalt returns MaxSaltLen random characters from the crypt alphabet:
// 64 characters, so the low six bits of each random byte pick one evenly.
func newSalt() string {
	var r [MaxSaltLen]byte
	_, _ = rand.Read(r[:]) // crypto/rand.Read never fails; it crashes the program instead
	for i := range r {
		r[i] = b64[r[i]&0x3f]
	}
	return string(r[:])
}
