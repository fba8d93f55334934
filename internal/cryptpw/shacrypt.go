package cryptpw

import (
	"crypto/sha256"
	"crypto/sha512"
	"hash"
)

// A variant is one of the two SHA-crypt flavours: its hash, the "$N$"
// identifier of its strings and the order in which the final digest's
// bytes are taken three by three when encoding it.
type variant struct {
	alg    Algorithm
	id     string // "5" or "6"
	newH   func() hash.Hash
	size   int
	groups [][3]int // digest byte indexes, most significant first; -1 is a zero byte
}

var sha256Variant = &variant{
	alg: SHA256, id: "5", newH: sha256.New, size: sha256.Size,
	groups: [][3]int{
		{0, 10, 20}, {21, 1, 11}, {12, 22, 2}, {3, 13, 23}, {24, 4, 14},
		{15, 25, 5}, {6, 16, 26}, {27, 7, 17}, {18, 28, 8}, {9, 19, 29},
		{-1, 31, 30},
	},
}

var sha512Variant = &variant{
	alg: SHA512, id: "6", newH: sha512.New, size: sha512.Size,
	groups: [][3]int{
		{0, 21, 42}, {22, 43, 1}, {44, 2, 23}, {3, 24, 45}, {25, 46, 4},
		{47, 5, 26}, {6, 27, 48}, {28, 49, 7}, {50, 8, 29}, {9, 30, 51},
		{31, 52, 10}, {53, 11, 32}, {12, 33, 54}, {34, 55, 13}, {56, 14, 35},
		{15, 36, 57}, {37, 58, 16}, {59, 17, 38}, {18, 39, 60}, {40, 61, 19},
		{62, 20, 41}, {-1, -1, 63},
	},
}

// digest runs the SHA-crypt algorithm over key and salt (at most 16 bytes)
// for the given number of rounds and returns the final digest.
func (v *variant) digest(key, salt []byte, rounds int) []byte {
	// B = H(key salt key).
	h := v.newH()
	h.Write(key)
	h.Write(salt)
	h.Write(key)
	b := h.Sum(nil)

	// A = H(key salt, B repeated to the key's length, then for each bit of
	// the key's length from the lowest: B for a one, the key for a zero).
	h.Reset()
	h.Write(key)
	h.Write(salt)
	n := len(key)
	for ; n > v.size; n -= v.size {
		h.Write(b)
	}
	h.Write(b[:n])
	for n = len(key); n > 0; n >>= 1 {
		if n&1 != 0 {
			h.Write(b)
		} else {
			h.Write(key)
		}
	}
	a := h.Sum(nil)

	// P: H(key, once per byte of the key) repeated to the key's length.
	h.Reset()
	for range len(key) {
		h.Write(key)
	}
	dp := h.Sum(nil)
	p := make([]byte, len(key))
	for i := range p {
		p[i] = dp[i%v.size]
	}

	// S: H(salt, 16 + A[0] times) cut to the salt's length.
	h.Reset()
	for range 16 + int(a[0]) {
		h.Write(salt)
	}
	s := h.Sum(nil)[:len(salt)]

	c := a
	for i := range rounds {
		h.Reset()
		if i&1 != 0 {
			h.Write(p)
		} else {
			h.Write(c)
		}
		if i%3 != 0 {
			h.Write(s)
		}
		if i%7 != 0 {
			h.Write(p)
		}
		if i&1 != 0 {
			h.Write(c)
		} else {
			h.Write(p)
		}
		c = h.Sum(c[:0])
	}
	clear(b)
	clear(dp)
	clear(p)
	clear(s)
	return c
}

const b64 = "./0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

// encode writes the digest in crypt's base-64: each group of three bytes
// becomes a 24-bit number written least significant six bits first, four
// characters per group, fewer for the last (partial) one.
func (v *variant) encode(dst, d []byte) []byte {
	for gi, g := range v.groups {
		var w uint32
		for _, idx := range g {
			w <<= 8
			if idx >= 0 {
				w |= uint32(d[idx])
			}
		}
		chars := 4
		if gi == len(v.groups)-1 {
			// The last group carries the digest's remaining 1 or 2 bytes.
			chars = (v.size%3)*8/6 + 1
		}
		for range chars {
			dst = append(dst, b64[w&0x3f])
			w >>= 6
		}
	}
	return dst
}
