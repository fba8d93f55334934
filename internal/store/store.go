// Package store is Corral's key-value store with etcd's semantics: one global
// revision, transactions that compare revisions then apply operations (no
// interactive transactions), watches from a revision, and leases. bbolt is the
// embedded backend; an etcd backend implements the same interface, and the
// conformance suite in store/storetest holds both to it.
package store

import (
	"context"
	"errors"
)

// Limits shared by every backend, so code that works on bbolt also fits etcd.
const (
	MaxOpsPerTxn = 128
	MaxTxnBytes  = 1536 * 1024 // keys plus values of one transaction
	// GuardReserve is how many compares and operations per list a caller
	// that builds large transactions leaves free for the layers below it
	// that add their own: the election fence adds a compare, the etcd
	// backend a marker compare and put. With it, a fenced transaction on
	// etcd still fits etcd's default --max-txn-ops of 128.
	GuardReserve = 8
)

var (
	ErrCompacted = errors.New("store: requested revision has been compacted")
	ErrTooLarge  = errors.New("store: transaction exceeds size or operation limits")
	ErrNoLease   = errors.New("store: lease not found")
	ErrClosed    = errors.New("store: closed")
	// ErrUncertain marks a Txn whose outcome the backend could not learn
	// (a networked backend lost its cluster for longer than it retries,
	// or the caller's context ended while a write was in flight), or one
	// that applied but whose reads could not be recovered. The caller must
	// read the store to find out. bbolt never returns it.
	ErrUncertain = errors.New("store: transaction outcome unknown")
)

// KV is one stored key with its metadata.
type KV struct {
	Key            string
	Value          []byte
	CreateRevision int64 // revision of the put that created the key
	ModRevision    int64 // revision of the last put
	Version        int64 // number of puts since creation (1 after create)
	Lease          int64 // 0 when not attached to a lease
}

// CmpTarget selects what a Cmp compares.
type CmpTarget int

const (
	CmpModRevision CmpTarget = iota
	CmpCreateRevision
	CmpVersion
	CmpValue
)

// CmpOp is the comparison operator.
type CmpOp int

const (
	Equal CmpOp = iota
	NotEqual
	Less
	Greater
)

// Cmp is one condition of a transaction. A missing key has revisions and
// version 0 and matches no CmpValue comparison except NotEqual.
type Cmp struct {
	Key    string
	Target CmpTarget
	Op     CmpOp
	Rev    int64  // for revision and version targets
	Value  []byte // for CmpValue
}

// Helpers that read like etcd's clientv3.Compare.
func ModRevisionIs(key string, rev int64) Cmp {
	return Cmp{Key: key, Target: CmpModRevision, Op: Equal, Rev: rev}
}
func Missing(key string) Cmp { return Cmp{Key: key, Target: CmpCreateRevision, Op: Equal, Rev: 0} }
func Exists(key string) Cmp  { return Cmp{Key: key, Target: CmpCreateRevision, Op: Greater, Rev: 0} }

// OpType is the kind of a transaction operation.
type OpType int

const (
	OpPut OpType = iota
	OpDelete
	OpDeletePrefix
	OpGet
	OpGetPrefix
)

// Op is one operation of a transaction.
type Op struct {
	Type  OpType
	Key   string // the key, or the prefix for the *Prefix types
	Value []byte
	Lease int64 // for OpPut
}

func Put(key string, value []byte) Op { return Op{Type: OpPut, Key: key, Value: value} }
func PutWithLease(key string, value []byte, lease int64) Op {
	return Op{Type: OpPut, Key: key, Value: value, Lease: lease}
}
func Delete(key string) Op          { return Op{Type: OpDelete, Key: key} }
func DeletePrefix(prefix string) Op { return Op{Type: OpDeletePrefix, Key: prefix} }
func Get(key string) Op             { return Op{Type: OpGet, Key: key} }
func GetPrefix(prefix string) Op    { return Op{Type: OpGetPrefix, Key: prefix} }

// TxnResult reports which branch ran, the store revision after the
// transaction (unchanged if it wrote nothing), and one result per operation
// of the branch that ran (nil for writes, the found keys for gets).
type TxnResult struct {
	Succeeded bool
	Revision  int64
	Results   [][]KV
}

// EventType is put or delete.
type EventType int

const (
	EventPut EventType = iota
	EventDelete
)

// Event is one change seen by a watch. For deletes, KV has only Key and
// ModRevision (the revision of the delete).
type Event struct {
	Type EventType
	KV   KV
}

// WatchResponse carries the events of one or more revisions, in order. Err is
// set (and the channel then closed) when the watch cannot continue, e.g.
// ErrCompacted.
type WatchResponse struct {
	Events []Event
	Err    error
}

// RangeOptions narrows Range.
type RangeOptions struct {
	Limit    int    // 0 = no limit
	KeysOnly bool   // values left nil
	From     string // first key (inclusive) within the prefix; "" = from the start
}

// Store is the interface every backend implements. All methods are safe for
// concurrent use. Writes are durable (fsynced) when Txn returns.
type Store interface {
	// Get returns the key, or nil when it does not exist.
	Get(ctx context.Context, key string) (*KV, error)
	// Range returns the keys under prefix in key order, and the store revision
	// the read saw.
	Range(ctx context.Context, prefix string, opts RangeOptions) ([]KV, int64, error)
	// Txn applies then (if every cmp holds) or els, atomically and durably.
	Txn(ctx context.Context, cmps []Cmp, then []Op, els []Op) (TxnResult, error)
	// Watch streams changes under prefix from revision fromRev (inclusive; 0 =
	// from now). The channel closes when ctx ends or the store closes.
	Watch(ctx context.Context, prefix string, fromRev int64) <-chan WatchResponse
	// Grant creates a lease of ttlSeconds; keys put with it are deleted when
	// it expires or is revoked.
	Grant(ctx context.Context, ttlSeconds int64) (int64, error)
	KeepAlive(ctx context.Context, lease int64) error
	Revoke(ctx context.Context, lease int64) error
	// Revision returns the current store revision.
	Revision(ctx context.Context) (int64, error)
	// Backup writes a consistent copy of the store to path.
	Backup(ctx context.Context, path string) error
	Close() error
}

// MemberHealth is one member of a replicated store as cluster verify sees
// it.
type MemberHealth struct {
	Name      string
	Endpoint  string // the first client URL
	Leader    bool
	Healthy   bool   // answered its status and knows a leader
	Err       string // why not healthy
	DBSize    int64
	RaftIndex uint64
}

// HealthReporter is implemented by replicated backends (etcd): Health asks
// every member for its status. The embedded store has no members.
type HealthReporter interface {
	Health(ctx context.Context) ([]MemberHealth, error)
}
