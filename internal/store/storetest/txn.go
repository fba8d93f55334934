package storetest

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"testing"

	"github.com/corral/corral/internal/store"
)

func testRevisions(t *testing.T, s store.Store) {
	r0 := revision(t, s)
	if kv := mustGet(t, s, "a"); kv != nil {
		t.Fatalf("Get on empty store = %+v", kv)
	}

	r1 := mustPut(t, s, "a", "1")
	if r1 != r0+1 {
		t.Fatalf("first put at revision %d, want %d", r1, r0+1)
	}
	want := store.KV{Key: "a", Value: []byte("1"), CreateRevision: r1, ModRevision: r1, Version: 1}
	if kv := mustGet(t, s, "a"); kv == nil || !sameKV(*kv, want) {
		t.Fatalf("after create: %+v, want %+v", kv, want)
	}

	r2 := mustPut(t, s, "a", "2")
	want = store.KV{Key: "a", Value: []byte("2"), CreateRevision: r1, ModRevision: r2, Version: 2}
	if kv := mustGet(t, s, "a"); r2 != r1+1 || kv == nil || !sameKV(*kv, want) {
		t.Fatalf("after update at %d: %+v, want %+v at %d", r2, kv, want, r1+1)
	}

	// All ops of one transaction share one revision.
	r3 := mustTxn(t, s, nil, []store.Op{store.Put("b", []byte("x")), store.Put("c", []byte("y")), store.Delete("a")}, nil).Revision
	if r3 != r2+1 {
		t.Fatalf("multi-op txn at revision %d, want %d", r3, r2+1)
	}
	for _, k := range []string{"b", "c"} {
		if kv := mustGet(t, s, k); kv == nil || kv.ModRevision != r3 || kv.CreateRevision != r3 {
			t.Errorf("%s = %+v, want created at %d", k, kv, r3)
		}
	}
	if kv := mustGet(t, s, "a"); kv != nil {
		t.Errorf("deleted key still there: %+v", kv)
	}

	// Re-creating a deleted key starts it afresh.
	r4 := mustPut(t, s, "a", "3")
	want = store.KV{Key: "a", Value: []byte("3"), CreateRevision: r4, ModRevision: r4, Version: 1}
	if kv := mustGet(t, s, "a"); r4 != r3+1 || kv == nil || !sameKV(*kv, want) {
		t.Fatalf("after re-create at %d: %+v, want %+v", r4, kv, want)
	}

	// Transactions that change nothing keep the revision.
	for _, tc := range []struct {
		name string
		ops  []store.Op
	}{
		{"delete missing", []store.Op{store.Delete("nope")}},
		{"delete empty prefix", []store.Op{store.DeletePrefix("nope/")}},
		{"gets only", []store.Op{store.Get("a"), store.GetPrefix("")}},
		{"nothing", nil},
	} {
		if res := mustTxn(t, s, nil, tc.ops, nil); res.Revision != r4 {
			t.Errorf("%s: revision %d, want unchanged %d", tc.name, res.Revision, r4)
		}
	}
	if got := revision(t, s); got != r4 {
		t.Errorf("Revision() = %d, want %d", got, r4)
	}
	// A put of an unchanged value is still a write.
	if r5 := mustPut(t, s, "a", "3"); r5 != r4+1 {
		t.Errorf("same-value put at %d, want %d", r5, r4+1)
	}
}

func testCompare(t *testing.T, s store.Store) {
	// k: created at c, modified at m (> c), version 2, value "m".
	c := mustPut(t, s, "k", "b")
	m := mustPut(t, s, "k", "m")
	cmp := func(target store.CmpTarget, op store.CmpOp, rev int64, value string) store.Cmp {
		return store.Cmp{Key: "k", Target: target, Op: op, Rev: rev, Value: []byte(value)}
	}
	tests := []struct {
		name string
		cmp  store.Cmp
		want bool
	}{
		{"mod ==", cmp(store.CmpModRevision, store.Equal, m, ""), true},
		{"mod == old", cmp(store.CmpModRevision, store.Equal, c, ""), false},
		{"mod !=", cmp(store.CmpModRevision, store.NotEqual, c, ""), true},
		{"mod != same", cmp(store.CmpModRevision, store.NotEqual, m, ""), false},
		{"mod <", cmp(store.CmpModRevision, store.Less, m+1, ""), true},
		{"mod < same", cmp(store.CmpModRevision, store.Less, m, ""), false},
		{"mod >", cmp(store.CmpModRevision, store.Greater, c, ""), true},
		{"mod > same", cmp(store.CmpModRevision, store.Greater, m, ""), false},
		{"create ==", cmp(store.CmpCreateRevision, store.Equal, c, ""), true},
		{"create == mod", cmp(store.CmpCreateRevision, store.Equal, m, ""), false},
		{"create <", cmp(store.CmpCreateRevision, store.Less, m, ""), true},
		{"create >", cmp(store.CmpCreateRevision, store.Greater, 0, ""), true},
		{"version ==", cmp(store.CmpVersion, store.Equal, 2, ""), true},
		{"version == 1", cmp(store.CmpVersion, store.Equal, 1, ""), false},
		{"version !=", cmp(store.CmpVersion, store.NotEqual, 1, ""), true},
		{"version <", cmp(store.CmpVersion, store.Less, 3, ""), true},
		{"version >", cmp(store.CmpVersion, store.Greater, 2, ""), false},
		{"value ==", cmp(store.CmpValue, store.Equal, 0, "m"), true},
		{"value == other", cmp(store.CmpValue, store.Equal, 0, "n"), false},
		{"value !=", cmp(store.CmpValue, store.NotEqual, 0, "n"), true},
		{"value != same", cmp(store.CmpValue, store.NotEqual, 0, "m"), false},
		{"value <", cmp(store.CmpValue, store.Less, 0, "n"), true},
		{"value < prefix", cmp(store.CmpValue, store.Less, 0, "l"), false},
		{"value >", cmp(store.CmpValue, store.Greater, 0, "a"), true},
		{"value > longer", cmp(store.CmpValue, store.Greater, 0, "mm"), false},
		{"Exists", store.Exists("k"), true},
		{"Missing", store.Missing("k"), false},
		{"ModRevisionIs", store.ModRevisionIs("k", m), true},
		// A missing key has zero revisions and version, and no value.
		{"missing Missing", store.Missing("x"), true},
		{"missing Exists", store.Exists("x"), false},
		{"missing mod == 0", store.ModRevisionIs("x", 0), true},
		{"missing mod <", store.Cmp{Key: "x", Target: store.CmpModRevision, Op: store.Less, Rev: 1}, true},
		{"missing version == 0", store.Cmp{Key: "x", Target: store.CmpVersion, Op: store.Equal}, true},
		{"missing value ==", store.Cmp{Key: "x", Target: store.CmpValue, Op: store.Equal}, false},
		{"missing value <", store.Cmp{Key: "x", Target: store.CmpValue, Op: store.Less, Value: []byte("z")}, false},
		{"missing value >", store.Cmp{Key: "x", Target: store.CmpValue, Op: store.Greater}, false},
		{"missing value !=", store.Cmp{Key: "x", Target: store.CmpValue, Op: store.NotEqual}, true},
	}
	for _, tc := range tests {
		res := mustTxn(t, s, []store.Cmp{tc.cmp}, []store.Op{store.Get("k")}, nil)
		if res.Succeeded != tc.want {
			t.Errorf("%s: succeeded = %v, want %v", tc.name, res.Succeeded, tc.want)
		}
	}
	// All compares must hold.
	res := mustTxn(t, s, []store.Cmp{store.Exists("k"), store.Exists("x")}, nil, nil)
	if res.Succeeded {
		t.Errorf("txn with one false compare succeeded")
	}
	res = mustTxn(t, s, []store.Cmp{store.Exists("k"), store.Missing("x"), store.ModRevisionIs("k", m)}, nil, nil)
	if !res.Succeeded {
		t.Errorf("txn with all compares true failed")
	}
}

func testElse(t *testing.T, s store.Store) {
	r := mustPut(t, s, "k", "v")
	res := mustTxn(t, s,
		[]store.Cmp{store.ModRevisionIs("k", r-1)},
		[]store.Op{store.Put("then", []byte("t")), store.Delete("k")},
		[]store.Op{store.Put("else", []byte("e")), store.Get("k")})
	if res.Succeeded {
		t.Fatalf("compare on a stale revision succeeded")
	}
	if res.Revision != r+1 {
		t.Errorf("else branch wrote at %d, want %d", res.Revision, r+1)
	}
	if len(res.Results) != 2 || res.Results[0] != nil || len(res.Results[1]) != 1 || string(res.Results[1][0].Value) != "v" {
		t.Errorf("else results = %+v, want [nil [k=v]]", res.Results)
	}
	if kv := mustGet(t, s, "then"); kv != nil {
		t.Errorf("then branch ran too: %+v", kv)
	}
	if kv := mustGet(t, s, "else"); kv == nil || string(kv.Value) != "e" {
		t.Errorf("else branch did not write: %+v", kv)
	}
	if kv := mustGet(t, s, "k"); kv == nil {
		t.Errorf("then branch's delete ran")
	}
	// A failed compare with an empty else branch writes nothing.
	res = mustTxn(t, s, []store.Cmp{store.Missing("k")}, []store.Op{store.Put("x", nil)}, nil)
	if res.Succeeded || res.Revision != r+1 || len(res.Results) != 0 {
		t.Errorf("empty else: %+v, want failed at %d with no results", res, r+1)
	}
}

func testAtomicity(t *testing.T, s store.Store) {
	ctx := context.Background()
	mustPut(t, s, "keep", "v")
	before := dump(t, s)
	rev := revision(t, s)
	big := make([]byte, store.MaxTxnBytes)
	tests := []struct {
		name      string
		then, els []store.Op
		cmps      []store.Cmp
		want      error
	}{
		{"unknown lease after a put", []store.Op{store.Put("a", []byte("1")), store.Delete("keep"),
			store.PutWithLease("b", []byte("2"), 999999)}, nil, nil, store.ErrNoLease},
		{"unknown lease in else", nil, []store.Op{store.DeletePrefix("k"), store.PutWithLease("b", nil, 424242)},
			[]store.Cmp{store.Missing("keep")}, store.ErrNoLease},
		{"too large", []store.Op{store.Delete("keep"), store.Put("a", big)}, nil, nil, store.ErrTooLarge},
		{"duplicate put", []store.Op{store.Put("a", nil), store.Put("a", nil)}, nil, nil, store.ErrDuplicateKey},
		{"put under deleted prefix", []store.Op{store.DeletePrefix("ke"), store.Put("keep", nil)}, nil, nil, store.ErrDuplicateKey},
		{"empty key", []store.Op{store.Put("a", nil), store.Put("", nil)}, nil, nil, store.ErrInvalid},
		{"unknown op", []store.Op{store.Put("a", nil), {Type: store.OpType(99), Key: "a"}}, nil, nil, store.ErrInvalid},
	}
	for _, tc := range tests {
		res, err := s.Txn(ctx, tc.cmps, tc.then, tc.els)
		wantErr(t, tc.name, err, tc.want)
		if err == nil {
			t.Errorf("%s: result %+v", tc.name, res)
		}
	}
	if got := revision(t, s); got != rev {
		t.Errorf("revision moved from %d to %d after failed transactions", rev, got)
	}
	if after := dump(t, s); !sameKVs(before, after) {
		t.Errorf("failed transactions changed the data:\n%v\nwant\n%v", after, before)
	}
	// Deleting and putting different keys, and deleting twice, are fine.
	mustTxn(t, s, nil, []store.Op{store.Delete("keep"), store.DeletePrefix("kee"), store.Put("other", nil)}, nil)
}

func testGetsInTxn(t *testing.T, s store.Store) {
	r1 := mustTxn(t, s, nil, []store.Op{store.Put("p/a", []byte("1")), store.Put("p/b", []byte("2")), store.Put("q", []byte("3"))}, nil).Revision
	res := mustTxn(t, s, []store.Cmp{store.Exists("p/a")},
		[]store.Op{store.Get("p/a"), store.Get("missing"), store.GetPrefix("p/"),
			store.Put("p/c", []byte("4")), store.Get("p/c"), store.Delete("p/a"), store.GetPrefix("p/")}, nil)
	r2 := r1 + 1
	if !res.Succeeded || res.Revision != r2 {
		t.Fatalf("txn = %+v, want succeeded at %d", res, r2)
	}
	if len(res.Results) != 7 {
		t.Fatalf("%d results, want 7", len(res.Results))
	}
	want := [][]store.KV{
		{{Key: "p/a", Value: []byte("1"), CreateRevision: r1, ModRevision: r1, Version: 1}},
		nil,
		{{Key: "p/a", Value: []byte("1"), CreateRevision: r1, ModRevision: r1, Version: 1},
			{Key: "p/b", Value: []byte("2"), CreateRevision: r1, ModRevision: r1, Version: 1}},
		nil,
		// Later ops see the writes of earlier ones.
		{{Key: "p/c", Value: []byte("4"), CreateRevision: r2, ModRevision: r2, Version: 1}},
		nil,
		{{Key: "p/b", Value: []byte("2"), CreateRevision: r1, ModRevision: r1, Version: 1},
			{Key: "p/c", Value: []byte("4"), CreateRevision: r2, ModRevision: r2, Version: 1}},
	}
	for i := range want {
		if !sameKVs(res.Results[i], want[i]) {
			t.Errorf("result %d = %+v, want %+v", i, res.Results[i], want[i])
		}
	}
	// A read-only transaction reports the current revision.
	res = mustTxn(t, s, []store.Cmp{store.Missing("p/a")}, []store.Op{store.Get("p/b")}, []store.Op{store.Get("q")})
	if !res.Succeeded || res.Revision != r2 || len(res.Results) != 1 || len(res.Results[0]) != 1 || res.Results[0][0].Key != "p/b" {
		t.Errorf("read-only txn = %+v", res)
	}
}

func testDeletePrefix(t *testing.T, s store.Store) {
	for _, k := range []string{"a", "d/1", "d/2", "d/2/x", "d0", "e"} {
		mustPut(t, s, k, k)
	}
	rev := revision(t, s)
	res := mustTxn(t, s, nil, []store.Op{store.DeletePrefix("d/")}, nil)
	if res.Revision != rev+1 {
		t.Errorf("DeletePrefix at %d, want %d", res.Revision, rev+1)
	}
	if got, want := keysOf(dump(t, s)), []string{"a", "d0", "e"}; !slices.Equal(got, want) {
		t.Errorf("keys after DeletePrefix(d/) = %q, want %q", got, want)
	}
	mustTxn(t, s, nil, []store.Op{store.DeletePrefix("")}, nil)
	if got := dump(t, s); len(got) != 0 {
		t.Errorf("keys after DeletePrefix(\"\") = %q", keysOf(got))
	}
}

func testRange(t *testing.T, s store.Store) {
	ctx := context.Background()
	keys := []string{"r/a", "r/b", "r/b/1", "r/c", "r/d"}
	for _, k := range []string{"r", "q/z", "r/d", "r/b/1", "r/a", "r/c", "r/b", "s"} {
		mustPut(t, s, k, "v"+k)
	}
	rev := revision(t, s)
	tests := []struct {
		name   string
		prefix string
		opts   store.RangeOptions
		want   []string
	}{
		{"all of prefix", "r/", store.RangeOptions{}, keys},
		{"limit", "r/", store.RangeOptions{Limit: 2}, keys[:2]},
		{"limit above count", "r/", store.RangeOptions{Limit: 100}, keys},
		{"from", "r/", store.RangeOptions{From: "r/b/"}, keys[2:]},
		{"from exact", "r/", store.RangeOptions{From: "r/c"}, keys[3:]},
		{"from and limit", "r/", store.RangeOptions{From: "r/b", Limit: 2}, keys[1:3]},
		{"from before prefix", "r/", store.RangeOptions{From: "a"}, keys},
		{"from past prefix", "r/", store.RangeOptions{From: "r0"}, nil},
		{"keys only", "r/", store.RangeOptions{KeysOnly: true}, keys},
		{"no match", "x/", store.RangeOptions{}, nil},
		{"everything", "", store.RangeOptions{}, []string{"q/z", "r", "r/a", "r/b", "r/b/1", "r/c", "r/d", "s"}},
	}
	for _, tc := range tests {
		kvs, got, err := s.Range(ctx, tc.prefix, tc.opts)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if got != rev {
			t.Errorf("%s: revision %d, want %d", tc.name, got, rev)
		}
		if k := keysOf(kvs); !slices.Equal(k, tc.want) {
			t.Errorf("%s: keys %q, want %q", tc.name, k, tc.want)
		}
		for _, kv := range kvs {
			wantValue := []byte("v" + kv.Key)
			if tc.opts.KeysOnly {
				wantValue = nil
			}
			if !bytes.Equal(kv.Value, wantValue) || kv.ModRevision == 0 || kv.Version != 1 {
				t.Errorf("%s: %+v, want value %q and metadata", tc.name, kv, wantValue)
			}
		}
	}
	// Returned values belong to the caller.
	kvs, _, _ := s.Range(ctx, "r/a", store.RangeOptions{})
	kvs[0].Value[0] = 'X'
	if kv := mustGet(t, s, "r/a"); string(kv.Value) != "vr/a" {
		t.Errorf("changing a returned value changed the store: %q", kv.Value)
	}
}

func testLimits(t *testing.T, s store.Store) {
	ctx := context.Background()
	ops := func(n int) []store.Op {
		out := make([]store.Op, n)
		for i := range out {
			out[i] = store.Put(fmt.Sprintf("l/%03d", i), []byte("v"))
		}
		return out
	}
	cmps := func(n int) []store.Cmp {
		out := make([]store.Cmp, n)
		for i := range out {
			out[i] = store.Missing(fmt.Sprintf("c/%03d", i))
		}
		return out
	}
	tests := []struct {
		name      string
		cmps      []store.Cmp
		then, els []store.Op
		tooLarge  bool
	}{
		{"max ops", nil, ops(store.MaxOpsPerTxn), nil, false},
		{"max ops in both branches", cmps(store.MaxOpsPerTxn), ops(store.MaxOpsPerTxn), ops(store.MaxOpsPerTxn), false},
		{"too many then ops", nil, ops(store.MaxOpsPerTxn + 1), nil, true},
		{"too many else ops", nil, nil, ops(store.MaxOpsPerTxn + 1), true},
		{"too many compares", cmps(store.MaxOpsPerTxn + 1), nil, nil, true},
		{"max bytes", nil, []store.Op{store.Put("b", make([]byte, store.MaxTxnBytes-1))}, nil, false},
		{"too many bytes", nil, []store.Op{store.Put("b", make([]byte, store.MaxTxnBytes))}, nil, true},
		{"too many bytes over both branches", nil,
			[]store.Op{store.Put("b", make([]byte, store.MaxTxnBytes/2))},
			[]store.Op{store.Put("b", make([]byte, store.MaxTxnBytes/2))}, true},
	}
	for _, tc := range tests {
		rev := revision(t, s)
		_, err := s.Txn(ctx, tc.cmps, tc.then, tc.els)
		if tc.tooLarge {
			wantErr(t, tc.name, err, store.ErrTooLarge)
			if got := revision(t, s); got != rev {
				t.Errorf("%s: revision moved", tc.name)
			}
		} else if err != nil {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
	if kv := mustGet(t, s, "b"); kv == nil || len(kv.Value) != store.MaxTxnBytes-1 {
		t.Errorf("largest value not stored whole")
	}
}

// testConcurrentCAS increments counters from many goroutines with
// compare-and-swap on the mod revision: no increment may be lost.
func testConcurrentCAS(t *testing.T, s store.Store) {
	const workers, incs, counters = 8, 15, 2
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Go(func() {
			key := fmt.Sprintf("ctr/%d", w%counters)
			for range incs {
				for {
					kv, err := s.Get(ctx, key)
					if err != nil {
						errs <- err
						return
					}
					n, mod := 0, int64(0)
					if kv != nil {
						n, _ = strconv.Atoi(string(kv.Value))
						mod = kv.ModRevision
					}
					res, err := s.Txn(ctx, []store.Cmp{store.ModRevisionIs(key, mod)},
						[]store.Op{store.Put(key, []byte(strconv.Itoa(n+1))), store.Put(fmt.Sprintf("log/%d/%d", w, n), nil)}, nil)
					if err != nil {
						errs <- err
						return
					}
					if res.Succeeded {
						break
					}
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("worker: %v", err)
	}
	total := 0
	for c := range counters {
		kv := mustGet(t, s, fmt.Sprintf("ctr/%d", c))
		n, _ := strconv.Atoi(string(kv.Value))
		if want := workers / counters * incs; n != want || kv.Version != int64(want) {
			t.Errorf("counter %d = %d (version %d), want %d", c, n, kv.Version, want)
		}
		total += n
	}
	// Every successful increment wrote one log key in the same revision.
	logs, rev, err := s.Range(ctx, "log/", store.RangeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(logs) != total {
		t.Errorf("%d log keys, want %d", len(logs), total)
	}
	seen := map[int64]bool{}
	for _, kv := range logs {
		if seen[kv.ModRevision] {
			t.Errorf("two successful increments share revision %d", kv.ModRevision)
		}
		seen[kv.ModRevision] = true
		if kv.ModRevision > rev {
			t.Errorf("key %s at revision %d past the range revision %d", kv.Key, kv.ModRevision, rev)
		}
	}
}
