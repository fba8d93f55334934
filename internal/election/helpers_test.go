package election

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/corral/corral/internal/etcdproc"
	"github.com/corral/corral/internal/etcdproc/etcdtest"
	"github.com/corral/corral/internal/store"
	"github.com/corral/corral/internal/store/boltstore"
	"github.com/corral/corral/internal/store/etcdstore"
)

// waitLimit bounds every wait for something asynchronous. Tests that must
// show a takeover is prompt use TTLs well above it.
const waitLimit = 15 * time.Second

// backend gives a test connections to one fresh keyspace.
type backend struct {
	name string
	// ttl is the shortest lease TTL the backend honours as asked (etcd
	// raises shorter ones to its minimum, 2 s with default raft settings).
	ttl time.Duration
	// open prepares a fresh keyspace and returns a function that opens a
	// new connection to it, closed when the test ends.
	open func(t *testing.T) func(t *testing.T) store.Store
}

var boltBackend = backend{name: "bolt", ttl: time.Second, open: func(t *testing.T) func(t *testing.T) store.Store {
	s, err := boltstore.Open(filepath.Join(t.TempDir(), "corral.db"), boltstore.Options{NoSync: true})
	if err != nil {
		t.Fatalf("boltstore.Open: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	// One embedded store has no separate connections: every caller shares
	// it, and closing a share does not close it.
	return func(*testing.T) store.Store { return noClose{s} }
}}

var etcdBackend = backend{name: "etcd", ttl: 2 * time.Second, open: func(t *testing.T) func(t *testing.T) store.Store {
	endpoints := sharedEtcd(t)
	prefix := newPrefix()
	return func(t *testing.T) store.Store { return openEtcd(t, endpoints, prefix) }
}}

// eachBackend runs f on bbolt, and on etcd when there is one (else that
// subtest skips, or fails under CORRAL_REQUIRE_ETCD=1).
func eachBackend(t *testing.T, f func(t *testing.T, b backend)) {
	for _, b := range []backend{boltBackend, etcdBackend} {
		t.Run(b.name, func(t *testing.T) { f(t, b) })
	}
}

type noClose struct{ store.Store }

func (noClose) Close() error { return nil }

// The etcd tests share one single-member etcd started by the first test
// that needs it; each test gets its own key prefix on it.
var shared struct {
	once    sync.Once
	dir     string
	cluster *etcdproc.Cluster
	err     error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if shared.cluster != nil {
		shared.cluster.Stop()
	}
	if shared.dir != "" {
		os.RemoveAll(shared.dir)
	}
	os.Exit(code)
}

func sharedEtcd(t testing.TB) []string {
	t.Helper()
	bin := etcdtest.Require(t)
	shared.once.Do(func() {
		if shared.dir, shared.err = os.MkdirTemp("", "election"); shared.err != nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		shared.cluster, shared.err = etcdproc.Start(ctx, etcdproc.Config{Binary: bin, Dir: shared.dir, ExitWithParent: true})
	})
	if shared.err != nil {
		t.Fatalf("shared etcd: %v", shared.err)
	}
	return shared.cluster.Endpoints()
}

var prefixes atomic.Int64

func newPrefix() string { return fmt.Sprintf("/election-test/%d/%d/", os.Getpid(), prefixes.Add(1)) }

func openEtcd(t testing.TB, endpoints []string, prefix string) store.Store {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	s, err := etcdstore.Open(ctx, etcdstore.Options{Endpoints: endpoints, Prefix: prefix})
	if err != nil {
		t.Fatalf("etcdstore.Open: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func ctxT(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// newT makes a candidate or fails the test.
func newT(t testing.TB, cfg Config) *Candidate {
	t.Helper()
	c, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return c
}

// campaignT wins a term or fails the test; the term is resigned when the
// test ends.
func campaignT(t testing.TB, c *Candidate) *Term {
	t.Helper()
	term, err := c.Campaign(ctxT(t, waitLimit))
	if err != nil {
		t.Fatalf("Campaign %s: %v", c.cfg.Name, err)
	}
	cleanupTerm(t, term)
	return term
}

func cleanupTerm(t testing.TB, term *Term) {
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		term.Resign(ctx)
	})
}

type campaignResult struct {
	term *Term
	err  error
}

// campaignAsync campaigns in the background; the result arrives on the
// channel, and a term won is resigned when the test ends.
func campaignAsync(t testing.TB, ctx context.Context, c *Candidate) <-chan campaignResult {
	ch := make(chan campaignResult, 1)
	go func() {
		term, err := c.Campaign(ctx)
		if term != nil {
			cleanupTerm(t, term)
		}
		ch <- campaignResult{term, err}
	}()
	return ch
}

// awaitWin waits for a campaign's result and fails the test unless it won.
func awaitWin(t testing.TB, ch <-chan campaignResult, who string) *Term {
	t.Helper()
	select {
	case r := <-ch:
		if r.err != nil {
			t.Fatalf("%s: Campaign: %v", who, r.err)
		}
		return r.term
	case <-time.After(waitLimit):
		t.Fatalf("%s did not win within %v", who, waitLimit)
	}
	return nil
}

// awaitDone waits for a term to end and returns why.
func awaitDone(t testing.TB, term *Term, who string) error {
	t.Helper()
	select {
	case <-term.Done():
		return term.Err()
	case <-time.After(waitLimit):
		t.Fatalf("%s's term did not end within %v", who, waitLimit)
	}
	return nil
}

// leaderT returns the current leader or fails the test.
func leaderT(t testing.TB, s store.Store, key string) Leader {
	t.Helper()
	l, err := CurrentLeader(ctxT(t, waitLimit), s, key)
	if err != nil {
		t.Fatalf("CurrentLeader: %v", err)
	}
	return l
}

// faulty wraps a store to simulate failures between one client and the
// store: a partition (calls and watch events wait until healed, then go
// through, as delayed packets would), renewals that hang, watches that
// deliver nothing.
type faulty struct {
	store.Store

	mu   sync.Mutex
	gate chan struct{} // non-nil while partitioned; closed by heal

	holdRenew atomic.Bool // KeepAlive hangs until its context ends
	hangOnce  atomic.Bool // the next KeepAlive hangs until its context ends
	holdWatch atomic.Bool // watch events are dropped
	// beforeTxn, when set, runs before each Txn with its 1-based number.
	beforeTxn func(n int64)
	txns      atomic.Int64
	keepAlive atomic.Int64 // successful renewals
	renewed   chan struct{}
}

func newFaulty(s store.Store) *faulty { return &faulty{Store: s, renewed: make(chan struct{}, 1000)} }

func (f *faulty) partition() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.gate == nil {
		f.gate = make(chan struct{})
	}
}

func (f *faulty) heal() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.gate != nil {
		close(f.gate)
		f.gate = nil
	}
}

// pass waits while the client is partitioned.
func (f *faulty) pass(ctx context.Context) error {
	f.mu.Lock()
	g := f.gate
	f.mu.Unlock()
	if g == nil {
		return ctx.Err()
	}
	select {
	case <-g:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (f *faulty) Get(ctx context.Context, key string) (*store.KV, error) {
	if err := f.pass(ctx); err != nil {
		return nil, err
	}
	return f.Store.Get(ctx, key)
}

func (f *faulty) Range(ctx context.Context, prefix string, opts store.RangeOptions) ([]store.KV, int64, error) {
	if err := f.pass(ctx); err != nil {
		return nil, 0, err
	}
	return f.Store.Range(ctx, prefix, opts)
}

func (f *faulty) Txn(ctx context.Context, cmps []store.Cmp, then, els []store.Op) (store.TxnResult, error) {
	if err := f.pass(ctx); err != nil {
		return store.TxnResult{}, err
	}
	n := f.txns.Add(1)
	if f.beforeTxn != nil {
		f.beforeTxn(n)
	}
	return f.Store.Txn(ctx, cmps, then, els)
}

func (f *faulty) Grant(ctx context.Context, ttl int64) (int64, error) {
	if err := f.pass(ctx); err != nil {
		return 0, err
	}
	return f.Store.Grant(ctx, ttl)
}

func (f *faulty) KeepAlive(ctx context.Context, lease int64) error {
	if err := f.pass(ctx); err != nil {
		return err
	}
	if f.holdRenew.Load() || f.hangOnce.Swap(false) {
		<-ctx.Done()
		return ctx.Err()
	}
	err := f.Store.KeepAlive(ctx, lease)
	if err == nil {
		f.keepAlive.Add(1)
		select {
		case f.renewed <- struct{}{}:
		default:
		}
	}
	return err
}

func (f *faulty) Revoke(ctx context.Context, lease int64) error {
	if err := f.pass(ctx); err != nil {
		return err
	}
	return f.Store.Revoke(ctx, lease)
}

func (f *faulty) Watch(ctx context.Context, prefix string, rev int64) <-chan store.WatchResponse {
	in := f.Store.Watch(ctx, prefix, rev)
	out := make(chan store.WatchResponse)
	go func() {
		defer close(out)
		for resp := range in {
			if f.pass(ctx) != nil {
				return
			}
			if f.holdWatch.Load() && resp.Err == nil {
				continue
			}
			select {
			case out <- resp:
			case <-ctx.Done():
				return
			}
		}
	}()
	return out
}

// isFenced reports whether err is a refusal by the fence.
func isFenced(err error) bool { return errors.Is(err, ErrFenced) }
