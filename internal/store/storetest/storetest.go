// Package storetest is the conformance suite for store.Store backends. Every
// backend runs Run (and RunReopen, RunBackup where they apply) from its own
// tests, so code written against the bbolt backend keeps working on etcd.
//
// The suite never assumes absolute revisions, only how they move, and waits
// for asynchronous effects (watch events, lease expiry) with bounded waits
// rather than sleeps.
package storetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/corral/corral/internal/store"
)

// waitLimit bounds every wait for something asynchronous. It is generous
// because etcd may raise short lease TTLs to its minimum.
const waitLimit = 15 * time.Second

// Run runs the conformance suite. open must return a new, empty store and
// arrange for it to be closed when the test ends; the suite may close it
// earlier, so Close must tolerate being called twice.
func Run(t *testing.T, open func(t *testing.T) store.Store) {
	t.Run("Revisions", func(t *testing.T) { testRevisions(t, open(t)) })
	t.Run("Compare", func(t *testing.T) { testCompare(t, open(t)) })
	t.Run("ElseBranch", func(t *testing.T) { testElse(t, open(t)) })
	t.Run("Atomicity", func(t *testing.T) { testAtomicity(t, open(t)) })
	t.Run("GetsInTxn", func(t *testing.T) { testGetsInTxn(t, open(t)) })
	t.Run("DeletePrefix", func(t *testing.T) { testDeletePrefix(t, open(t)) })
	t.Run("Range", func(t *testing.T) { testRange(t, open(t)) })
	t.Run("Limits", func(t *testing.T) { testLimits(t, open(t)) })
	t.Run("ConcurrentCAS", func(t *testing.T) { testConcurrentCAS(t, open(t)) })
	t.Run("WatchFromNow", func(t *testing.T) { testWatchFromNow(t, open(t)) })
	t.Run("WatchFromRevision", func(t *testing.T) { testWatchFromRevision(t, open(t)) })
	t.Run("WatchEnds", func(t *testing.T) { testWatchEnds(t, open) })
	t.Run("Leases", func(t *testing.T) { testLeases(t, open(t)) })
	t.Run("LeaseExpiry", func(t *testing.T) { testLeaseExpiry(t, open(t)) })
	t.Run("Closed", func(t *testing.T) { testClosed(t, open(t)) })
}

// RunReopen checks durability for a backend that keeps its data in a
// directory: open opens (creating if needed) the store in dir and arranges
// for it to be closed when the test ends.
func RunReopen(t *testing.T, open func(t *testing.T, dir string) store.Store) {
	t.Run("DataAndRevisionSurvive", func(t *testing.T) {
		dir := t.TempDir()
		s := open(t, dir)
		ctx := context.Background()
		mustTxn(t, s, nil, []store.Op{store.Put("a", []byte("1")), store.Put("b", []byte("2"))}, nil)
		mustTxn(t, s, nil, []store.Op{store.Put("a", []byte("3"))}, nil)
		mustTxn(t, s, nil, []store.Op{store.Delete("b")}, nil)
		lease, err := s.Grant(ctx, 600)
		if err != nil {
			t.Fatalf("Grant: %v", err)
		}
		mustTxn(t, s, nil, []store.Op{store.PutWithLease("l", []byte("x"), lease)}, nil)
		before := dump(t, s)
		rev := revision(t, s)
		if err := s.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}

		s = open(t, dir)
		if got := revision(t, s); got != rev {
			t.Errorf("revision after reopen = %d, want %d", got, rev)
		}
		if after := dump(t, s); !sameKVs(before, after) {
			t.Errorf("data after reopen:\n%v\nwant\n%v", after, before)
		}
		// The revision keeps counting from where it was.
		res := mustTxn(t, s, nil, []store.Op{store.Put("a", []byte("4"))}, nil)
		if res.Revision != rev+1 {
			t.Errorf("first write after reopen at revision %d, want %d", res.Revision, rev+1)
		}
		kv := mustGet(t, s, "a")
		if kv == nil || kv.Version != 3 || kv.CreateRevision != before[0].CreateRevision {
			t.Errorf("a after reopen and put = %+v, want version 3 and the old create revision", kv)
		}
		// The lease survived and still owns its key.
		if err := s.KeepAlive(ctx, lease); err != nil {
			t.Errorf("KeepAlive after reopen: %v", err)
		}
		if err := s.Revoke(ctx, lease); err != nil {
			t.Fatalf("Revoke after reopen: %v", err)
		}
		if kv := mustGet(t, s, "l"); kv != nil {
			t.Errorf("key of revoked lease still there: %+v", kv)
		}
	})
}

// RunBackup checks that Backup writes a store that openBackup can open with
// the same data and revision. open is as for Run.
func RunBackup(t *testing.T, open func(t *testing.T) store.Store, openBackup func(t *testing.T, path string) store.Store) {
	t.Run("Backup", func(t *testing.T) {
		s := open(t)
		ctx := context.Background()
		for i := range 50 {
			mustTxn(t, s, nil, []store.Op{store.Put(fmt.Sprintf("k/%03d", i), bytes.Repeat([]byte{byte(i)}, i*10))}, nil)
		}
		mustTxn(t, s, nil, []store.Op{store.DeletePrefix("k/01")}, nil)
		before := dump(t, s)
		rev := revision(t, s)
		path := filepath.Join(t.TempDir(), "backup")
		if err := s.Backup(ctx, path); err != nil {
			t.Fatalf("Backup: %v", err)
		}
		// Writes after the backup must not show in it.
		mustTxn(t, s, nil, []store.Op{store.Put("later", []byte("x"))}, nil)

		b := openBackup(t, path)
		if got := revision(t, b); got != rev {
			t.Errorf("backup revision = %d, want %d", got, rev)
		}
		if after := dump(t, b); !sameKVs(before, after) {
			t.Errorf("backup data:\n%v\nwant\n%v", after, before)
		}
	})
}

func mustTxn(t *testing.T, s store.Store, cmps []store.Cmp, then, els []store.Op) store.TxnResult {
	t.Helper()
	res, err := s.Txn(context.Background(), cmps, then, els)
	if err != nil {
		t.Fatalf("Txn(%v, %v, %v): %v", cmps, then, els, err)
	}
	return res
}

func mustPut(t *testing.T, s store.Store, key, value string) int64 {
	t.Helper()
	return mustTxn(t, s, nil, []store.Op{store.Put(key, []byte(value))}, nil).Revision
}

func mustGet(t *testing.T, s store.Store, key string) *store.KV {
	t.Helper()
	kv, err := s.Get(context.Background(), key)
	if err != nil {
		t.Fatalf("Get(%q): %v", key, err)
	}
	return kv
}

func revision(t *testing.T, s store.Store) int64 {
	t.Helper()
	rev, err := s.Revision(context.Background())
	if err != nil {
		t.Fatalf("Revision: %v", err)
	}
	return rev
}

// dump returns every key of the store.
func dump(t *testing.T, s store.Store) []store.KV {
	t.Helper()
	kvs, _, err := s.Range(context.Background(), "", store.RangeOptions{})
	if err != nil {
		t.Fatalf("Range: %v", err)
	}
	return kvs
}

func sameKV(a, b store.KV) bool {
	return a.Key == b.Key && bytes.Equal(a.Value, b.Value) && a.CreateRevision == b.CreateRevision &&
		a.ModRevision == b.ModRevision && a.Version == b.Version && a.Lease == b.Lease
}

func sameKVs(a, b []store.KV) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !sameKV(a[i], b[i]) {
			return false
		}
	}
	return true
}

func keysOf(kvs []store.KV) []string {
	out := make([]string, len(kvs))
	for i := range kvs {
		out[i] = kvs[i].Key
	}
	return out
}

func wantErr(t *testing.T, what string, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Errorf("%s: error %v, want %v", what, err, target)
	}
}
