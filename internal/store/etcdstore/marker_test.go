package etcdstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/corral/corral/internal/store"
)

func TestRefused(t *testing.T) {
	tests := []struct {
		name    string
		err     error
		refused bool
	}{
		// Refusals: etcd applied nothing, and says so.
		{"too large", rpctypes.ErrRequestTooLarge, true},
		{"too many ops", rpctypes.ErrTooManyOps, true},
		{"duplicate key", rpctypes.ErrDuplicateKey, true},
		{"lease not found", rpctypes.ErrLeaseNotFound, true},
		{"no space", rpctypes.ErrNoSpace, true},
		{"too many requests", rpctypes.ErrTooManyRequests, true},
		{"permission denied", rpctypes.ErrPermissionDenied, true},
		{"invalid auth token", rpctypes.ErrInvalidAuthToken, true},
		{"not capable", rpctypes.ErrNotCapable, true},
		{"compacted", rpctypes.ErrCompacted, true},
		{"raw grpc invalid argument", rpctypes.ErrGRPCDuplicateKey, true},
		{"client-side message too large", status.Error(codes.ResourceExhausted, "trying to send message larger than max (3000000 vs. 2621440)"), true},
		{"wrapped refusal", fmt.Errorf("txn: %w", rpctypes.ErrLeaseNotFound), true},
		{"mapped refusal", (&Store{}).mapErr(rpctypes.ErrRequestTooLarge), true},
		// Unknown outcomes: the request may have been applied.
		{"request timed out", rpctypes.ErrTimeout, false},
		{"timeout, leader failed", rpctypes.ErrTimeoutDueToLeaderFail, false},
		{"timeout, connection lost", rpctypes.ErrTimeoutDueToConnectionLost, false},
		{"no leader", rpctypes.ErrNoLeader, false},
		{"leader changed", rpctypes.ErrLeaderChanged, false},
		{"server stopped", rpctypes.ErrStopped, false},
		{"unhealthy", rpctypes.ErrUnhealthy, false},
		{"corrupt", rpctypes.ErrCorrupt, false},
		{"connection reset", status.Error(codes.Unavailable, "error reading from server: read tcp: connection reset by peer"), false},
		{"connection refused", status.Error(codes.Unavailable, "connection error: dial tcp 127.0.0.1:1: connect: connection refused"), false},
		{"grpc deadline", status.Error(codes.DeadlineExceeded, "context deadline exceeded"), false},
		{"grpc canceled", status.Error(codes.Canceled, "the client connection is closing"), false},
		{"grpc internal", status.Error(codes.Internal, "stream terminated"), false},
		{"grpc unknown", status.Error(codes.Unknown, "?"), false},
		{"context deadline", context.DeadlineExceeded, false},
		{"context canceled", context.Canceled, false},
		{"deadline wrapped with a refusal code", fmt.Errorf("%w (%w)", context.DeadlineExceeded, rpctypes.ErrNoSpace), false},
		{"eof", io.ErrUnexpectedEOF, false},
		{"plain error", errors.New("something else"), false},
		{"nil", nil, false},
	}
	for _, tc := range tests {
		if got := refused(tc.err); got != tc.refused {
			t.Errorf("%s: refused(%v) = %v, want %v", tc.name, tc.err, got, tc.refused)
		}
	}
}

// TestMarkerSpace: markers lie outside every range of the store's keys.
func TestMarkerSpace(t *testing.T) {
	for _, prefix := range []string{"/", "/c/", "/corral/dev.corral/", "/a/b/"} {
		s := &Store{prefix: prefix, markers: markerSpace(prefix)}
		marker := s.markers + "AAAAAAAAAAAAAAAAAAAAAAAAAA"
		if !strings.HasPrefix(marker, strings.TrimSuffix(prefix, "/")) || strings.HasPrefix(marker, prefix) {
			t.Errorf("under %q: marker %q", prefix, marker)
		}
		for _, user := range []string{"", "\x00", "a", "\xff", "\xff\xff", "txn/", "/"} {
			key, end := s.span(user)
			if marker >= key && (end == "\x00" || marker < end) {
				t.Errorf("under %q: marker %q is inside the span [%q, %q) of %q", prefix, marker, key, end, user)
			}
		}
	}
	if m := markerSpace(""); m != "" {
		t.Errorf("the whole keyspace has marker space %q", m)
	}
}

func TestReadsRecoverable(t *testing.T) {
	tests := []struct {
		name string
		ops  []store.Op
		want bool
	}{
		{"no reads", []store.Op{store.Put("a", nil), store.Delete("b")}, true},
		{"read after its write", []store.Op{store.Put("a", nil), store.Get("a")}, true},
		{"read before another key's write", []store.Op{store.Get("a"), store.Put("b", nil)}, true},
		{"read before its write", []store.Op{store.Get("a"), store.Put("a", nil)}, false},
		{"read before its delete", []store.Op{store.Get("a"), store.Delete("a")}, false},
		{"prefix read before a write in it", []store.Op{store.GetPrefix("p/"), store.Put("p/x", nil)}, false},
		{"prefix read before a write beside it", []store.Op{store.GetPrefix("p/"), store.Put("p0", nil), store.Put("p", nil)}, true},
		{"read before a prefix delete over it", []store.Op{store.Get("p/x"), store.DeletePrefix("p/")}, false},
		{"read before a prefix delete beside it", []store.Op{store.Get("q"), store.DeletePrefix("p/")}, true},
		{"read before a delete of everything", []store.Op{store.Get("zzz"), store.DeletePrefix("")}, false},
		{"read of everything before a write", []store.Op{store.GetPrefix(""), store.Put("\xff", nil)}, false},
		{"read of a \\xff prefix before a write past it", []store.Op{store.GetPrefix("\xff"), store.Put("\xff\xff", nil)}, false},
		{"key with a zero byte after", []store.Op{store.Get("a"), store.Put("a\x00", nil)}, true},
		{"reads only", []store.Op{store.Get("a"), store.GetPrefix("")}, true},
		// The store's own conformance case: later reads see earlier
		// writes, an early read precedes a delete of its key.
		{"conformance", []store.Op{store.Get("p/a"), store.Get("missing"), store.GetPrefix("p/"),
			store.Put("p/c", nil), store.Get("p/c"), store.Delete("p/a"), store.GetPrefix("p/")}, false},
	}
	for _, tc := range tests {
		if got := readsRecoverable(tc.ops); got != tc.want {
			t.Errorf("%s: readsRecoverable = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestBranchMark(t *testing.T) {
	s := &Store{prefix: "/c/"}
	big := strings.Repeat("k", maxEmptinessBytes)
	tests := []struct {
		name     string
		ops      []store.Op
		markBoth bool
		want     branchMark
	}{
		{"reads only", []store.Op{store.Get("a")}, false, unmarked},
		{"empty", nil, false, unmarked},
		{"put", []store.Op{store.Delete("a"), store.Put("b", nil)}, false, marked},
		{"deletes", []store.Op{store.Delete("a"), store.Get("b"), store.DeletePrefix("c/")}, false, markedIfChanged},
		{"deletes of long keys", []store.Op{store.Delete(big)}, false, marked},
		{"retry of reads", []store.Op{store.Get("a")}, true, marked},
		{"retry of deletes", []store.Op{store.Delete("a")}, true, marked},
	}
	for _, tc := range tests {
		if got := s.branchMark(tc.ops, store.HasWrites(tc.ops), tc.markBoth); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

// errLost stands for a reply lost with its connection.
var errLost = status.Error(codes.Unavailable, "error reading from server: connection reset by peer (injected)")

// loseReplies makes the store send the first n tries of each transaction
// and then report them lost.
func loseReplies(s *Store, n int) {
	s.testHookSend = func(ctx context.Context, sends int, req etcdTxn, send func(context.Context, etcdTxn) (*clientv3.TxnResponse, error)) (*clientv3.TxnResponse, error) {
		resp, err := send(ctx, req)
		if err == nil && sends <= n {
			return nil, errLost
		}
		return resp, err
	}
}

// holdFirst makes the store keep the first try of each transaction instead
// of sending it (reporting it lost), and fail the tries up to fail the
// same way; later tries go out. The kept try is returned on held.
func holdFirst(s *Store, fail int, held chan<- etcdTxn) {
	s.testHookSend = func(ctx context.Context, sends int, req etcdTxn, send func(context.Context, etcdTxn) (*clientv3.TxnResponse, error)) (*clientv3.TxnResponse, error) {
		if sends == 1 {
			held <- req
		}
		if sends <= fail {
			return nil, errLost
		}
		return send(ctx, req)
	}
}

func markersOf(t *testing.T, s *Store) []*mvccpb.KeyValue {
	t.Helper()
	resp, err := s.cli.Get(ctxT(t), s.markers, clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	return resp.Kvs
}

// TestLostReply: a try that applied but whose reply was lost is not
// applied again, and Txn returns what the try would have.
func TestLostReply(t *testing.T) {
	ctx := ctxT(t)
	type txn struct {
		cmps      []store.Cmp
		then, els []store.Op
	}
	ne := func(key, value string) store.Cmp {
		return store.Cmp{Key: key, Target: store.CmpValue, Op: store.NotEqual, Value: []byte(value)}
	}
	tests := []struct {
		name    string
		txn     txn
		lost    int  // replies lost
		settled bool // the outcome comes from the marker
		// uncertain: the txn applied, but Txn cannot tell its results.
		uncertain bool
		// shift: the revisions the retries' markers add.
		shift int64
	}{
		{"put", txn{nil, []store.Op{store.Put("k", []byte("v"))}, nil}, 1, true, false, 0},
		{"compare holds", txn{[]store.Cmp{store.Exists("seed")}, []store.Op{store.Put("k", []byte("v"))}, []store.Op{store.Put("e", nil)}}, 1, true, false, 0},
		{"else writes", txn{[]store.Cmp{store.Missing("seed")}, []store.Op{store.Put("k", nil)}, []store.Op{store.Put("e", []byte("x")), store.Get("seed")}}, 1, true, false, 0},
		{"read after write", txn{nil, []store.Op{store.Put("k", []byte("v")), store.Get("k"), store.GetPrefix(""), store.Get("none")}, nil}, 1, true, false, 0},
		{"read before write", txn{nil, []store.Op{store.Get("seed"), store.Put("seed", []byte("new"))}, nil}, 1, true, true, 0},
		{"delete", txn{nil, []store.Op{store.Get("seed"), store.Delete("seed")}, nil}, 1, true, true, 0},
		{"delete prefix", txn{nil, []store.Op{store.DeletePrefix("se"), store.Get("k")}, nil}, 1, true, false, 0},
		// These change nothing on their first try, so there is no
		// marker and the transaction is sent again; the retry puts
		// the marker.
		{"delete nothing", txn{nil, []store.Op{store.Delete("none"), store.Get("seed")}, nil}, 1, false, false, 1},
		{"read-only else", txn{[]store.Cmp{store.Missing("seed")}, []store.Op{store.Put("k", nil)}, []store.Op{store.Get("seed")}}, 1, false, false, 1},
		{"read-only else, retry lost too", txn{[]store.Cmp{store.Missing("seed")}, []store.Op{store.Put("k", nil)}, []store.Op{store.Get("seed")}}, 2, true, false, 1},
		{"guarded compare", txn{[]store.Cmp{ne("seed", "other")}, []store.Op{store.Put("k", []byte("v")), store.Get("k")}, nil}, 1, true, false, 0},
		{"guarded compare false", txn{[]store.Cmp{ne("seed", "s")}, []store.Op{store.Put("k", nil)}, []store.Op{store.Put("e", nil)}}, 1, true, false, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			// The same transaction on a store that loses nothing gives
			// the expected result.
			run := func(lost int) (*Store, store.TxnResult, error, int64) {
				s := openT(t, Options{})
				if _, err := s.Txn(ctx, nil, []store.Op{store.Put("seed", []byte("s"))}, nil); err != nil {
					t.Fatal(err)
				}
				before, _ := s.Revision(ctx)
				loseReplies(s, lost)
				res, err := s.Txn(ctx, tc.txn.cmps, tc.txn.then, tc.txn.els)
				s.testHookSend = nil
				return s, res, err, before
			}
			ref, want, err, refBefore := run(0)
			if err != nil {
				t.Fatal(err)
			}
			s, got, err, before := run(tc.lost)
			if tc.uncertain {
				if !errors.Is(err, store.ErrUncertain) || !strings.Contains(err.Error(), "applied at revision") {
					t.Fatalf("Txn = %+v, %v; want ErrUncertain saying it applied", got, err)
				}
			} else if err != nil {
				t.Fatalf("Txn: %v", err)
			}
			if settled := s.settled.Load() > 0; settled != tc.settled {
				t.Errorf("outcome settled from the marker: %v, want %v", settled, tc.settled)
			}
			// Same data, at the same revisions relative to the start:
			// applied once.
			shift := tc.shift
			if !tc.uncertain {
				if got.Succeeded != want.Succeeded || got.Revision-before != want.Revision-refBefore+shift {
					t.Errorf("result %+v, want %+v (revisions from %d and %d)", got, want, before, refBefore)
				}
				if fmt.Sprint(relative(got.Results, before, shift)) != fmt.Sprint(relative(want.Results, refBefore, 0)) {
					t.Errorf("results %v, want %v", relative(got.Results, before, shift), relative(want.Results, refBefore, 0))
				}
			}
			gotKVs, _, err := s.Range(ctx, "", store.RangeOptions{})
			if err != nil {
				t.Fatal(err)
			}
			wantKVs, _, err := ref.Range(ctx, "", store.RangeOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if fmt.Sprint(relative([][]store.KV{gotKVs}, before, shift)) != fmt.Sprint(relative([][]store.KV{wantKVs}, refBefore, 0)) {
				t.Errorf("data %v, want %v", relative([][]store.KV{gotKVs}, before, shift), relative([][]store.KV{wantKVs}, refBefore, 0))
			}
		})
	}
}

// relative renders results with revisions counted from base (and those
// after it shifted back by shift), so results of two stores compare.
func relative(results [][]store.KV, base, shift int64) []string {
	rel := func(rev int64) int64 {
		if rev > base {
			return rev - base - shift
		}
		return 0 // before the transaction: the seed
	}
	var out []string
	for _, kvs := range results {
		var parts []string
		for _, kv := range kvs {
			parts = append(parts, fmt.Sprintf("%s=%q@c%d/m%d/v%d", kv.Key, kv.Value, rel(kv.CreateRevision), rel(kv.ModRevision), kv.Version))
		}
		out = append(out, "["+strings.Join(parts, " ")+"]")
	}
	return out
}

// TestDelayedTry: a try that reaches etcd after a later one was sent (it
// sat in a dead member's queue) is not applied, and the later try learns
// the outcome from the marker.
func TestDelayedTry(t *testing.T) {
	s := openT(t, Options{})
	ctx := ctxT(t)
	held := make(chan etcdTxn, 1)
	// The held first try arrives just before the second.
	s.testHookSend = func(ctx context.Context, sends int, req etcdTxn, send func(context.Context, etcdTxn) (*clientv3.TxnResponse, error)) (*clientv3.TxnResponse, error) {
		if sends == 1 {
			held <- req
			return nil, errLost
		}
		if _, err := send(ctx, <-held); err != nil {
			t.Errorf("sending the held try: %v", err)
		}
		return send(ctx, req)
	}
	res, err := s.Txn(ctx, []store.Cmp{store.Missing("k")}, []store.Op{store.Put("k", []byte("v"))}, []store.Op{store.Put("else", nil)})
	if err != nil {
		t.Fatal(err)
	}
	kv, _ := s.Get(ctx, "k")
	if !res.Succeeded || kv == nil || kv.ModRevision != res.Revision || kv.Version != 1 {
		t.Errorf("Txn = %+v, k = %+v; want the then branch once, at the result's revision", res, kv)
	}
	if kv, _ := s.Get(ctx, "else"); kv != nil {
		t.Errorf("the else branch ran too")
	}
	if s.settled.Load() != 1 {
		t.Errorf("outcome not learned from the marker")
	}
}

// TestRetryMarksBothBranches: once a try's outcome is unknown, the retry's
// answer rules out the earlier try applying later, even when the retry
// ran a branch that only reads.
func TestRetryMarksBothBranches(t *testing.T) {
	s := openT(t, Options{})
	ctx := ctxT(t)
	if _, err := s.Txn(ctx, nil, []store.Op{store.Put("gate", nil)}, nil); err != nil {
		t.Fatal(err)
	}
	held := make(chan etcdTxn, 1)
	holdFirst(s, 1, held)
	res, err := s.Txn(ctx, []store.Cmp{store.Missing("gate")}, []store.Op{store.Put("then", nil)}, []store.Op{store.Get("gate")})
	s.testHookSend = nil
	if err != nil || res.Succeeded || len(res.Results) != 1 || len(res.Results[0]) != 1 {
		t.Fatalf("Txn = %+v, %v; want the else branch's read", res, err)
	}
	// The compare would now hold, but the held try must not apply.
	if _, err := s.Txn(ctx, nil, []store.Op{store.Delete("gate")}, nil); err != nil {
		t.Fatal(err)
	}
	resp, err := s.send(ctx, <-held)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Succeeded {
		t.Errorf("the held first try applied after the retry answered")
	}
	if kv, _ := s.Get(ctx, "then"); kv != nil {
		t.Errorf("then branch ran: %+v", kv)
	}
}

// TestGiveUp: when no try gets through within the bound, the transaction
// is fenced off, so the error is definite: no try applies later.
func TestGiveUp(t *testing.T) {
	s := openT(t, Options{RetryBound: 300 * time.Millisecond})
	ctx := ctxT(t)
	held := make(chan etcdTxn, 1)
	holdFirst(s, 1<<30, held)
	_, err := s.Txn(ctx, nil, []store.Op{store.Put("k", nil)}, nil)
	if err == nil || errors.Is(err, store.ErrUncertain) {
		t.Fatalf("Txn: %v; want a definite failure", err)
	}
	if !strings.Contains(err.Error(), "not applied") || !strings.Contains(err.Error(), "injected") {
		t.Errorf("Txn: %v; want it to say the transaction did not apply and why", err)
	}
	if s.retries.Load() == 0 {
		t.Errorf("no retries within the bound")
	}
	ms := markersOf(t, s)
	if len(ms) != 1 || string(ms[0].Value) != markerNone || ms[0].Lease == 0 {
		t.Fatalf("markers %v, want one fence with a lease", ms)
	}
	resp, err := s.send(ctx, <-held)
	if err != nil {
		t.Fatal(err)
	}
	if kv, _ := s.Get(ctx, "k"); resp.Succeeded || kv != nil {
		t.Errorf("a try applied after the store gave up: %+v", kv)
	}
}

// TestRefusalAfterUnknown: a refusal that follows a try of unknown fate is
// returned as definite only once the transaction is fenced off.
func TestRefusalAfterUnknown(t *testing.T) {
	s := openT(t, Options{})
	ctx := ctxT(t)
	lease, err := s.Grant(ctx, 60)
	if err != nil {
		t.Fatal(err)
	}
	s.testHookSend = func(ctx context.Context, sends int, req etcdTxn, send func(context.Context, etcdTxn) (*clientv3.TxnResponse, error)) (*clientv3.TxnResponse, error) {
		if sends == 1 {
			return nil, errLost
		}
		if err := s.Revoke(ctx, lease); err != nil && !errors.Is(err, store.ErrNoLease) {
			t.Error(err)
		}
		return send(ctx, req)
	}
	_, err = s.Txn(ctx, nil, []store.Op{store.PutWithLease("k", nil, lease)}, nil)
	if !errors.Is(err, store.ErrNoLease) || errors.Is(err, store.ErrUncertain) || !strings.Contains(err.Error(), "not applied") {
		t.Fatalf("Txn: %v; want a definite ErrNoLease", err)
	}
	if ms := markersOf(t, s); len(ms) != 1 || string(ms[0].Value) != markerNone {
		t.Errorf("markers %v, want the fence", ms)
	}
}

// TestMarkerLeaseGone: a marker lease revoked behind the store's back is
// replaced.
func TestMarkerLeaseGone(t *testing.T) {
	s := openT(t, Options{})
	ctx := ctxT(t)
	for i := range 2 {
		if _, err := s.Txn(ctx, nil, []store.Op{store.Put(fmt.Sprint(i), nil)}, nil); err != nil {
			t.Fatalf("Txn %d: %v", i, err)
		}
		ms := markersOf(t, s)
		if len(ms) != 1 || string(ms[0].Value) != markerThen || ms[0].Lease == 0 {
			t.Fatalf("markers %v, want one, with a lease", ms)
		}
		if _, err := s.cli.Revoke(ctx, clientv3.LeaseID(ms[0].Lease)); err != nil {
			t.Fatal(err)
		}
	}
	// A user lease gone is the caller's error, found without a retry.
	_, err := s.Txn(ctx, nil, []store.Op{store.PutWithLease("k", nil, 12345)}, nil)
	if !errors.Is(err, store.ErrNoLease) || errors.Is(err, store.ErrUncertain) {
		t.Errorf("Txn with a missing lease: %v", err)
	}
}

// TestMarkerLeaseReuse: a marker lease takes new markers for the first
// third of its TTL, then a new lease is granted.
func TestMarkerLeaseReuse(t *testing.T) {
	s := openT(t, Options{})
	ctx := ctxT(t)
	now := time.Now()
	s.now = func() time.Time { return now }
	leases := func() map[int64]int {
		out := map[int64]int{}
		for _, m := range markersOf(t, s) {
			out[m.Lease]++
		}
		return out
	}
	put := func(k string) {
		if _, err := s.Txn(ctx, nil, []store.Op{store.Put(k, nil)}, nil); err != nil {
			t.Fatal(err)
		}
	}
	put("a")
	now = now.Add(defaultMarkerTTL/3 - time.Second)
	put("b")
	if l := leases(); len(l) != 1 {
		t.Fatalf("two markers within a third of the TTL on leases %v, want one lease", l)
	}
	now = now.Add(time.Second)
	put("c")
	l := leases()
	if len(l) != 2 {
		t.Fatalf("leases %v, want a second one after a third of the TTL", l)
	}
	for id := range l {
		resp, err := s.cli.TimeToLive(ctx, clientv3.LeaseID(id))
		if err != nil || resp.GrantedTTL != int64(defaultMarkerTTL/time.Second) {
			t.Errorf("lease %x: %+v, %v; want a TTL of %v", id, resp, err, defaultMarkerTTL)
		}
	}
}

// TestMarkerLeaseFull: a marker lease takes at most markersPerLease
// markers, then a new lease is granted, however young the old one.
func TestMarkerLeaseFull(t *testing.T) {
	s := openT(t, Options{})
	ctx := ctxT(t)
	now := time.Now()
	s.now = func() time.Time { return now }
	s.markersPerLease = 3
	for i := range 7 {
		if _, err := s.Txn(ctx, nil, []store.Op{store.Put(fmt.Sprint("k", i), nil)}, nil); err != nil {
			t.Fatal(err)
		}
	}
	leases := map[int64]int{}
	ms := markersOf(t, s)
	for _, m := range ms {
		leases[m.Lease]++
	}
	if len(ms) != 7 || len(leases) != 3 {
		t.Fatalf("%d markers on leases %v, want 7 on three leases", len(ms), leases)
	}
	for id, n := range leases {
		if id == 0 || n > 3 {
			t.Errorf("lease %x holds %d markers, want 1 to 3", id, n)
		}
	}
}

// TestCallerGone: when the caller's context ends with a write in flight,
// the outcome is unknown and the error says so.
func TestCallerGone(t *testing.T) {
	s := openT(t, Options{})
	ctx, cancel := context.WithCancel(ctxT(t))
	defer cancel()
	s.testHookSend = func(actx context.Context, sends int, req etcdTxn, send func(context.Context, etcdTxn) (*clientv3.TxnResponse, error)) (*clientv3.TxnResponse, error) {
		if _, err := send(actx, req); err != nil {
			t.Error(err)
		}
		cancel()
		return nil, context.Canceled
	}
	_, err := s.Txn(ctx, nil, []store.Op{store.Put("k", nil)}, nil)
	if !errors.Is(err, store.ErrUncertain) || !errors.Is(err, context.Canceled) {
		t.Errorf("Txn: %v; want ErrUncertain and context.Canceled", err)
	}
	// Cancelled before anything was sent: certain.
	if _, err := s.Txn(ctx, nil, []store.Op{store.Put("k2", nil)}, nil); !errors.Is(err, context.Canceled) || errors.Is(err, store.ErrUncertain) {
		t.Errorf("Txn with a cancelled context: %v", err)
	}
}

// TestWholeKeyspace: a store on the whole keyspace has no room for
// markers, so a lost reply leaves the outcome unknown.
func TestWholeKeyspace(t *testing.T) {
	s := openT(t, Options{})
	ctx := ctxT(t)
	whole, err := Open(ctx, Options{Endpoints: sharedEtcd(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer whole.Close()
	loseReplies(whole, 1)
	key := s.prefix + "k"
	_, err = whole.Txn(ctx, nil, []store.Op{store.Put(key, nil)}, nil)
	if !errors.Is(err, store.ErrUncertain) {
		t.Errorf("Txn: %v, want ErrUncertain", err)
	}
	if kv, _ := s.Get(ctx, "k"); kv == nil || kv.Version != 1 {
		t.Errorf("k = %+v, want written once", kv)
	}
	// Reads are retried.
	res, err := whole.Txn(ctx, nil, []store.Op{store.Get(key)}, nil)
	if err != nil || len(res.Results) != 1 || len(res.Results[0]) != 1 {
		t.Errorf("read-only Txn = %+v, %v", res, err)
	}
}

// TestMarkersInvisible: markers never show in the store's ranges or
// watches, and deleting all of the store's keys leaves them.
func TestMarkersInvisible(t *testing.T) {
	s := openT(t, Options{})
	ctx := ctxT(t)
	w := s.Watch(ctx, "", 0)
	res1, err := s.Txn(ctx, nil, []store.Op{store.Put("a", nil), store.Put("b", nil)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	res2, err := s.Txn(ctx, nil, []store.Op{store.DeletePrefix("")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	kvs, _, err := s.Range(ctx, "", store.RangeOptions{})
	if err != nil || len(kvs) != 0 {
		t.Errorf("Range after deleting everything: %v, %v", kvs, err)
	}
	if ms := markersOf(t, s); len(ms) != 2 {
		t.Errorf("%d markers, want 2", len(ms))
	}
	var evs []store.Event
	for len(evs) < 4 {
		select {
		case resp := <-w:
			if resp.Err != nil {
				t.Fatal(resp.Err)
			}
			evs = append(evs, resp.Events...)
		case <-ctx.Done():
			t.Fatalf("watch saw %d events", len(evs))
		}
	}
	want := fmt.Sprintf("[{0 a %d} {0 b %d} {1 a %d} {1 b %d}]", res1.Revision, res1.Revision, res2.Revision, res2.Revision)
	var got []string
	for _, e := range evs {
		got = append(got, fmt.Sprintf("{%d %s %d}", e.Type, e.KV.Key, e.KV.ModRevision))
	}
	if "["+strings.Join(got, " ")+"]" != want {
		t.Errorf("watch saw %v, want %s", got, want)
	}
}

// TestMarkerExpiry: markers go with their lease, which nobody keeps alive;
// the store's watches do not see them go.
func TestMarkerExpiry(t *testing.T) {
	s := openT(t, Options{MarkerTTL: 2 * time.Second, RetryBound: 300 * time.Millisecond, AttemptTimeout: 500 * time.Millisecond})
	ctx := ctxT(t)
	res, err := s.Txn(ctx, nil, []store.Op{store.Put("a", nil)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ms := markersOf(t, s)
	if len(ms) != 1 || ms[0].ModRevision != res.Revision {
		t.Fatalf("markers %v, want one at revision %d", ms, res.Revision)
	}
	w := s.Watch(ctx, "", res.Revision)
	raw := s.cli.Watch(ctx, s.markers, clientv3.WithPrefix(), clientv3.WithRev(res.Revision+1))
	var gone int64
	for gone == 0 {
		select {
		case resp := <-raw:
			for _, e := range resp.Events {
				if e.Type == mvccpb.DELETE && string(e.Kv.Key) == string(ms[0].Key) {
					gone = e.Kv.ModRevision
				}
			}
		case <-ctx.Done():
			t.Fatal("the marker did not expire")
		}
	}
	res2, err := s.Txn(ctx, nil, []store.Op{store.Put("b", nil)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res2.Revision <= gone {
		t.Errorf("put after the expiry at %d, want after %d", res2.Revision, gone)
	}
	var evs []store.Event
	for len(evs) < 2 {
		resp := <-w
		if resp.Err != nil {
			t.Fatal(resp.Err)
		}
		evs = append(evs, resp.Events...)
	}
	if len(evs) != 2 || evs[0].KV.Key != "a" || evs[1].KV.Key != "b" || evs[1].KV.ModRevision != res2.Revision {
		t.Errorf("watch saw %+v, want the two puts only", evs)
	}
	if _, err := Open(ctx, Options{Endpoints: sharedEtcd(t), Prefix: newPrefix(), MarkerTTL: time.Second}); err == nil {
		t.Errorf("Open with a marker TTL shorter than the retries accepted")
	}
}
