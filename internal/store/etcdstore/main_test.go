package etcdstore

import (
	"context"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/corral/corral/internal/etcdproc"
	"github.com/corral/corral/internal/etcdproc/etcdtest"
)

// The package's tests share one single-member etcd, started by the first
// test that needs it; each store gets a fresh key prefix on it. Tests that
// need their own members (mTLS, three members, restarts) start them.
var shared struct {
	once    sync.Once
	dir     string
	cluster *etcdproc.Cluster
	admin   *clientv3.Client // for cleaning up after tests
	err     error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if shared.admin != nil {
		shared.admin.Close()
	}
	if shared.cluster != nil {
		shared.cluster.Stop()
	}
	if shared.dir != "" {
		os.RemoveAll(shared.dir)
	}
	os.Exit(code)
}

// sharedEtcd returns the shared member's endpoints, starting it first if
// needed. It skips tb when etcd is missing (fails under
// CORRAL_REQUIRE_ETCD=1).
func sharedEtcd(tb testing.TB) []string {
	tb.Helper()
	bin := etcdtest.Require(tb)
	shared.once.Do(func() {
		if shared.dir, shared.err = os.MkdirTemp("", "etcdstore"); shared.err != nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		shared.cluster, shared.err = etcdproc.Start(ctx, etcdproc.Config{Binary: bin, Dir: shared.dir, ExitWithParent: true})
		if shared.err != nil {
			return
		}
		shared.admin, shared.err = clientv3.New(clientv3.Config{Endpoints: shared.cluster.Endpoints(), DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	})
	if shared.err != nil {
		tb.Fatalf("shared etcd: %v", shared.err)
	}
	return shared.cluster.Endpoints()
}

var prefixes atomic.Int64

// newPrefix is a key prefix no other store of this test binary uses.
func newPrefix() string { return fmt.Sprintf("/test/%d/", prefixes.Add(1)) }

// openT opens a store, by default on the shared member under a new prefix,
// and closes it when the test ends.
func openT(tb testing.TB, opts Options) *Store {
	tb.Helper()
	if opts.Endpoints == nil {
		opts.Endpoints = sharedEtcd(tb)
		// Leases outlive stores in etcd. One left running by a test would
		// expire during a later one and move the shared revision under
		// it, so every lease goes when the test ends (tests of this
		// package do not run in parallel).
		tb.Cleanup(func() { revokeAll(tb) })
	}
	if opts.Prefix == "" {
		opts.Prefix = newPrefix()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	s, err := Open(ctx, opts)
	if err != nil {
		tb.Fatalf("Open: %v", err)
	}
	tb.Cleanup(func() { s.Close() })
	return s
}

func revokeAll(tb testing.TB) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := shared.admin.Leases(ctx)
	if err != nil {
		tb.Errorf("listing leases: %v", err)
		return
	}
	for _, l := range resp.Leases {
		if _, err := shared.admin.Revoke(ctx, l.ID); err != nil {
			tb.Errorf("revoking lease %x: %v", l.ID, err)
		}
	}
}

func ctxT(tb testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	tb.Cleanup(cancel)
	return ctx
}
