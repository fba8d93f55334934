package boltstore

import (
	"bytes"
	"errors"
	"math"
	"testing"
)

func TestKVCodec(t *testing.T) {
	tests := []struct {
		name  string
		h     kvHeader
		value []byte
	}{
		{"empty", kvHeader{}, nil},
		{"small", kvHeader{create: 1, mod: 2, version: 2}, []byte("v")},
		{"lease", kvHeader{create: 300, mod: 70000, version: 12, lease: 5}, []byte("value with \x00 bytes")},
		{"max", kvHeader{create: math.MaxInt64, mod: math.MaxInt64, version: math.MaxInt64, lease: math.MaxInt64}, make([]byte, 4096)},
	}
	for _, tc := range tests {
		enc := encodeKV(tc.h, tc.value)
		h, v, err := decodeKV(enc)
		if err != nil || h != tc.h || !bytes.Equal(v, tc.value) {
			t.Errorf("%s: decode(encode) = %+v %q %v", tc.name, h, v, err)
		}
		// The header stays small: 1 + 4 varints.
		if overhead := len(enc) - len(tc.value); tc.name == "small" && overhead != 5 {
			t.Errorf("%s: header of %d bytes, want 5", tc.name, overhead)
		}
	}
	for _, bad := range [][]byte{nil, {}, {2, 0, 0, 0, 0}, {1}, {1, 1, 1, 1}, {1, 0x80}, {1, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01, 0, 0, 0}} {
		if _, _, err := decodeKV(bad); !errors.Is(err, errCorrupt) {
			t.Errorf("decodeKV(%x) = %v, want errCorrupt", bad, err)
		}
	}
}

func TestLeaseCodec(t *testing.T) {
	l := leaseRecord{ttl: 30, expiry: 1 << 60}
	got, err := decodeLease(encodeLease(l))
	if err != nil || got != l {
		t.Errorf("decodeLease(encodeLease(%+v)) = %+v, %v", l, got, err)
	}
	if _, err := decodeLease(make([]byte, 15)); !errors.Is(err, errCorrupt) {
		t.Errorf("short lease record: %v", err)
	}
}

// FuzzDecodeKV checks that decoding never panics and that whatever decodes
// re-encodes to a record with the same meaning.
func FuzzDecodeKV(f *testing.F) {
	f.Add(encodeKV(kvHeader{create: 1, mod: 1, version: 1}, []byte("x")))
	f.Add(encodeKV(kvHeader{create: 5, mod: 900, version: 3, lease: 77}, nil))
	f.Add(encodeKV(kvHeader{create: math.MaxInt64, mod: math.MaxInt64, version: 1, lease: 1}, []byte("abc")))
	f.Add([]byte{1, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, rec []byte) {
		h, v, err := decodeKV(rec)
		if err != nil {
			return
		}
		if h.create < 0 || h.mod < 0 || h.version < 0 || h.lease < 0 {
			t.Fatalf("negative header field: %+v", h)
		}
		h2, v2, err := decodeKV(encodeKV(h, v))
		if err != nil || h2 != h || !bytes.Equal(v2, v) {
			t.Fatalf("re-encoding changed %+v %q into %+v %q (%v)", h, v, h2, v2, err)
		}
	})
}
