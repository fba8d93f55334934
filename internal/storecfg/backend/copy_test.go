package backend

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/corral/corral/internal/store"
	"github.com/corral/corral/internal/store/boltstore"
	"github.com/corral/corral/internal/storecfg"
)

// These tests run the copy and the verification between two bbolt stores,
// so they need no etcd.

func openBolt(t *testing.T) store.Store {
	t.Helper()
	st, err := boltstore.Open(filepath.Join(t.TempDir(), "s.db"), boltstore.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

func put(t *testing.T, st store.Store, kvs ...string) {
	t.Helper()
	var ops []store.Op
	for i := 0; i < len(kvs); i += 2 {
		ops = append(ops, store.Put(kvs[i], []byte(kvs[i+1])))
	}
	if _, err := st.Txn(context.Background(), nil, ops, nil); err != nil {
		t.Fatal(err)
	}
}

// countingStore records the transactions a copy sends.
type countingStore struct {
	store.Store
	txns    int
	failAt  int  // fail the failAt-th transaction (0 = never)
	refuse  bool // answer "compare failed" instead of writing
	maxOps  int
	maxSize int
}

func (c *countingStore) Txn(ctx context.Context, cmps []store.Cmp, then, els []store.Op) (store.TxnResult, error) {
	c.txns++
	if c.failAt == c.txns {
		return store.TxnResult{}, errors.New("injected failure")
	}
	if c.refuse {
		return store.TxnResult{Succeeded: false}, nil
	}
	c.maxOps = max(c.maxOps, len(then))
	size := 0
	for _, o := range then {
		size += len(o.Key) + len(o.Value)
	}
	for _, cmp := range cmps {
		size += len(cmp.Key)
	}
	c.maxSize = max(c.maxSize, size)
	return c.Store.Txn(ctx, cmps, then, els)
}

func TestCopyKeysBatches(t *testing.T) {
	ctx := context.Background()
	src := openBolt(t)
	// Many small keys, then values close to the transaction limit: the
	// copy must split both by count and by size.
	for i := 0; i < 300; i += 100 {
		var kvs []string
		for j := i; j < i+100; j++ {
			kvs = append(kvs, fmt.Sprintf("/a/%04d", j), "v")
		}
		put(t, src, kvs...)
	}
	big := strings.Repeat("x", store.MaxTxnBytes-100)
	put(t, src, "/b/1", big)
	put(t, src, "/b/2", big)
	put(t, src, "/b/3", strings.Repeat("y", 600<<10))
	put(t, src, "/b/4", strings.Repeat("z", 600<<10))
	dst := &countingStore{Store: openBolt(t)}
	var out bytes.Buffer
	copied, leased, err := copyKeys(ctx, src, dst, 304, MigrateOptions{Out: &out, ProgressEvery: 100})
	if err != nil {
		t.Fatal(err)
	}
	if copied != 304 || len(leased) != 0 {
		t.Fatalf("copied %d, leased %v; want 304, none", copied, leased)
	}
	if dst.maxOps > store.MaxOpsPerTxn || dst.maxSize > store.MaxTxnBytes {
		t.Fatalf("a transaction had %d ops, %d bytes; limits %d, %d", dst.maxOps, dst.maxSize, store.MaxOpsPerTxn, store.MaxTxnBytes)
	}
	if dst.txns < 6 {
		t.Fatalf("%d transactions for 300 small keys and 4 large values; want them split", dst.txns)
	}
	if got, want := dump(t, dst), dump(t, src); !reflect.DeepEqual(got, want) {
		t.Fatalf("copy differs: %d keys, want %d", len(got), len(want))
	}
	if !strings.Contains(out.String(), fmt.Sprintf("copied %d/304 keys (%d%%)", batchMaxOps, batchMaxOps*100/304)) {
		t.Errorf("no progress line in %q", out.String())
	}
	// A second copy into the filled store finds every key present.
	if _, _, err := copyKeys(ctx, src, dst, 304, MigrateOptions{Out: io.Discard, ProgressEvery: 100}); !errors.Is(err, errForeignKey) {
		t.Fatalf("copy over existing keys: %v, want errForeignKey", err)
	}
}

func TestVerify(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name     string
		src, dst []string
		diffs    []string
	}{
		{name: "same", src: []string{"/a", "1", "/b", "2"}, dst: []string{"/a", "1", "/b", "2"}},
		{name: "empty"},
		{name: "value", src: []string{"/a", "1", "/b", "2"}, dst: []string{"/a", "1", "/b", "22"},
			diffs: []string{"/b has a different value (1 bytes on bbolt, 2 on etcd)"}},
		{name: "missing", src: []string{"/a", "1", "/b", "2", "/c", "3"}, dst: []string{"/b", "2"},
			diffs: []string{"/a missing on etcd", "/c missing on etcd"}},
		{name: "extra", src: []string{"/b", "2"}, dst: []string{"/a", "1", "/b", "2", "/c", "3"},
			diffs: []string{"/a only on etcd", "/c only on etcd"}},
		// Lengths are part of the hash: moving a byte from the key to the
		// value changes it.
		{name: "shifted", src: []string{"/ab", "c"}, dst: []string{"/a", "bc"},
			diffs: []string{"/a only on etcd", "/ab missing on etcd"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src, dst := openBolt(t), openBolt(t)
			if len(tc.src) > 0 {
				put(t, src, tc.src...)
			}
			if len(tc.dst) > 0 {
				put(t, dst, tc.dst...)
			}
			res := &MigrateResult{}
			diffs, err := verify(ctx, src, dst, res)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(diffs, tc.diffs) {
				t.Fatalf("diffs %q, want %q", diffs, tc.diffs)
			}
			if res.Source.Keys != len(tc.src)/2 || res.Target.Keys != len(tc.dst)/2 {
				t.Fatalf("summaries %+v %+v", res.Source, res.Target)
			}
			if (res.Source.SHA256 == res.Target.SHA256) != (tc.diffs == nil) {
				t.Fatalf("hashes %s and %s with diffs %v", res.Source.SHA256, res.Target.SHA256, tc.diffs)
			}
		})
	}
}

// TestVerifyPages crosses page boundaries on both sides.
func TestVerifyPages(t *testing.T) {
	ctx := context.Background()
	src, dst := openBolt(t), openBolt(t)
	for i := 0; i < 2*pageSize+10; i += 100 {
		var a, b []string
		for j := i; j < min(i+100, 2*pageSize+10); j++ {
			a = append(a, fmt.Sprintf("/k/%05d", j), "v")
			if j != pageSize+3 {
				b = append(b, fmt.Sprintf("/k/%05d", j), "v")
			}
		}
		put(t, src, a...)
		put(t, dst, b...)
	}
	res := &MigrateResult{}
	diffs, err := verify(ctx, src, dst, res)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{fmt.Sprintf("/k/%05d missing on etcd", pageSize+3)}
	if !reflect.DeepEqual(diffs, want) || res.Source.Keys != 2*pageSize+10 || res.Target.Keys != 2*pageSize+9 {
		t.Fatalf("diffs %v (want %v), summaries %+v %+v", diffs, want, res.Source, res.Target)
	}
}

func TestAbandon(t *testing.T) {
	ctx := context.Background()
	target := storecfg.Config{Prefix: "/p/"}
	src := openBolt(t)
	for i := 0; i < 400; i += 100 {
		var kvs []string
		for j := i; j < i+100; j++ {
			kvs = append(kvs, fmt.Sprintf("/k/%04d", j), "v")
		}
		put(t, src, kvs...)
	}

	// A write failing half way: what was copied is removed again.
	dst := &countingStore{Store: openBolt(t), failAt: 3}
	copied, _, err := copyKeys(ctx, src, dst, 400, MigrateOptions{Out: io.Discard, ProgressEvery: 1000})
	if err == nil || copied != 2*batchMaxOps {
		t.Fatalf("copy with a failing write: copied %d, %v", copied, err)
	}
	var out bytes.Buffer
	err = abandon(ctx, dst, target, copied, err, &out)
	if !strings.Contains(err.Error(), "injected failure") || !strings.Contains(err.Error(), "stays on bbolt") {
		t.Fatalf("abandon: %v", err)
	}
	if got := dump(t, dst); len(got) != 0 {
		t.Fatalf("%d keys left after abandoning", len(got))
	}

	// Another writer in the prefix: its keys are left alone.
	other := openBolt(t)
	put(t, other, "/theirs", "x")
	err = abandon(ctx, other, target, 5, errForeignKey, io.Discard)
	if !errors.Is(err, errForeignKey) {
		t.Fatalf("abandon after a foreign key: %v", err)
	}
	if got := dump(t, other); len(got) != 1 {
		t.Fatalf("abandon removed another writer's keys: %v", got)
	}
}
