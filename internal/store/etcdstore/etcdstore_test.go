package etcdstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/corral/corral/internal/etcdproc"
	"github.com/corral/corral/internal/etcdproc/etcdtest"
	"github.com/corral/corral/internal/store"
	"github.com/corral/corral/internal/store/storetest"
)

func TestConformance(t *testing.T) {
	sharedEtcd(t)
	storetest.Run(t, func(t *testing.T) store.Store { return openT(t, Options{}) })
}

// TestConformanceTLS runs the suite against a member that serves clients
// over mutual TLS only.
func TestConformanceTLS(t *testing.T) {
	certs := etcdtest.NewCerts(t)
	c := etcdtest.Start(t, etcdproc.Config{ClientTLS: &certs.Member})
	tlsCfg := certs.ClientTLS(t)
	storetest.Run(t, func(t *testing.T) store.Store {
		return openT(t, Options{Endpoints: c.Endpoints(), TLS: tlsCfg})
	})
	// A client without a certificate gets nowhere.
	noCert := tlsCfg.Clone()
	noCert.Certificates = nil
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if s, err := Open(ctx, Options{Endpoints: c.Endpoints(), TLS: noCert, DialTimeout: 2 * time.Second}); err == nil {
		s.Close()
		t.Errorf("Open without a client certificate succeeded")
	}
}

// TestReopen checks durability across a member crash: the store's member is
// killed (SIGKILL) and restarted between the two opens.
func TestReopen(t *testing.T) {
	etcdtest.Require(t)
	type member struct {
		cluster *etcdproc.Cluster
		prefix  string
	}
	members := map[string]*member{}
	storetest.RunReopen(t, func(t *testing.T, dir string) store.Store {
		m := members[dir]
		if m == nil {
			m = &member{cluster: etcdtest.Start(t, etcdproc.Config{Dir: filepath.Join(dir, "etcd")}), prefix: newPrefix()}
			members[dir] = m
		} else {
			em := m.cluster.Members[0]
			if err := em.Kill(); err != nil {
				t.Fatal(err)
			}
			if err := em.Start(ctxT(t)); err != nil {
				t.Fatal(err)
			}
		}
		return openT(t, Options{Endpoints: m.cluster.Endpoints(), Prefix: m.prefix})
	})
}

// TestBackup restores the backup into a new member with etcdctl and opens
// the store on it.
func TestBackup(t *testing.T) {
	sharedEtcd(t)
	etcdtest.RequireEtcdctl(t)
	var prefix string
	storetest.RunBackup(t,
		func(t *testing.T) store.Store {
			prefix = newPrefix()
			return openT(t, Options{Prefix: prefix})
		},
		func(t *testing.T, path string) store.Store {
			c, err := etcdproc.StartFromSnapshot(ctxT(t), etcdproc.Config{Dir: etcdtest.ShortTempDir(t), ExitWithParent: true}, path)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { c.Stop() })
			return openT(t, Options{Endpoints: c.Endpoints(), Prefix: prefix})
		})
}

func TestBackupFile(t *testing.T) {
	s := openT(t, Options{})
	ctx := ctxT(t)
	if _, err := s.Txn(ctx, nil, []store.Op{store.Put("a", []byte("1"))}, nil); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "backup.db")
	// An existing, wider file is replaced, not reused with its mode.
	if err := os.WriteFile(path, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := s.Backup(ctx, path); err != nil {
		t.Fatalf("Backup: %v", err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 || fi.Size() < 4096 {
		t.Errorf("backup: mode %v, %d bytes; want 0600 and a database", fi.Mode().Perm(), fi.Size())
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("directory holds %d entries after backup, want 1 (no temporary left)", len(entries))
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if err := s.Backup(cctx, filepath.Join(dir, "never.db")); !errors.Is(err, context.Canceled) {
		t.Errorf("Backup with a cancelled context: %v", err)
	}
	if err := s.Backup(ctx, filepath.Join(dir, "missing", "b.db")); err == nil {
		t.Errorf("Backup into a missing directory succeeded")
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("failed backups left files: %v", entries)
	}
}

// TestPrefixIsolation: stores on one etcd under different prefixes see only
// their own keys, and etcd holds them under the prefix.
func TestPrefixIsolation(t *testing.T) {
	a, b := openT(t, Options{}), openT(t, Options{})
	ctx := ctxT(t)
	wa := a.Watch(ctx, "", 0)
	for _, s := range []*Store{a, b} {
		if _, err := s.Txn(ctx, nil, []store.Op{store.Put("k", []byte(s.prefix)), store.Put("k2", nil)}, nil); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := b.Txn(ctx, nil, []store.Op{store.DeletePrefix("")}, nil); err != nil {
		t.Fatal(err)
	}
	kvs, _, err := a.Range(ctx, "", store.RangeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(kvs) != 2 || kvs[0].Key != "k" || string(kvs[0].Value) != a.prefix {
		t.Errorf("a's keys after b deleted all of its own: %+v", kvs)
	}
	raw, err := a.cli.Get(ctx, a.prefix+"k")
	if err != nil || len(raw.Kvs) != 1 {
		t.Errorf("raw key %sk: %v, %v", a.prefix, raw, err)
	}
	resp := <-wa
	if resp.Err != nil || len(resp.Events) != 2 || resp.Events[0].KV.Key != "k" || resp.Events[1].KV.Key != "k2" {
		t.Errorf("a's watch: %+v, want its own two puts", resp)
	}
	for _, bad := range []string{"no-slash", "/a/b"} {
		if s, err := Open(ctx, Options{Endpoints: sharedEtcd(t), Prefix: bad}); err == nil {
			s.Close()
			t.Errorf("prefix %q accepted", bad)
		}
	}
}

func TestOpenErrors(t *testing.T) {
	ctx := ctxT(t)
	if _, err := Open(ctx, Options{}); err == nil {
		t.Errorf("Open without endpoints succeeded")
	}
	// Nothing listens on port 1 of the loopback address.
	if s, err := Open(ctx, Options{Endpoints: []string{"http://127.0.0.1:1"}, DialTimeout: 300 * time.Millisecond}); err == nil {
		s.Close()
		t.Errorf("Open of an unreachable endpoint succeeded")
	}
}

// TestValueNotEqual covers the store's rule that a value "not equal"
// compare holds for a missing key, which etcd does not share.
func TestValueNotEqual(t *testing.T) {
	s := openT(t, Options{})
	ctx := ctxT(t)
	ne := func(key, value string) store.Cmp {
		return store.Cmp{Key: key, Target: store.CmpValue, Op: store.NotEqual, Value: []byte(value)}
	}
	if _, err := s.Txn(ctx, nil, []store.Op{store.Put("present", []byte("v"))}, nil); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		cmps []store.Cmp
		want bool
	}{
		{"missing", []store.Cmp{ne("missing", "v")}, true},
		{"present, other value", []store.Cmp{ne("present", "w")}, true},
		{"present, same value", []store.Cmp{ne("present", "v")}, false},
		{"with a true plain compare", []store.Cmp{store.Exists("present"), ne("missing", "")}, true},
		{"with a false plain compare", []store.Cmp{store.Missing("present"), ne("missing", "")}, false},
		{"one key twice", []store.Cmp{ne("present", "w"), ne("present", "v")}, false},
	}
	for i, tc := range tests {
		rev, _ := s.Revision(ctx)
		then := fmt.Sprintf("then/%d", i)
		res, err := s.Txn(ctx, tc.cmps, []store.Op{store.Put(then, nil), store.Get("present")},
			[]store.Op{store.Put(then, []byte("else"))})
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		kv, _ := s.Get(ctx, then)
		ranThen := kv != nil && len(kv.Value) == 0
		if res.Succeeded != tc.want || ranThen != tc.want || res.Revision != rev+1 {
			t.Errorf("%s: succeeded %v, then ran %v, revision %d; want %v at %d", tc.name, res.Succeeded, ranThen, res.Revision, tc.want, rev+1)
		}
		if tc.want && (len(res.Results) != 2 || len(res.Results[1]) != 1 || string(res.Results[1][0].Value) != "v") {
			t.Errorf("%s: results %+v", tc.name, res.Results)
		}
	}

	// A compared key that changes between the read and the write makes the
	// transaction start over and see the change.
	changes := []store.Op{store.Put("flip", []byte("x")), store.Delete("flip")}
	s.testHookGuarded = func() {
		if len(changes) > 0 {
			op := changes[0]
			changes = changes[1:]
			if _, err := s.Txn(ctx, nil, []store.Op{op}, nil); err != nil {
				t.Error(err)
			}
		}
	}
	defer func() { s.testHookGuarded = nil }()
	res, err := s.Txn(ctx, []store.Cmp{ne("flip", "x")}, []store.Op{store.Put("flipped", nil)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	// The first try saw flip missing, the second saw x; the third, after
	// the delete, is the one that counts.
	if len(changes) != 0 || !res.Succeeded {
		t.Errorf("after the key changed twice: %+v, %d changes left; want the then branch on the third try", res, len(changes))
	}
}

// TestWatchCompacted compacts the history and watches from before it.
// Compaction is global: it drops the shared member's history up to this
// test's own writes, which no later test watches from.
func TestWatchCompacted(t *testing.T) {
	s := openT(t, Options{})
	ctx := ctxT(t)
	var revs []int64
	for i := range 5 {
		res, err := s.Txn(ctx, nil, []store.Op{store.Put(fmt.Sprintf("k%d", i), nil)}, nil)
		if err != nil {
			t.Fatal(err)
		}
		revs = append(revs, res.Revision)
	}
	if _, err := s.cli.Compact(ctx, revs[3]); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		from      int64
		compacted bool
	}{
		{revs[0], true},
		{revs[2], true},
		{revs[4], false},
	} {
		ch := s.Watch(ctx, "", tc.from)
		resp, ok := <-ch
		if !ok {
			t.Fatalf("from %d: closed without a response", tc.from)
		}
		if !tc.compacted {
			if resp.Err != nil || len(resp.Events) != 1 || resp.Events[0].KV.ModRevision != revs[4] {
				t.Errorf("from %d: %+v, want the put at %d", tc.from, resp, revs[4])
			}
			continue
		}
		if !errors.Is(resp.Err, store.ErrCompacted) {
			t.Errorf("from %d: %+v, want ErrCompacted", tc.from, resp)
		}
		if _, ok := <-ch; ok {
			t.Errorf("from %d: channel not closed after ErrCompacted", tc.from)
		}
	}
}

// TestCloseEndsEverything: Close ends the watches and leaves no goroutine
// of the store or the client behind.
func TestCloseEndsEverything(t *testing.T) {
	endpoints := sharedEtcd(t)
	cycle := func() {
		s := openT(t, Options{Endpoints: endpoints})
		ctx := ctxT(t)
		var chans []<-chan store.WatchResponse
		for i := range 3 {
			chans = append(chans, s.Watch(ctx, fmt.Sprintf("w%d/", i), 0))
		}
		if _, err := s.Txn(ctx, nil, []store.Op{store.Put("w0/a", nil)}, nil); err != nil {
			t.Fatal(err)
		}
		if resp := <-chans[0]; resp.Err != nil || len(resp.Events) != 1 {
			t.Fatalf("watch: %+v", resp)
		}
		if _, err := s.Grant(ctx, 5); err != nil {
			t.Fatal(err)
		}
		if err := s.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
		if err := s.Close(); err != nil {
			t.Fatalf("second Close: %v", err)
		}
		for i, ch := range chans {
			select {
			case _, ok := <-ch:
				for ok {
					_, ok = <-ch
				}
			case <-time.After(10 * time.Second):
				t.Fatalf("watch %d open after Close", i)
			}
		}
		if err := s.Revoke(ctx, 1); !errors.Is(err, store.ErrClosed) {
			t.Errorf("Revoke after Close: %v", err)
		}
		if err := s.KeepAlive(ctx, 1); !errors.Is(err, store.ErrClosed) {
			t.Errorf("KeepAlive after Close: %v", err)
		}
		if err := s.Backup(ctx, filepath.Join(t.TempDir(), "b")); !errors.Is(err, store.ErrClosed) {
			t.Errorf("Backup after Close: %v", err)
		}
		if _, err := s.Revision(ctx); !errors.Is(err, store.ErrClosed) {
			t.Errorf("Revision after Close: %v", err)
		}
	}
	// The first cycle starts what a process keeps once (gRPC's resolvers
	// and balancers register themselves).
	cycle()
	before := runtime.NumGoroutine()
	for range 3 {
		cycle()
	}
	// Goroutines end asynchronously after Close returns; give them a
	// bounded time to go.
	deadline := time.Now().Add(10 * time.Second)
	for runtime.NumGoroutine() > before {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			t.Fatalf("%d goroutines after 3 open/close cycles, %d before:\n%s",
				runtime.NumGoroutine(), before, buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestTooLargeOnTheWire: a transaction within the store's limits whose keys
// grow past etcd's request limit through a long prefix is refused by etcd
// with ErrTooLarge, not applied.
func TestTooLargeOnTheWire(t *testing.T) {
	prefix := "/" + strings.Repeat("p", 5*1024) + "/"
	s := openT(t, Options{Prefix: prefix})
	ctx := ctxT(t)
	ops := make([]store.Op, store.MaxOpsPerTxn)
	value := make([]byte, store.MaxTxnBytes/store.MaxOpsPerTxn-16)
	for i := range ops {
		ops[i] = store.Put(fmt.Sprintf("k%03d", i), value)
	}
	if err := store.CheckTxn(nil, ops, nil); err != nil {
		t.Fatalf("the transaction should pass the store's own check: %v", err)
	}
	rev, _ := s.Revision(ctx)
	_, err := s.Txn(ctx, nil, ops, nil)
	if !errors.Is(err, store.ErrTooLarge) {
		t.Fatalf("Txn: %v, want ErrTooLarge", err)
	}
	if !errors.Is(err, rpctypes.ErrRequestTooLarge) {
		t.Errorf("Txn: %v, want etcd's refusal in the chain", err)
	}
	if got, _ := s.Revision(ctx); got != rev {
		t.Errorf("revision moved from %d to %d", rev, got)
	}
}

func TestStoreError(t *testing.T) {
	tests := []struct {
		err  error
		want error
	}{
		{rpctypes.ErrLeaseNotFound, store.ErrNoLease},
		{rpctypes.ErrRequestTooLarge, store.ErrTooLarge},
		{rpctypes.ErrTooManyOps, store.ErrTooLarge},
		{status.Error(codes.ResourceExhausted, "trying to send message larger than max (3000000 vs. 2621440)"), store.ErrTooLarge},
		{status.Error(codes.ResourceExhausted, "grpc: received message larger than max (3000000 vs. 2621440)"), store.ErrTooLarge},
		{rpctypes.ErrCompacted, store.ErrCompacted},
		{rpctypes.ErrDuplicateKey, store.ErrDuplicateKey},
		{rpctypes.ErrEmptyKey, store.ErrInvalid},
		{rpctypes.ErrLeaseTTLTooLarge, store.ErrInvalid},
		{fmt.Errorf("wrapped: %w", rpctypes.ErrLeaseNotFound), store.ErrNoLease},
		{rpctypes.ErrNoSpace, nil},
		{rpctypes.ErrTooManyRequests, nil},
		{status.Error(codes.Unavailable, "connection refused"), nil},
		{context.Canceled, nil},
	}
	for _, tc := range tests {
		if got := storeError(tc.err); got != tc.want {
			t.Errorf("storeError(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
	// Mapped errors keep etcd's error in the chain; after Close everything
	// is ErrClosed.
	s := &Store{}
	err := s.mapErr(rpctypes.ErrLeaseNotFound)
	if !errors.Is(err, store.ErrNoLease) || !errors.Is(err, rpctypes.ErrLeaseNotFound) {
		t.Errorf("mapErr: %v", err)
	}
	s.closed.Store(true)
	if err := s.mapErr(status.Error(codes.Canceled, "grpc: the client connection is closing")); !errors.Is(err, store.ErrClosed) {
		t.Errorf("mapErr after Close: %v", err)
	}
}

func TestSpan(t *testing.T) {
	tests := []struct {
		storePrefix, prefix string
		key, end            string
	}{
		{"/c/", "", "/c/", "/c0"},
		{"/c/", "jobs/", "/c/jobs/", "/c/jobs0"},
		{"", "", "\x00", "\x00"},
		{"", "a", "a", "b"},
		{"", "\xff\xff", "\xff\xff", "\x00"},
		{"/c/", "a\xff", "/c/a\xff", "/c/b"},
	}
	for _, tc := range tests {
		s := &Store{prefix: tc.storePrefix}
		key, end := s.span(tc.prefix)
		if key != tc.key || end != tc.end {
			t.Errorf("span(%q) under %q = %q, %q; want %q, %q", tc.prefix, tc.storePrefix, key, end, tc.key, tc.end)
		}
	}
}

// TestValuesAreFresh: values of different results never share memory, so a
// caller may keep or change one without touching another.
func TestValuesAreFresh(t *testing.T) {
	s := openT(t, Options{})
	ctx := ctxT(t)
	if _, err := s.Txn(ctx, nil, []store.Op{store.Put("a", []byte("aaaa")), store.Put("b", []byte("bbbb"))}, nil); err != nil {
		t.Fatal(err)
	}
	kvs, _, err := s.Range(ctx, "", store.RangeOptions{})
	if err != nil || len(kvs) != 2 {
		t.Fatalf("Range: %v, %v", kvs, err)
	}
	kvs[0].Value = append(kvs[0].Value, 'X')
	copy(kvs[0].Value, "zzzz")
	if !bytes.Equal(kvs[1].Value, []byte("bbbb")) {
		t.Errorf("changing one value changed another: %q", kvs[1].Value)
	}
}
