package boltstore

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/corral/corral/internal/store"
	"github.com/corral/corral/internal/store/storetest"
)

func openT(t *testing.T, path string, opts Options) *Store {
	t.Helper()
	s, err := Open(path, opts)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store {
		s := openT(t, filepath.Join(t.TempDir(), "corral.db"), Options{})
		t.Cleanup(func() { checkIndexes(t, s) }) // runs before the Close of openT
		return s
	})
}

// checkIndexes verifies that the leasekeys bucket lists exactly the keys
// attached to each lease, and only live leases.
func checkIndexes(t *testing.T, s *Store) {
	t.Helper()
	if s.closed() {
		return
	}
	err := s.db.View(func(tx *bolt.Tx) error {
		want := map[string]bool{}
		err := tx.Bucket(bucketKV).ForEach(func(k, v []byte) error {
			h, _, err := decodeKV(v)
			if err != nil {
				return err
			}
			if h.lease != 0 {
				if tx.Bucket(bucketLease).Get(be64(h.lease)) == nil {
					t.Errorf("key %q attached to missing lease %d", k, h.lease)
				}
				want[string(leaseKey(h.lease, string(k)))] = true
			}
			return nil
		})
		if err != nil {
			return err
		}
		err = tx.Bucket(bucketLeaseKeys).ForEach(func(k, _ []byte) error {
			if !want[string(k)] {
				t.Errorf("stale leasekeys entry %x", k)
			}
			delete(want, string(k))
			return nil
		})
		for k := range want {
			t.Errorf("missing leasekeys entry %x", k)
		}
		return err
	})
	if err != nil {
		t.Errorf("checking indexes: %v", err)
	}
}

func TestReopen(t *testing.T) {
	storetest.RunReopen(t, func(t *testing.T, dir string) store.Store {
		return openT(t, filepath.Join(dir, "corral.db"), Options{})
	})
}

func TestBackup(t *testing.T) {
	open := func(t *testing.T, path string) store.Store { return openT(t, path, Options{}) }
	storetest.RunBackup(t,
		func(t *testing.T) store.Store { return open(t, filepath.Join(t.TempDir(), "corral.db")) },
		open)
}

func TestFileModes(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "corral.db")
	s := openT(t, path, Options{NoSync: true})
	backup := filepath.Join(dir, "backup.db")
	// An existing, wider file is replaced, not reused with its mode.
	if err := os.WriteFile(backup, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := s.Backup(context.Background(), backup); err != nil {
		t.Fatalf("Backup: %v", err)
	}
	for _, p := range []string{path, backup} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: mode %v, want 0600", filepath.Base(p), fi.Mode().Perm())
		}
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 2 {
		t.Errorf("directory holds %d entries after backup, want 2 (no temporary left)", len(entries))
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := s.Backup(ctx, filepath.Join(dir, "never.db")); !errors.Is(err, context.Canceled) {
		t.Errorf("Backup with a cancelled context: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "never.db")); !os.IsNotExist(err) {
		t.Errorf("cancelled backup left a file: %v", err)
	}
}

func TestCloseTwiceAndReopen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "corral.db")
	s, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	res, err := s.Txn(ctx, nil, []store.Op{store.Put("a", []byte("1"))}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	s = openT(t, path, Options{})
	kv, err := s.Get(ctx, "a")
	if err != nil || kv == nil || kv.ModRevision != res.Revision {
		t.Fatalf("after reopen: %+v, %v", kv, err)
	}
	// The history is not persisted: older watches are compacted.
	resp := <-s.Watch(ctx, "", res.Revision)
	if !errors.Is(resp.Err, store.ErrCompacted) {
		t.Errorf("watch from %d after reopen: %+v, want ErrCompacted", res.Revision, resp)
	}
}

// TestCrashDurability lets a child process commit transactions and exit
// without closing the store; every transaction it reported as done must be
// in the file.
func TestCrashDurability(t *testing.T) {
	if path := os.Getenv("BOLTSTORE_CRASH_CHILD"); path != "" {
		crashChild(path)
		return
	}
	path := filepath.Join(t.TempDir(), "corral.db")
	cmd := exec.Command(os.Args[0], "-test.run=^TestCrashDurability$")
	cmd.Env = append(os.Environ(), "BOLTSTORE_CRASH_CHILD="+path)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	acked := map[string]int64{}
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		key, rev, ok := strings.Cut(sc.Text(), " ")
		if !ok {
			continue
		}
		n, _ := strconv.ParseInt(rev, 10, 64)
		acked[key] = n
	}
	if err := cmd.Wait(); err == nil {
		t.Fatalf("child exited cleanly; it should have been killed")
	}
	if len(acked) == 0 {
		t.Fatal("child acknowledged nothing")
	}
	s := openT(t, path, Options{})
	for key, rev := range acked {
		kv, err := s.Get(context.Background(), key)
		if err != nil || kv == nil || kv.ModRevision != rev {
			t.Errorf("acknowledged %s@%d: after crash %+v, %v", key, rev, kv, err)
		}
	}
}

// crashChild writes from several goroutines, prints each acknowledged key,
// and kills itself mid-stream.
func crashChild(path string) {
	s, err := Open(path, Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	var (
		mu  sync.Mutex
		n   atomic.Int64
		out = bufio.NewWriter(os.Stdout)
	)
	for w := range 4 {
		go func() {
			for i := 0; ; i++ {
				key := fmt.Sprintf("k/%d/%d", w, i)
				res, err := s.Txn(context.Background(), nil, []store.Op{store.Put(key, []byte("v"))}, nil)
				if err != nil {
					continue
				}
				mu.Lock()
				fmt.Fprintf(out, "%s %d\n", key, res.Revision)
				out.Flush()
				mu.Unlock()
				if n.Add(1) == 100 {
					p, _ := os.FindProcess(os.Getpid())
					p.Kill()
				}
			}
		}()
	}
	select {}
}

func TestWatchCompacted(t *testing.T) {
	s := openT(t, filepath.Join(t.TempDir(), "corral.db"), Options{NoSync: true, WatchHistory: 5})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var revs []int64
	for i := range 10 {
		res, err := s.Txn(ctx, nil, []store.Op{store.Put(fmt.Sprintf("k%d", i), nil)}, nil)
		if err != nil {
			t.Fatal(err)
		}
		revs = append(revs, res.Revision)
	}
	// One revision of many events is kept whole even past the limit.
	many := make([]store.Op, 8)
	for i := range many {
		many[i] = store.Put(fmt.Sprintf("m%d", i), nil)
	}
	big, err := s.Txn(ctx, nil, many, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		from      int64
		compacted bool
		events    int
	}{
		{revs[0], true, 0},
		{revs[9], true, 0},
		{big.Revision, false, 8},
		{big.Revision + 1, false, 0},
	} {
		ch := s.Watch(ctx, "", tc.from)
		if tc.compacted {
			resp, ok := <-ch
			if !ok || !errors.Is(resp.Err, store.ErrCompacted) {
				t.Errorf("from %d: %+v, want ErrCompacted", tc.from, resp)
			}
			if _, ok := <-ch; ok {
				t.Errorf("from %d: channel not closed after ErrCompacted", tc.from)
			}
			continue
		}
		if tc.events > 0 {
			resp := <-ch
			if resp.Err != nil || len(resp.Events) != tc.events {
				t.Errorf("from %d: %d events, %v; want %d", tc.from, len(resp.Events), resp.Err, tc.events)
			}
		}
	}
}

func TestWatchSlowConsumer(t *testing.T) {
	s := openT(t, filepath.Join(t.TempDir(), "corral.db"), Options{NoSync: true, WatchBuffer: 4})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	slow := s.Watch(ctx, "", 0)
	fast := s.Watch(ctx, "", 0)
	const writes = 50
	// Writers finish although nobody reads the slow watch; the fast one,
	// read in step with the writes, keeps up.
	for i := range writes {
		res, err := s.Txn(ctx, nil, []store.Op{store.Put(fmt.Sprintf("k%d", i), nil)}, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp := <-fast
		if resp.Err != nil || len(resp.Events) != 1 || resp.Events[0].KV.ModRevision != res.Revision {
			t.Fatalf("fast watcher at write %d: %+v", i, resp)
		}
	}
	var lastRev int64
	var err error
	for resp := range slow {
		if resp.Err != nil {
			err = resp.Err
			continue
		}
		for _, e := range resp.Events {
			lastRev = e.KV.ModRevision
		}
	}
	if !errors.Is(err, store.ErrWatchLagged) {
		t.Fatalf("slow watcher ended with %v, want ErrWatchLagged", err)
	}
	// Re-watching from after the last event delivered resumes without a gap.
	ch := s.Watch(ctx, "", lastRev+1)
	resp := <-ch
	if resp.Err != nil || len(resp.Events) == 0 || resp.Events[0].KV.ModRevision != lastRev+1 {
		t.Errorf("resumed watch: %+v, want events from %d", resp, lastRev+1)
	}
}

// fakeClock is a settable clock safe for the lease goroutine to read.
type fakeClock struct{ ns atomic.Int64 }

func newFakeClock() *fakeClock {
	c := &fakeClock{}
	c.ns.Store(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano())
	return c
}
func (c *fakeClock) Now() time.Time          { return time.Unix(0, c.ns.Load()) }
func (c *fakeClock) Advance(d time.Duration) { c.ns.Add(int64(d)) }

func TestLeaseClock(t *testing.T) {
	clock := newFakeClock()
	path := filepath.Join(t.TempDir(), "corral.db")
	s := openT(t, path, Options{NoSync: true, Now: clock.Now})
	ctx := context.Background()
	lease, err := s.Grant(ctx, 10)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Txn(ctx, nil, []store.Op{store.PutWithLease("a", nil, lease)}, nil); err != nil {
		t.Fatal(err)
	}
	present := func(when string, want bool) {
		t.Helper()
		s.expireLeases()
		kv, err := s.Get(ctx, "a")
		if err != nil {
			t.Fatal(err)
		}
		if (kv != nil) != want {
			t.Fatalf("%s: key present = %v, want %v", when, kv != nil, want)
		}
	}
	clock.Advance(9 * time.Second)
	present("before the TTL", true)
	if err := s.KeepAlive(ctx, lease); err != nil {
		t.Fatal(err)
	}
	clock.Advance(9 * time.Second)
	present("18s after grant, 9s after renewal", true)

	// Expired while closed: one TTL of grace after Open.
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	clock.Advance(time.Hour)
	s = openT(t, path, Options{NoSync: true, Now: clock.Now})
	present("just after reopen", true)
	clock.Advance(9 * time.Second)
	present("within the grace", true)
	clock.Advance(2 * time.Second)
	present("after the grace", false)
	if err := s.KeepAlive(ctx, lease); !errors.Is(err, store.ErrNoLease) {
		t.Errorf("KeepAlive after expiry: %v", err)
	}
	// The expiry persisted: a reopened store does not bring the lease back.
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openT(t, path, Options{NoSync: true, Now: clock.Now})
	if len(s.leases) != 0 {
		t.Errorf("leases after reopen: %v", s.leases)
	}
	if _, err := s.Txn(ctx, nil, []store.Op{store.PutWithLease("b", nil, lease)}, nil); !errors.Is(err, store.ErrNoLease) {
		t.Errorf("put with expired lease after reopen: %v", err)
	}
	// Lease ids are not reused.
	if id, err := s.Grant(ctx, 5); err != nil || id <= lease {
		t.Errorf("Grant after reopen = %d, %v; want an id above %d", id, err, lease)
	}
}

func TestOpenErrors(t *testing.T) {
	dir := t.TempDir()
	if _, err := Open(dir, Options{}); err == nil {
		t.Errorf("Open of a directory succeeded")
	}
	garbage := filepath.Join(dir, "garbage.db")
	if err := os.WriteFile(garbage, []byte(strings.Repeat("not a bolt file", 1000)), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(garbage, Options{}); err == nil {
		t.Errorf("Open of a garbage file succeeded")
	}
	// A second Open of the same file waits for the lock, then gives up.
	path := filepath.Join(dir, "corral.db")
	openT(t, path, Options{NoSync: true})
	if s, err := Open(path, Options{OpenTimeout: 50 * time.Millisecond}); err == nil {
		s.Close()
		t.Errorf("second Open of a locked file succeeded")
	}
}

// TestLeaseIndex moves keys between leases while the leases stay alive, so
// that a stale index entry would show.
func TestLeaseIndex(t *testing.T) {
	s := openT(t, filepath.Join(t.TempDir(), "corral.db"), Options{NoSync: true})
	ctx := context.Background()
	a, err := s.Grant(ctx, 600)
	if err != nil {
		t.Fatal(err)
	}
	b, err := s.Grant(ctx, 600)
	if err != nil {
		t.Fatal(err)
	}
	steps := [][]store.Op{
		{store.PutWithLease("k1", nil, a), store.PutWithLease("k2", nil, a), store.PutWithLease("k3", nil, a)},
		{store.PutWithLease("k1", nil, b)},
		{store.Put("k2", nil)},
		{store.Delete("k3")},
		{store.PutWithLease("k4", nil, b)},
		{store.DeletePrefix("k4")},
	}
	for i, ops := range steps {
		if _, err := s.Txn(ctx, nil, ops, nil); err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		checkIndexes(t, s)
	}
}
