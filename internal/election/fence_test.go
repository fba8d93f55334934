package election

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/corral/corral/internal/store"
)

// fenceFixture is a keyspace with two terms: a's, over, and b's, current.
type fenceFixture struct {
	admin store.Store
	conn  func(t *testing.T) store.Store
	live  *Term // b's, current
	stale *Term // a's token, made by hand so that only the store can refuse it
}

func newFenceFixture(t *testing.T, b backend) *fenceFixture {
	conn := b.open(t)
	ctx := ctxT(t, waitLimit)
	a := campaignT(t, newT(t, Config{Store: conn(t), Name: "a", TTL: 60 * time.Second}))
	if err := a.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	bt := campaignT(t, newT(t, Config{Store: conn(t), Name: "b", TTL: 60 * time.Second}))
	return &fenceFixture{admin: conn(t), conn: conn, live: bt, stale: &Term{Leader: a.Leader}}
}

// reset puts the data keys back to x=1, y missing.
func (fx *fenceFixture) reset(t *testing.T) {
	mustTxn(t, fx.admin, nil, []store.Op{store.DeletePrefix("/d/")}, nil)
	mustTxn(t, fx.admin, nil, []store.Op{store.Put("/d/x", []byte("1"))}, nil)
}

// data returns the data keys as key=value.
func (fx *fenceFixture) data(t *testing.T) map[string]string {
	kvs, _, err := fx.admin.Range(context.Background(), "/d/", store.RangeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]string{}
	for _, kv := range kvs {
		m[kv.Key] = string(kv.Value)
	}
	return m
}

// TestFencedTxn checks how the fence composes with the caller's compares
// and branches, for a current term and for one that is over.
func TestFencedTxn(t *testing.T) {
	x, y := "/d/x", "/d/y"
	put := func(k, v string) store.Op { return store.Put(k, []byte(v)) }
	tests := []struct {
		name      string
		stale     bool
		cmps      []store.Cmp
		then, els []store.Op
		wantOK    bool  // Succeeded
		fenced    bool  // ErrFenced expected
		results   []int // number of keys in each result, nil = no results
		want      map[string]string
	}{
		{"live blind put", false, nil, []store.Op{put(x, "2")}, nil,
			true, false, []int{0}, map[string]string{x: "2"}},
		{"live compare holds", false, []store.Cmp{store.Exists(x)}, []store.Op{put(x, "2"), store.Get(x)}, []store.Op{put(y, "e")},
			true, false, []int{0, 1}, map[string]string{x: "2"}},
		{"live compare fails, else writes", false, []store.Cmp{store.Missing(x)}, []store.Op{put(x, "2")}, []store.Op{put(y, "e"), store.Get(x)},
			false, false, []int{0, 1}, map[string]string{x: "1", y: "e"}},
		{"live compare fails, else reads", false, []store.Cmp{store.Missing(x)}, []store.Op{put(x, "2")}, []store.Op{store.Get(x)},
			false, false, []int{1}, map[string]string{x: "1"}},
		{"live compare fails, no else", false, []store.Cmp{store.Missing(x)}, []store.Op{put(x, "2")}, nil,
			false, false, nil, map[string]string{x: "1"}},
		{"live value not-equal on a missing key", false, []store.Cmp{{Key: y, Target: store.CmpValue, Op: store.NotEqual, Value: []byte("z")}},
			[]store.Op{put(x, "2")}, []store.Op{put(y, "e")},
			true, false, []int{0}, map[string]string{x: "2"}},
		{"live compare on the election key", false, []store.Cmp{{Key: DefaultKey, Target: store.CmpVersion, Op: store.Equal, Rev: 1}},
			[]store.Op{store.DeletePrefix("/d/")}, nil,
			true, false, []int{0}, map[string]string{}},
		{"live only reads", false, nil, []store.Op{store.Get(x)}, nil,
			true, false, []int{1}, map[string]string{x: "1"}},
		{"stale blind put", true, nil, []store.Op{put(x, "2")}, nil,
			false, true, nil, map[string]string{x: "1"}},
		{"stale compare holds", true, []store.Cmp{store.Exists(x)}, []store.Op{put(x, "2")}, []store.Op{put(y, "e")},
			false, true, nil, map[string]string{x: "1"}},
		{"stale compare fails, else writes", true, []store.Cmp{store.Missing(x)}, []store.Op{put(x, "2")}, []store.Op{put(y, "e")},
			false, true, nil, map[string]string{x: "1"}},
		{"stale compare fails, else reads", true, []store.Cmp{store.Missing(x)}, []store.Op{put(x, "2")}, []store.Op{store.Get(x)},
			false, true, nil, map[string]string{x: "1"}},
		{"stale only deletes", true, nil, []store.Op{store.Delete(x)}, nil,
			false, true, nil, map[string]string{x: "1"}},
		{"stale only reads", true, []store.Cmp{store.Exists(x)}, []store.Op{store.Get(x)}, []store.Op{store.Get(y)},
			true, false, []int{1}, map[string]string{x: "1"}},
	}
	eachBackend(t, func(t *testing.T, b backend) {
		fx := newFenceFixture(t, b)
		for _, tc := range tests {
			t.Run(tc.name, func(t *testing.T) {
				fx.reset(t)
				term := fx.live
				if tc.stale {
					term = fx.stale
				}
				ctx := ctxT(t, waitLimit)
				before, err := fx.admin.Revision(ctx)
				if err != nil {
					t.Fatal(err)
				}
				res, err := Fenced(fx.conn(t), term).Txn(ctx, tc.cmps, tc.then, tc.els)
				if tc.fenced {
					if !isFenced(err) {
						t.Fatalf("Txn: %+v, %v; want ErrFenced", res, err)
					}
					if after, _ := fx.admin.Revision(ctx); after != before {
						t.Errorf("revision moved from %d to %d: a fenced transaction applied something", before, after)
					}
				} else {
					if err != nil {
						t.Fatalf("Txn: %v", err)
					}
					if res.Succeeded != tc.wantOK {
						t.Errorf("Succeeded = %v, want %v", res.Succeeded, tc.wantOK)
					}
					if got := shape(res.Results); fmt.Sprint(got) != fmt.Sprint(tc.results) {
						t.Errorf("results shape %v, want %v (%+v)", got, tc.results, res.Results)
					}
				}
				if got := fx.data(t); fmt.Sprint(got) != fmt.Sprint(tc.want) {
					t.Errorf("data %v, want %v", got, tc.want)
				}
			})
		}
	})
}

func shape(results [][]store.KV) []int {
	if len(results) == 0 {
		return nil
	}
	out := make([]int, len(results))
	for i, r := range results {
		out[i] = len(r)
	}
	return out
}

// TestFencedElseRetry: when a compared key changes between the two steps
// of an else-writing transaction, the fence starts over and the branch
// that now applies runs, not the stale else branch.
func TestFencedElseRetry(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		fx := newFenceFixture(t, b)
		fx.reset(t)
		f := newFaulty(fx.conn(t))
		f.beforeTxn = func(n int64) {
			if n == 2 { // between the first step and the else branch
				mustTxn(t, fx.admin, nil, []store.Op{store.Delete("/d/x")}, nil)
			}
		}
		res, err := Fenced(f, fx.live).Txn(ctxT(t, waitLimit), []store.Cmp{store.Missing("/d/x")},
			[]store.Op{store.Put("/d/x", []byte("2"))}, []store.Op{store.Put("/d/y", []byte("e"))})
		if err != nil {
			t.Fatal(err)
		}
		if !res.Succeeded {
			t.Error("Succeeded = false, want the then branch once x was gone")
		}
		if got := fx.data(t); fmt.Sprint(got) != fmt.Sprint(map[string]string{"/d/x": "2"}) {
			t.Errorf("data %v, want only x=2", got)
		}
		if n := f.txns.Load(); n != 3 {
			t.Errorf("%d transactions, want 3 (first step, else refused, first step again)", n)
		}
	})
}

// TestFencedLimits: the fence takes one compare (and, with a reading else
// branch, one op) of the store's limits.
func TestFencedLimits(t *testing.T) {
	fx := newFenceFixture(t, boltBackend)
	fs := Fenced(fx.conn(t), fx.live)
	cmps := func(n int) []store.Cmp {
		out := make([]store.Cmp, n)
		for i := range out {
			out[i] = store.Missing(fmt.Sprintf("/c/%d", i))
		}
		return out
	}
	gets := func(n int) []store.Op {
		out := make([]store.Op, n)
		for i := range out {
			out[i] = store.Get(fmt.Sprintf("/c/%d", i))
		}
		return out
	}
	w := []store.Op{store.Put("/d/w", nil)}
	tests := []struct {
		name      string
		cmps      []store.Cmp
		then, els []store.Op
		tooLarge  bool
	}{
		{"127 compares", cmps(127), w, nil, false},
		{"128 compares", cmps(128), w, nil, true},
		{"129 compares", cmps(129), w, nil, true},
		{"127 reads in else", nil, w, gets(127), false},
		{"128 reads in else", nil, w, gets(128), true},
		{"127 keys, else writes", cmps(127), w, []store.Op{store.Put("/d/e", nil)}, false},
		{"128 reads, nothing written", cmps(128), gets(128), gets(128), false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := fs.Txn(ctxT(t, waitLimit), tc.cmps, tc.then, tc.els)
			if tc.tooLarge != errors.Is(err, store.ErrTooLarge) || (!tc.tooLarge && err != nil) {
				t.Fatalf("Txn: %v, want too large: %v", err, tc.tooLarge)
			}
		})
	}
}

// TestFencedAfterResign: once the term is over, writes fail at once,
// without a round trip; reads, leases and the rest still reach the store.
func TestFencedAfterResign(t *testing.T) {
	conn := boltBackend.open(t)
	ctx := ctxT(t, waitLimit)
	f := newFaulty(conn(t))
	term := campaignT(t, newT(t, Config{Store: f, Name: "a", TTL: 60 * time.Second}))
	fs := Fenced(f, term)
	mustTxn(t, fs, nil, []store.Op{store.Put("/d/x", []byte("1"))}, nil)
	if err := term.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	n := f.txns.Load()
	_, err := fs.Txn(ctx, nil, []store.Op{store.Put("/d/x", []byte("2"))}, nil)
	if !isFenced(err) || !errors.Is(err, ErrResigned) {
		t.Fatalf("write after Resign: %v, want ErrFenced and ErrResigned", err)
	}
	if f.txns.Load() != n {
		t.Error("the refused write reached the store")
	}
	if kv, err := fs.Get(ctx, "/d/x"); err != nil || kv == nil || string(kv.Value) != "1" {
		t.Errorf("Get through the fence: %v, %v", kv, err)
	}
	lease, err := fs.Grant(ctx, 10)
	if err != nil {
		t.Fatal(err)
	}
	if err := fs.KeepAlive(ctx, lease); err != nil {
		t.Error(err)
	}
	if err := fs.Revoke(ctx, lease); err != nil {
		t.Error(err)
	}
}
