package election

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/corral/corral/internal/store"
)

func TestNewChecksConfig(t *testing.T) {
	s := boltBackend.open(t)(t)
	tests := []struct {
		name string
		cfg  Config
		want string // "" means valid
	}{
		{"defaults", Config{Store: s, Name: "n1"}, ""},
		{"no store", Config{Name: "n1"}, "no store"},
		{"no name", Config{Store: s}, "empty name"},
		{"control char", Config{Store: s, Name: "n\n1"}, "control"},
		{"long address", Config{Store: s, Name: "n1", Address: strings.Repeat("a", 256)}, "longer"},
		{"ttl under 1s", Config{Store: s, Name: "n1", TTL: 900 * time.Millisecond}, "under 1s"},
		{"margin too large", Config{Store: s, Name: "n1", TTL: 4 * time.Second, Margin: 3 * time.Second}, "margin"},
		{"renew too slow", Config{Store: s, Name: "n1", TTL: 3 * time.Second, RenewInterval: 2 * time.Second}, "renew interval"},
		{"handover ttl", Config{Store: s, Name: "n1", HandoverTTL: time.Millisecond}, "handover TTL"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, err := New(tc.cfg)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("New: %v", err)
				}
				if c.key != DefaultKey || c.ttlSecs != 5 || c.cfg.RenewInterval != DefaultTTL/3 || c.cfg.Margin != time.Second {
					t.Errorf("defaults: key %q ttl %ds renew %v margin %v", c.key, c.ttlSecs, c.cfg.RenewInterval, c.cfg.Margin)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("New: %v, want an error with %q", err, tc.want)
			}
		})
	}
}

// TestSingleWinner campaigns with several candidates at once: one wins at
// a time, each in turn as the previous one resigns, with growing tokens,
// and CurrentLeader names the one that holds the term.
func TestSingleWinner(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		conn := b.open(t)
		admin := conn(t)
		ctx := ctxT(t, 4*waitLimit)
		const n = 5
		if _, err := CurrentLeader(ctx, admin, ""); !errors.Is(err, ErrNoLeader) {
			t.Fatalf("CurrentLeader before any campaign: %v, want ErrNoLeader", err)
		}
		results := make(chan campaignResult, n)
		for i := range n {
			// A long TTL: the terms must pass on by resignation alone.
			c := newT(t, Config{Store: conn(t), Name: fmt.Sprintf("node%d", i), Address: fmt.Sprintf("10.0.0.%d:1811", i), TTL: 30 * time.Second})
			go func() {
				term, err := c.Campaign(ctx)
				results <- campaignResult{term, err}
			}()
		}
		won := map[string]bool{}
		var last int64
		for range n {
			term := awaitWin(t, results, "a candidate")
			if won[term.Name] {
				t.Fatalf("%s won twice", term.Name)
			}
			won[term.Name] = true
			if term.Token <= last {
				t.Errorf("token %d after %d: tokens must grow", term.Token, last)
			}
			last = term.Token
			l := leaderT(t, admin, "")
			if l.Name != term.Name || l.Token != term.Token || l.Lease != term.Lease || l.Address != term.Address {
				t.Errorf("CurrentLeader = %+v, want the term %+v", l, term.Leader)
			}
			if err := term.Err(); err != nil {
				t.Errorf("a fresh term has Err %v", err)
			}
			if err := term.Resign(ctx); err != nil {
				t.Fatalf("Resign: %v", err)
			}
			if !errors.Is(term.Err(), ErrResigned) {
				t.Errorf("Err after Resign = %v, want ErrResigned", term.Err())
			}
		}
		if _, err := CurrentLeader(ctx, admin, ""); !errors.Is(err, ErrNoLeader) {
			t.Fatalf("CurrentLeader after the last resignation: %v, want ErrNoLeader", err)
		}
	})
}

// TestRenewalsKeepTheTerm: a leader that renews keeps its key for several
// TTLs.
func TestRenewalsKeepTheTerm(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		conn := b.open(t)
		f := newFaulty(conn(t))
		term := campaignT(t, newT(t, Config{Store: f, Name: "a", TTL: b.ttl}))
		// Four renewals, one every TTL/3: the lease outlived its first TTL.
		for range 4 {
			select {
			case <-f.renewed:
			case <-term.Done():
				t.Fatalf("term ended: %v", term.Err())
			case <-time.After(waitLimit):
				t.Fatal("no renewal")
			}
		}
		if err := term.Err(); err != nil {
			t.Fatalf("term ended: %v", err)
		}
		if l := leaderT(t, conn(t), ""); l.Token != term.Token {
			t.Fatalf("leader token %d, want %d", l.Token, term.Token)
		}
		if !term.Deadline().After(time.Now()) {
			t.Errorf("deadline %v already passed", term.Deadline())
		}
	})
}

// TestPartitionedLeaderStepsDownFirst cuts the leader off from the store.
// It must consider itself deposed before the store lets another candidate
// win, and the other then wins once the lease has expired.
func TestPartitionedLeaderStepsDownFirst(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		conn := b.open(t)
		fa := newFaulty(conn(t))
		// The widest margin, so that a loaded machine that runs a's timer
		// late does not fail the test.
		a := campaignT(t, newT(t, Config{Store: fa, Name: "a", TTL: b.ttl, Margin: b.ttl / 2, RenewInterval: b.ttl / 4}))
		bres := campaignAsync(t, ctxT(t, 2*waitLimit), newT(t, Config{Store: conn(t), Name: "b", TTL: b.ttl}))

		cut := time.Now()
		fa.partition()
		t.Cleanup(fa.heal)
		err := awaitDone(t, a, "a")
		lost := time.Since(cut)
		if !errors.Is(err, ErrDeposed) {
			t.Fatalf("a's term ended with %v, want ErrDeposed", err)
		}
		// a stepped down on its own clock: the store must still hold its
		// key, and b cannot have won.
		select {
		case r := <-bres:
			t.Fatalf("b won (%v) before a noticed it had lost", r.err)
		default:
		}
		if l, err := CurrentLeader(ctxT(t, waitLimit), conn(t), ""); err != nil || l.Token != a.Token {
			t.Fatalf("when a stepped down the key was %+v (%v), want still a's", l, err)
		}
		bt := awaitWin(t, bres, "b")
		t.Logf("a stepped down %v after the cut; b won %v after it", lost.Round(time.Millisecond), time.Since(cut).Round(time.Millisecond))
		if bt.Token <= a.Token {
			t.Errorf("b's token %d not above a's %d", bt.Token, a.Token)
		}
		// a's writes are refused, locally and without reaching the store.
		before := fa.txns.Load()
		if _, err := Fenced(fa, a).Txn(ctxT(t, waitLimit), nil, []store.Op{store.Put("/data/x", []byte("a"))}, nil); !isFenced(err) {
			t.Fatalf("a's write after losing: %v, want ErrFenced", err)
		}
		if fa.txns.Load() != before {
			t.Error("a's fenced write reached the store although a knew it had lost")
		}
	})
}

// TestRenewalsStop: a leader whose renewals hang (its store otherwise
// fine) is deposed, and the next leader wins.
func TestRenewalsStop(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		conn := b.open(t)
		fa := newFaulty(conn(t))
		a := campaignT(t, newT(t, Config{Store: fa, Name: "a", TTL: b.ttl}))
		bres := campaignAsync(t, ctxT(t, 2*waitLimit), newT(t, Config{Store: conn(t), Name: "b", TTL: b.ttl}))
		fa.holdRenew.Store(true)
		if err := awaitDone(t, a, "a"); !errors.Is(err, ErrDeposed) || !strings.Contains(err.Error(), "deadline") {
			t.Fatalf("a's term ended with %v, want ErrDeposed for the deadline", err)
		}
		bt := awaitWin(t, bres, "b")
		if l := leaderT(t, conn(t), ""); l.Name != "b" || l.Token != bt.Token {
			t.Fatalf("leader %+v, want b", l)
		}
	})
}

// TestOneRenewalHangs: a renewal that hangs (a member died or lost its
// raft leader under it) is given up after a renewal interval and the next
// attempt renews, so the leader keeps its term.
func TestOneRenewalHangs(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		fa := newFaulty(b.open(t)(t))
		ttl := 5 * time.Second
		a := campaignT(t, newT(t, Config{Store: fa, Name: "a", TTL: ttl}))
		fa.hangOnce.Store(true)
		// The hung attempt goes out after one interval; two renewals
		// after it the term has outlived the hung one's deadline.
		for got := fa.keepAlive.Load(); fa.keepAlive.Load() < got+2; {
			select {
			case <-fa.renewed:
			case <-a.Context().Done():
				t.Fatalf("term ended after one hung renewal: %v", a.Err())
			case <-time.After(2 * ttl):
				t.Fatal("no renewal")
			}
		}
		if fa.hangOnce.Load() {
			t.Fatal("no renewal attempt hung")
		}
		if err := a.Err(); err != nil {
			t.Fatalf("term ended: %v", err)
		}
	})
}

// TestDeposedByTheStore: the term ends when the store drops its lease or
// key, whether the leader learns it from its watch or from a renewal.
func TestDeposedByTheStore(t *testing.T) {
	tests := []struct {
		name      string
		holdWatch bool
		act       func(ctx context.Context, s store.Store, term *Term) error
		want      string
	}{
		{"lease revoked", false, func(ctx context.Context, s store.Store, term *Term) error {
			return s.Revoke(ctx, term.Lease)
		}, "deleted"},
		{"key deleted", false, func(ctx context.Context, s store.Store, term *Term) error {
			_, err := s.Txn(ctx, nil, []store.Op{store.Delete(term.Key)}, nil)
			return err
		}, "deleted"},
		{"lease revoked, watch silent", true, func(ctx context.Context, s store.Store, term *Term) error {
			return s.Revoke(ctx, term.Lease)
		}, "no longer knows lease"},
	}
	eachBackend(t, func(t *testing.T, b backend) {
		for _, tc := range tests {
			t.Run(tc.name, func(t *testing.T) {
				conn := b.open(t)
				fa := newFaulty(conn(t))
				fa.holdWatch.Store(tc.holdWatch)
				term := campaignT(t, newT(t, Config{Store: fa, Name: "a", TTL: 30 * time.Second, RenewInterval: time.Second}))
				if err := tc.act(ctxT(t, waitLimit), conn(t), term); err != nil {
					t.Fatal(err)
				}
				err := awaitDone(t, term, "a")
				if !errors.Is(err, ErrDeposed) || !strings.Contains(err.Error(), tc.want) {
					t.Fatalf("term ended with %v, want ErrDeposed saying %q", err, tc.want)
				}
			})
		}
	})
}

// TestFencedWhileBelieving is the old master that has not noticed it was
// deposed: its lease is revoked and another candidate wins while its own
// renewals and watch are stuck, so it still believes it leads. Its fenced
// writes must fail with ErrFenced and change nothing, in every shape of
// transaction.
func TestFencedWhileBelieving(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		conn := b.open(t)
		admin := conn(t)
		ctx := ctxT(t, 2*waitLimit)
		fa := newFaulty(conn(t))
		a := campaignT(t, newT(t, Config{Store: fa, Name: "a", TTL: 30 * time.Second}))
		fsa := Fenced(fa, a)
		mustTxn(t, fsa, nil, []store.Op{store.Put("/data/x", []byte("a1"))}, nil)

		fa.holdRenew.Store(true)
		fa.holdWatch.Store(true)
		if err := admin.Revoke(ctx, a.Lease); err != nil {
			t.Fatal(err)
		}
		bt := campaignT(t, newT(t, Config{Store: conn(t), Name: "b", TTL: 30 * time.Second}))
		mustTxn(t, Fenced(conn(t), bt), nil, []store.Op{store.Put("/data/x", []byte("b1"))}, nil)
		rev, err := admin.Revision(ctx)
		if err != nil {
			t.Fatal(err)
		}

		shapes := []struct {
			name      string
			cmps      []store.Cmp
			then, els []store.Op
		}{
			{"blind put", nil, []store.Op{store.Put("/data/x", []byte("a2"))}, nil},
			{"compare holds", []store.Cmp{store.Exists("/data/x")}, []store.Op{store.Put("/data/x", []byte("a3"))}, nil},
			{"compare fails, else reads", []store.Cmp{store.Missing("/data/x")}, []store.Op{store.Put("/data/x", []byte("a4"))}, []store.Op{store.Get("/data/x")}},
			{"compare fails, else writes", []store.Cmp{store.Missing("/data/x")}, []store.Op{store.Put("/data/x", []byte("a5"))}, []store.Op{store.Put("/data/y", []byte("a5"))}},
			{"compare holds, else writes", nil, []store.Op{store.Delete("/data/x")}, []store.Op{store.Put("/data/y", []byte("a6"))}},
		}
		for _, sh := range shapes {
			if err := a.Err(); err != nil {
				t.Fatalf("a noticed it had lost (%v): the case needs a leader that still believes", err)
			}
			_, err := fsa.Txn(ctx, sh.cmps, sh.then, sh.els)
			if !isFenced(err) {
				t.Errorf("%s: %v, want ErrFenced", sh.name, err)
			}
		}
		if now, err := admin.Revision(ctx); err != nil || now != rev {
			t.Errorf("store revision moved from %d to %d (%v): a fenced write applied something", rev, now, err)
		}
		if kv, _ := admin.Get(ctx, "/data/x"); kv == nil || string(kv.Value) != "b1" {
			t.Errorf("/data/x = %v, want b's write", kv)
		}
		// Reads still work for the deposed master.
		res, err := fsa.Txn(ctx, nil, []store.Op{store.Get("/data/x")}, nil)
		if err != nil || !res.Succeeded || len(res.Results) != 1 || len(res.Results[0]) != 1 {
			t.Errorf("read through the fence: %+v, %v", res, err)
		}
	})
}

// TestResignHandsOverPromptly: with a TTL far longer than the wait, the
// next candidate can only win in time if Resign removed the key.
func TestResignHandsOverPromptly(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		conn := b.open(t)
		ttl := 60 * time.Second
		a := campaignT(t, newT(t, Config{Store: conn(t), Name: "a", TTL: ttl}))
		bres := campaignAsync(t, ctxT(t, waitLimit), newT(t, Config{Store: conn(t), Name: "b", TTL: ttl}))
		if err := a.Resign(ctxT(t, waitLimit)); err != nil {
			t.Fatal(err)
		}
		bt := awaitWin(t, bres, "b")
		if err := conn(t).KeepAlive(ctxT(t, waitLimit), a.Lease); !errors.Is(err, store.ErrNoLease) {
			t.Errorf("a's lease after Resign: %v, want ErrNoLease", err)
		}
		if l := leaderT(t, conn(t), ""); l.Name != "b" || l.Token != bt.Token {
			t.Errorf("leader %+v, want b", l)
		}
		// Resigning again is harmless and leaves b alone.
		if err := a.Resign(ctxT(t, waitLimit)); err != nil {
			t.Errorf("second Resign: %v", err)
		}
		if bt.Err() != nil {
			t.Errorf("b lost its term: %v", bt.Err())
		}
	})
}

// TestHandover: the named candidate wins although another waits too; the
// others take over when it resigns in turn.
func TestHandover(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		conn := b.open(t)
		admin := conn(t)
		ctx := ctxT(t, 2*waitLimit)
		ttl := 60 * time.Second
		a := campaignT(t, newT(t, Config{Store: conn(t), Name: "a", TTL: ttl}))
		if err := a.Handover(ctx, "a"); err == nil {
			t.Fatal("handover to the leader itself accepted")
		}
		if err := a.Err(); err != nil {
			t.Fatalf("a refused handover ended the term: %v", err)
		}
		bres := campaignAsync(t, ctx, newT(t, Config{Store: conn(t), Name: "b", TTL: ttl}))
		cres := campaignAsync(t, ctx, newT(t, Config{Store: conn(t), Name: "c", TTL: ttl}))
		if err := a.Handover(ctx, "c"); err != nil {
			t.Fatal(err)
		}
		ct := awaitWin(t, cres, "c")
		if l := leaderT(t, admin, ""); l.Name != "c" {
			t.Fatalf("leader %+v, want c", l)
		}
		if kv, err := admin.Get(ctx, DefaultKey+HandoverSuffix); err != nil || kv != nil {
			t.Errorf("handover key after c won: %v, %v; want it gone", kv, err)
		}
		if err := ct.Resign(ctx); err != nil {
			t.Fatal(err)
		}
		awaitWin(t, bres, "b")
		if err := a.Handover(ctx, "b"); !errors.Is(err, ErrResigned) {
			t.Errorf("handover of an ended term: %v, want ErrResigned", err)
		}
	})
}

// TestHandoverToAbsent: when the named candidate never comes, the others
// wait for the handover to expire, then one of them wins.
func TestHandoverToAbsent(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		conn := b.open(t)
		admin := conn(t)
		ctx := ctxT(t, 2*waitLimit)
		a := campaignT(t, newT(t, Config{Store: conn(t), Name: "a", TTL: 60 * time.Second, HandoverTTL: b.ttl}))
		if err := a.Handover(ctx, "ghost"); err != nil {
			t.Fatal(err)
		}
		bres := campaignAsync(t, ctx, newT(t, Config{Store: conn(t), Name: "b", TTL: 60 * time.Second}))
		kv, err := admin.Get(ctx, DefaultKey+HandoverSuffix)
		if err != nil || kv == nil {
			t.Fatalf("handover key: %v, %v", kv, err)
		}
		if h, err := parseHandover(kv.Value); err != nil || h.To != "ghost" || h.From != "a" {
			t.Errorf("handover record %+v, %v", h, err)
		}
		bt := awaitWin(t, bres, "b")
		if bt.Token <= kv.ModRevision {
			t.Errorf("b won at %d, before the handover at %d", bt.Token, kv.ModRevision)
		}
		if kv, err := admin.Get(ctx, DefaultKey+HandoverSuffix); err != nil || kv != nil {
			t.Errorf("handover key after b won: %v, %v; want it gone", kv, err)
		}
	})
}

// TestReclaim: a restarted candidate takes its own stale key over at once;
// another candidate must wait for it.
func TestReclaim(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		conn := b.open(t)
		admin := conn(t)
		ctx := ctxT(t, 2*waitLimit)
		// What a crashed earlier run leaves: the key, under a live lease.
		stale, err := admin.Grant(ctx, 60)
		if err != nil {
			t.Fatal(err)
		}
		val, _ := json.Marshal(record{Name: "a"})
		mustTxn(t, admin, nil, []store.Op{store.PutWithLease(DefaultKey, val, stale)}, nil)

		short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		defer cancel()
		if _, err := newT(t, Config{Store: conn(t), Name: "b", Reclaim: true}).Campaign(short); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("b campaigning against a's key: %v, want it to wait", err)
		}
		a := campaignT(t, newT(t, Config{Store: conn(t), Name: "a", Reclaim: true}))
		if a.Lease == stale {
			t.Error("the new term kept the stale lease")
		}
		if err := admin.KeepAlive(ctx, stale); !errors.Is(err, store.ErrNoLease) {
			t.Errorf("stale lease after reclaim: %v, want ErrNoLease", err)
		}
	})
}

// TestCampaignEnds: a campaign stops when its context ends or its store is
// closed, and leaves no lease behind.
func TestCampaignEnds(t *testing.T) {
	conn := boltBackend.open(t)
	campaignT(t, newT(t, Config{Store: conn(t), Name: "a", TTL: 60 * time.Second}))
	ctx, cancel := context.WithCancel(context.Background())
	res := campaignAsync(t, ctx, newT(t, Config{Store: conn(t), Name: "b"}))
	cancel()
	select {
	case r := <-res:
		if !errors.Is(r.err, context.Canceled) {
			t.Fatalf("Campaign after cancel: %v", r.err)
		}
	case <-time.After(waitLimit):
		t.Fatal("Campaign did not stop")
	}

	s := boltBackend.open(t)(t).(noClose).Store
	c := newT(t, Config{Store: s, Name: "c"})
	term := campaignT(t, c)
	s.Close()
	if err := awaitDone(t, term, "c"); !errors.Is(err, ErrDeposed) {
		t.Errorf("term on a closed store ended with %v", err)
	}
	if _, err := c.Campaign(ctxT(t, waitLimit)); !errors.Is(err, store.ErrClosed) {
		t.Errorf("Campaign on a closed store: %v, want ErrClosed", err)
	}
}

// TestCampaignRetriesStoreErrors: a candidate whose store calls fail keeps
// campaigning and wins once they succeed again, even when a failure hid
// a transaction that did commit.
func TestCampaignRetriesStoreErrors(t *testing.T) {
	conn := boltBackend.open(t)
	// The first read fails; the third transaction, the put that wins,
	// commits but is reported failed.
	flaky := &failingTxn{Store: conn(t), fail: map[int64]bool{1: true, 3: true}}
	term := campaignT(t, newT(t, Config{Store: flaky, Name: "a", TTL: 3 * time.Second}))
	if n := flaky.n.Load(); n != 5 {
		t.Errorf("won after %d transactions, want 5 (read, read, put, read, put)", n)
	}
	if term.Err() != nil {
		t.Fatal(term.Err())
	}
	if l := leaderT(t, conn(t), ""); l.Token != term.Token || l.Lease != term.Lease {
		t.Errorf("leader %+v, want the term %+v", l, term.Leader)
	}
}

// failingTxn reports the transactions numbered in fail (from 1) as
// failed, after running them: the caller cannot tell whether they
// committed.
type failingTxn struct {
	store.Store
	n    atomic.Int64
	fail map[int64]bool
}

func (f *failingTxn) Txn(ctx context.Context, cmps []store.Cmp, then, els []store.Op) (store.TxnResult, error) {
	res, err := f.Store.Txn(ctx, cmps, then, els)
	if f.fail[f.n.Add(1)] && err == nil {
		return store.TxnResult{}, errors.New("injected failure")
	}
	return res, err
}

func mustTxn(t testing.TB, s store.Store, cmps []store.Cmp, then, els []store.Op) store.TxnResult {
	t.Helper()
	res, err := s.Txn(context.Background(), cmps, then, els)
	if err != nil {
		t.Fatalf("Txn: %v", err)
	}
	return res
}
