package boltstore

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/corral/corral/internal/store"
)

// On-disk layout. Every bucket and meta key is named here so the format is
// visible in one place.
var (
	bucketMeta      = []byte("meta")      // metaRev, metaLeaseID, metaFormat
	bucketKV        = []byte("kv")        // key -> header + value
	bucketLease     = []byte("lease")     // be64(id) -> be64(ttl) be64(expiry unix s)
	bucketLeaseKeys = []byte("leasekeys") // be64(id) + key -> empty

	metaRev     = []byte("rev")
	metaLeaseID = []byte("leaseid")
	metaFormat  = []byte("format")
)

// formatVersion is stored in the meta bucket and also leads every value
// header, so the encoding can change without guessing.
const formatVersion = 1

// maxKeyLen keeps a key plus the 8-byte lease id prefix within bbolt's key
// limit.
const maxKeyLen = 32768 - 8

var errCorrupt = errors.New("boltstore: corrupt record")

// kvHeader is the metadata stored before each value.
type kvHeader struct {
	create, mod, version, lease int64
}

// encodeKV returns a new buffer holding the header and value. The buffer is
// fresh because bbolt keeps a reference to it until the transaction commits.
func encodeKV(h kvHeader, value []byte) []byte {
	buf := make([]byte, 0, 1+4*binary.MaxVarintLen64+len(value))
	buf = append(buf, formatVersion)
	buf = binary.AppendUvarint(buf, uint64(h.create))
	buf = binary.AppendUvarint(buf, uint64(h.mod))
	buf = binary.AppendUvarint(buf, uint64(h.version))
	buf = binary.AppendUvarint(buf, uint64(h.lease))
	return append(buf, value...)
}

// decodeKV splits a stored record into its header and value; the value
// aliases rec.
func decodeKV(rec []byte) (kvHeader, []byte, error) {
	var h kvHeader
	if len(rec) == 0 || rec[0] != formatVersion {
		return h, nil, errCorrupt
	}
	p := rec[1:]
	for _, dst := range [...]*int64{&h.create, &h.mod, &h.version, &h.lease} {
		v, n := binary.Uvarint(p)
		if n <= 0 || v > 1<<63-1 {
			return h, nil, errCorrupt
		}
		*dst = int64(v)
		p = p[n:]
	}
	return h, p, nil
}

// toKV builds a store.KV; the value is copied out of bbolt's memory unless
// keysOnly.
func toKV(key string, rec []byte, keysOnly bool) (store.KV, error) {
	h, v, err := decodeKV(rec)
	if err != nil {
		return store.KV{}, fmt.Errorf("key %q: %w", key, err)
	}
	kv := store.KV{Key: key, CreateRevision: h.create, ModRevision: h.mod, Version: h.version, Lease: h.lease}
	if !keysOnly {
		kv.Value = append([]byte{}, v...)
	}
	return kv, nil
}

func be64(v int64) []byte {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], uint64(v))
	return b[:]
}

func getBE64(b []byte) (int64, error) {
	if len(b) != 8 {
		return 0, errCorrupt
	}
	return int64(binary.BigEndian.Uint64(b)), nil
}

// leaseRecord is a lease as persisted.
type leaseRecord struct {
	ttl    int64 // seconds
	expiry int64 // unix seconds, as granted; informational, see Open
}

func encodeLease(l leaseRecord) []byte {
	b := make([]byte, 16)
	binary.BigEndian.PutUint64(b, uint64(l.ttl))
	binary.BigEndian.PutUint64(b[8:], uint64(l.expiry))
	return b
}

func decodeLease(b []byte) (leaseRecord, error) {
	if len(b) != 16 {
		return leaseRecord{}, errCorrupt
	}
	return leaseRecord{
		ttl:    int64(binary.BigEndian.Uint64(b)),
		expiry: int64(binary.BigEndian.Uint64(b[8:])),
	}, nil
}

// leaseKey is the leasekeys bucket key attaching key to lease id.
func leaseKey(id int64, key string) []byte {
	b := make([]byte, 8, 8+len(key))
	binary.BigEndian.PutUint64(b, uint64(id))
	return append(b, key...)
}
