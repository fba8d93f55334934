// Package etcdstore is the store.Store backend on an etcd cluster, through
// etcd's v3 Go client. etcd already has the store's model (one global
// revision, compare-then-ops transactions, watches from a revision, leases),
// so most calls map one to one; revisions are etcd's own.
//
// Every key lives under Options.Prefix, so several clusters (or tests) can
// share one etcd. The prefix is invisible to callers: keys, ranges and
// watch events are all relative to it.
//
// Where the store's contract and etcd differ, this backend bridges the gap
// rather than leaking it (see guarded on value compares of missing keys).
//
// # Writes whose outcome is always known
//
// When the member serving a transaction dies, or the cluster loses its
// leader, while the transaction is in flight, the answer is lost
// ("connection reset", "request timed out"): the transaction may or may not
// have applied, and etcd's client never sends a write twice. So every
// transaction that writes carries a marker, the key "<prefix without its
// last />\x00txn/<128-bit random id>". "\x00" sorts before "/", so markers
// lie outside every range of the store's keys and no Range, Watch or
// DeletePrefix of the store ever sees them. The caller's transaction is
// nested in an outer one that runs it only while the marker is missing, and
// each branch that writes also puts the marker, valued "then" or "else", in
// the same revision as its writes (on a first try, a branch that changes
// nothing, because it only reads or its deletes find nothing, puts no marker
// and keeps the revision: running it is as good as not running it). After a
// failure that may have applied (anything but etcd's refusals: see refused),
// Txn backs off, reads the marker and, if it is there, returns the result it
// records (the branch and, as its mod revision, the revision); otherwise it
// sends the transaction again with the same marker, now put by both branches
// so that an earlier try still in flight can no longer apply after this one
// answers. An outer compare that fails because the marker appeared meanwhile
// yields the marker the same way. Reads in a branch that applied are read
// again at its revision when that gives the same keys (no later write of the
// branch touches them); otherwise the result is store.ErrUncertain. When
// Options.RetryBound has passed, Txn fences the transaction off by putting
// its marker as "none" if it is still missing, so that no try can apply
// later, and returns an ordinary error: one wrapping store.ErrUncertain only
// when even that failed. A refusal that follows a try of unknown fate is
// returned after the same fence. Markers are attached to leases that are
// never kept alive (a new one every minute or every 500 markers, whichever
// comes first, each living three minutes by default), so they go by
// themselves, a few hundred at a time. Their puts share the revision of the writes they
// mark; their expiry moves the store's revision, as other writers do, with
// no event in the store's watches. A store on the whole keyspace (Prefix "")
// has no room for markers: its writes are not retried, and a failure that
// may have applied wraps store.ErrUncertain. Transactions that only read are
// retried freely.
package etcdstore

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/corral/corral/internal/store"
)

// Options configures Open.
type Options struct {
	// Endpoints are the members' client URLs, e.g. "https://10.0.0.1:2379".
	// The client spreads requests over them and fails over between them.
	Endpoints []string
	// TLS is the client's TLS configuration: its certificate and the CA
	// the members' certificates must chain to (etcd traffic is mutual TLS
	// in production). nil means plain connections. When ServerName is
	// empty, each member's certificate is checked against its endpoint's
	// host.
	TLS *tls.Config
	// Prefix is put in front of every key; "" gives the store the whole
	// keyspace. It must end with "/" so that no store's keys fall inside
	// another's.
	Prefix string
	// DialTimeout bounds Open's first contact with the cluster (default 5s).
	DialTimeout time.Duration
	// Logger receives the store's and the etcd client's messages; nil
	// discards them.
	Logger *slog.Logger
	// RetryBound bounds how long Txn keeps retrying a transaction whose
	// tries fail with the cluster in trouble (default 30 s); the caller's
	// context bounds it too.
	RetryBound time.Duration
	// AttemptTimeout bounds one try of a transaction (default 5 s), so
	// that a request stuck on a dead member or behind a lost leader is
	// retried on another before etcd's own timeout (7 s or more).
	AttemptTimeout time.Duration
	// MarkerTTL is the TTL of the leases of transaction markers (default
	// 3 min). A lease takes new markers during the first third of its
	// life, and a marker must outlive every try of its transaction, so
	// Open refuses a TTL below 1.5 × (RetryBound + 2 × AttemptTimeout).
	// Tests shorten it to watch markers expire.
	MarkerTTL time.Duration
}

const (
	defaultDialTimeout = 5 * time.Second
	// requestOverhead is what a transaction may add to its keys and values
	// on the wire: protobuf framing and the key prefix (at most
	// store.MaxTxnBytes plus this must fit etcd's --max-request-bytes,
	// which etcdproc sets to the same sum). The client lets through
	// another half MiB so that a request too large for the member is
	// refused by the member, with its own error, and not by the client.
	requestOverhead = 512 * 1024
	maxSendBytes    = store.MaxTxnBytes + 2*requestOverhead
	// Keep-alive pings detect a member that vanished without closing its
	// connections. etcd refuses pings more often than every 5 s.
	keepAliveTime    = 10 * time.Second
	keepAliveTimeout = 5 * time.Second
	// maxLeaseTTL is etcd's limit, in seconds.
	maxLeaseTTL = 9_000_000_000
)

// Store is a store.Store on etcd.
type Store struct {
	cli    *clientv3.Client
	prefix string
	log    *slog.Logger

	// ctx is the parent of every watch; Close cancels it.
	ctx    context.Context
	cancel context.CancelFunc

	mu        sync.Mutex // guards closed against watches being added
	closed    atomic.Bool
	watches   sync.WaitGroup
	closeOnce sync.Once
	closeErr  error

	// Transaction markers (see the package doc and marker.go).
	markers        string // etcd key prefix of the markers; "" = none
	retryBound     time.Duration
	attemptTimeout time.Duration
	markerTTL      time.Duration
	// markersPerLease caps the markers of one lease (see
	// defaultMarkersPerLease); tests lower it.
	markersPerLease int64
	lease           atomic.Pointer[markerLease]
	leaseSem        chan struct{} // one grant at a time
	now             func() time.Time
	// retries counts tries sent again after an unknown outcome; settled
	// counts outcomes learned from a marker.
	retries, settled atomic.Int64

	// testHookGuarded runs between the read and the write of a guarded
	// transaction (see guarded).
	testHookGuarded func()
	// testHookSend, when set, sends each try of a transaction in place of
	// send, so that tests can lose replies or requests.
	testHookSend func(ctx context.Context, sends int, req etcdTxn, send func(context.Context, etcdTxn) (*clientv3.TxnResponse, error)) (*clientv3.TxnResponse, error)
}

var _ store.Store = (*Store)(nil)

// Open connects to the cluster and checks that it answers within the dial
// timeout.
func Open(ctx context.Context, opts Options) (*Store, error) {
	if len(opts.Endpoints) == 0 {
		return nil, errors.New("etcdstore: no endpoints")
	}
	if opts.Prefix != "" && !strings.HasSuffix(opts.Prefix, "/") {
		return nil, fmt.Errorf("etcdstore: prefix %q does not end with /", opts.Prefix)
	}
	if opts.DialTimeout <= 0 {
		opts.DialTimeout = defaultDialTimeout
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.RetryBound <= 0 {
		opts.RetryBound = defaultRetryBound
	}
	if opts.AttemptTimeout <= 0 {
		opts.AttemptTimeout = defaultAttemptTimeout
	}
	if opts.MarkerTTL <= 0 {
		opts.MarkerTTL = defaultMarkerTTL
	}
	if need := 3 * (opts.RetryBound + 2*opts.AttemptTimeout) / 2; opts.MarkerTTL < need {
		return nil, fmt.Errorf("etcdstore: marker TTL %v is shorter than 1.5 × (retry bound %v + 2 × attempt timeout %v) = %v",
			opts.MarkerTTL, opts.RetryBound, opts.AttemptTimeout, need)
	}
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:            opts.Endpoints,
		TLS:                  opts.TLS,
		DialTimeout:          opts.DialTimeout,
		DialKeepAliveTime:    keepAliveTime,
		DialKeepAliveTimeout: keepAliveTimeout,
		MaxCallSendMsgSize:   maxSendBytes,
		Logger:               zap.New(newSlogCore(opts.Logger.Handler())).Named("etcd-client"),
	})
	if err != nil {
		return nil, fmt.Errorf("etcdstore: %w", err)
	}
	sctx, cancel := context.WithCancel(context.Background())
	s := &Store{cli: cli, prefix: opts.Prefix, log: opts.Logger, ctx: sctx, cancel: cancel,
		markers: markerSpace(opts.Prefix), retryBound: opts.RetryBound, attemptTimeout: opts.AttemptTimeout,
		markerTTL: opts.MarkerTTL, markersPerLease: defaultMarkersPerLease, leaseSem: make(chan struct{}, 1), now: time.Now}
	cctx, ccancel := context.WithTimeout(ctx, opts.DialTimeout)
	defer ccancel()
	rev, err := s.Revision(cctx)
	if err != nil {
		s.Close()
		return nil, fmt.Errorf("etcdstore: contacting %s: %w", strings.Join(opts.Endpoints, ","), err)
	}
	s.log.Debug("etcd store opened", "endpoints", opts.Endpoints, "prefix", opts.Prefix, "revision", rev)
	return s, nil
}

// Close ends every watch and closes the client. Leases and keys stay in
// etcd: another client (a new master) carries on with them.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		s.mu.Lock()
		s.closed.Store(true)
		s.mu.Unlock()
		s.cancel()
		s.watches.Wait()
		if err := s.cli.Close(); err != nil && !errors.Is(err, context.Canceled) {
			s.closeErr = fmt.Errorf("etcdstore: close: %w", err)
		}
	})
	return s.closeErr
}

// check fails a call that cannot start.
func (s *Store) check(ctx context.Context) error {
	if s.closed.Load() {
		return store.ErrClosed
	}
	return ctx.Err()
}

// Get implements store.Store.
func (s *Store) Get(ctx context.Context, key string) (*store.KV, error) {
	if err := s.check(ctx); err != nil {
		return nil, fmt.Errorf("get %q: %w", key, err)
	}
	if key == "" {
		return nil, nil // the store never holds an empty key
	}
	resp, err := s.cli.Get(ctx, s.prefix+key)
	if err != nil {
		return nil, fmt.Errorf("get %q: %w", key, s.mapErr(err))
	}
	if len(resp.Kvs) == 0 {
		return nil, nil
	}
	kv := s.fromKV(resp.Kvs[0])
	return &kv, nil
}

// Range implements store.Store.
func (s *Store) Range(ctx context.Context, prefix string, opts store.RangeOptions) ([]store.KV, int64, error) {
	if err := s.check(ctx); err != nil {
		return nil, 0, fmt.Errorf("range %q: %w", prefix, err)
	}
	key, end := s.span(prefix)
	if opts.From > prefix {
		key = s.prefix + opts.From
	}
	ops := []clientv3.OpOption{clientv3.WithRange(end)}
	if opts.Limit > 0 {
		ops = append(ops, clientv3.WithLimit(int64(opts.Limit)))
	}
	if opts.KeysOnly {
		ops = append(ops, clientv3.WithKeysOnly())
	}
	resp, err := s.cli.Get(ctx, key, ops...)
	if err != nil {
		return nil, 0, fmt.Errorf("range %q: %w", prefix, s.mapErr(err))
	}
	return s.fromKVs(resp.Kvs), resp.Header.Revision, nil
}

// Revision implements store.Store. etcd has no call for the revision alone:
// a linearizable count of one key carries it in its header.
func (s *Store) Revision(ctx context.Context) (int64, error) {
	if err := s.check(ctx); err != nil {
		return 0, fmt.Errorf("revision: %w", err)
	}
	key := s.prefix
	if key == "" {
		key = "\x00"
	}
	resp, err := s.cli.Get(ctx, key, clientv3.WithCountOnly())
	if err != nil {
		return 0, fmt.Errorf("revision: %w", s.mapErr(err))
	}
	return resp.Header.Revision, nil
}

// span returns the etcd range [key, end) of the store's keys that start
// with prefix. An end of "\x00" is etcd's "to the end of the keyspace".
func (s *Store) span(prefix string) (key, end string) {
	key = s.prefix + prefix
	if key == "" {
		return "\x00", "\x00"
	}
	end = store.PrefixEnd(key)
	if end == "" {
		end = "\x00"
	}
	return key, end
}

// fromKV converts an etcd key-value; the key loses the store's prefix.
// Values are not copied: the client decodes each response into fresh
// memory that nothing else refers to.
func (s *Store) fromKV(kv *mvccpb.KeyValue) store.KV {
	return store.KV{
		Key:            string(kv.Key[len(s.prefix):]),
		Value:          kv.Value,
		CreateRevision: kv.CreateRevision,
		ModRevision:    kv.ModRevision,
		Version:        kv.Version,
		Lease:          kv.Lease,
	}
}

func (s *Store) fromKVs(kvs []*mvccpb.KeyValue) []store.KV {
	if len(kvs) == 0 {
		return nil
	}
	out := make([]store.KV, len(kvs))
	for i, kv := range kvs {
		out[i] = s.fromKV(kv)
	}
	return out
}

// mapErr turns the etcd client's errors into the store's, keeping the
// original in the chain. After Close every failure is store.ErrClosed,
// whatever the client made of its connections going away.
func (s *Store) mapErr(err error) error {
	if err == nil {
		return nil
	}
	if s.closed.Load() {
		return fmt.Errorf("%w (%w)", store.ErrClosed, err)
	}
	if target := storeError(err); target != nil {
		return fmt.Errorf("%w (etcd: %w)", target, err)
	}
	return err
}

// storeError is the store error that err stands for, or nil.
func storeError(err error) error {
	switch {
	case errors.Is(err, rpctypes.ErrLeaseNotFound):
		return store.ErrNoLease
	case errors.Is(err, rpctypes.ErrRequestTooLarge), errors.Is(err, rpctypes.ErrTooManyOps):
		return store.ErrTooLarge
	case errors.Is(err, rpctypes.ErrCompacted):
		return store.ErrCompacted
	case errors.Is(err, rpctypes.ErrDuplicateKey):
		return store.ErrDuplicateKey
	case errors.Is(err, rpctypes.ErrEmptyKey), errors.Is(err, rpctypes.ErrLeaseTTLTooLarge):
		return store.ErrInvalid
	}
	// gRPC refuses an oversized message on either side with this code,
	// before etcd sees it; etcd's own refusals arrive as the errors above.
	if st, ok := status.FromError(err); ok && st.Code() == codes.ResourceExhausted && strings.Contains(st.Message(), "larger than max") {
		return store.ErrTooLarge
	}
	return nil
}
