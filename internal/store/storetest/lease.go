package storetest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/corral/corral/internal/store"
)

func testLeases(t *testing.T, s store.Store) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	l1, err := s.Grant(ctx, 600)
	if err != nil {
		t.Fatalf("Grant: %v", err)
	}
	l2, err := s.Grant(ctx, 600)
	if err != nil {
		t.Fatalf("Grant: %v", err)
	}
	if l1 == 0 || l2 == 0 || l1 == l2 {
		t.Fatalf("lease ids %d, %d: want distinct and non-zero", l1, l2)
	}
	if _, err := s.Grant(ctx, 0); err == nil {
		t.Errorf("Grant(0) succeeded")
	}

	r1 := mustTxn(t, s, nil, []store.Op{
		store.PutWithLease("l/a", []byte("1"), l1),
		store.PutWithLease("l/b", []byte("2"), l1),
		store.PutWithLease("l/c", []byte("3"), l2),
		store.Put("l/plain", []byte("4")),
	}, nil).Revision
	if kv := mustGet(t, s, "l/a"); kv == nil || kv.Lease != l1 {
		t.Fatalf("l/a = %+v, want lease %d", kv, l1)
	}
	// Moving a key to another lease, or off leases, detaches it.
	mustTxn(t, s, nil, []store.Op{store.PutWithLease("l/b", []byte("2"), l2), store.PutWithLease("l/plain", []byte("5"), l1)}, nil)
	mustTxn(t, s, nil, []store.Op{store.Put("l/plain", []byte("6"))}, nil)

	if err := s.KeepAlive(ctx, l1); err != nil {
		t.Errorf("KeepAlive: %v", err)
	}
	wantErr(t, "KeepAlive of unknown lease", s.KeepAlive(ctx, l1+l2+1000), store.ErrNoLease)
	wantErr(t, "Revoke of unknown lease", s.Revoke(ctx, l1+l2+1000), store.ErrNoLease)
	_, err = s.Txn(ctx, nil, []store.Op{store.PutWithLease("l/x", nil, l1+l2+1000)}, nil)
	wantErr(t, "put with unknown lease", err, store.ErrNoLease)

	ch := s.Watch(ctx, "l/", r1+1)
	rev := revision(t, s)
	if err := s.Revoke(ctx, l1); err != nil {
		t.Fatalf("Revoke: %v", err)
	}
	// One revision deletes l/a only: l/b moved to l2, l/plain left leases.
	if got := revision(t, s); got != rev+1 {
		t.Errorf("revision after Revoke = %d, want %d", got, rev+1)
	}
	evs := collect(t, ch, 4)
	if last := evs[3]; last != (ev{store.EventDelete, "l/a", "", rev + 1}) {
		t.Errorf("events %v: want the revoke's delete of l/a at %d last", evs, rev+1)
	}
	for _, k := range []string{"l/b", "l/c", "l/plain"} {
		if kv := mustGet(t, s, k); kv == nil {
			t.Errorf("%s deleted by the revoke of another lease", k)
		}
	}
	if kv := mustGet(t, s, "l/a"); kv != nil {
		t.Errorf("l/a survived the revoke: %+v", kv)
	}
	wantErr(t, "KeepAlive of revoked lease", s.KeepAlive(ctx, l1), store.ErrNoLease)
	wantErr(t, "second Revoke", s.Revoke(ctx, l1), store.ErrNoLease)
	_, err = s.Txn(ctx, nil, []store.Op{store.PutWithLease("l/y", nil, l1)}, nil)
	wantErr(t, "put with revoked lease", err, store.ErrNoLease)

	// Deleting a leased key by hand leaves the lease alive, and its revoke
	// deletes nothing.
	mustTxn(t, s, nil, []store.Op{store.Delete("l/b"), store.Delete("l/c")}, nil)
	rev = revision(t, s)
	if err := s.Revoke(ctx, l2); err != nil {
		t.Fatalf("Revoke of a lease without keys: %v", err)
	}
	if got := revision(t, s); got != rev {
		t.Errorf("revoking a lease without keys moved the revision from %d to %d", rev, got)
	}
}

// testLeaseExpiry lets a short lease expire and checks its keys go in one
// revision that watchers see, while a kept-alive lease stays.
func testLeaseExpiry(t *testing.T, s store.Store) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	short, err := s.Grant(ctx, 1)
	if err != nil {
		t.Fatalf("Grant: %v", err)
	}
	kept, err := s.Grant(ctx, 1)
	if err != nil {
		t.Fatalf("Grant: %v", err)
	}
	mustTxn(t, s, nil, []store.Op{
		store.PutWithLease("e/a", []byte("1"), short),
		store.PutWithLease("e/b", []byte("2"), short),
		store.PutWithLease("e/kept", []byte("3"), kept),
	}, nil)
	ch := s.Watch(ctx, "e/", 0)
	// Keep one lease alive until the other's keys are gone.
	stop := make(chan struct{})
	kaDone := make(chan error, 1)
	go func() {
		tick := time.NewTicker(200 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				kaDone <- nil
				return
			case <-tick.C:
				if err := s.KeepAlive(ctx, kept); err != nil {
					kaDone <- err
					return
				}
			}
		}
	}()
	evs := collect(t, ch, 2)
	close(stop)
	if err := <-kaDone; err != nil {
		t.Errorf("KeepAlive of the kept lease: %v", err)
	}
	if evs[0].typ != store.EventDelete || evs[1].typ != store.EventDelete || evs[0].rev != evs[1].rev ||
		evs[0].key != "e/a" || evs[1].key != "e/b" {
		t.Errorf("expiry events %v, want deletes of e/a and e/b in one revision", evs)
	}
	if kv := mustGet(t, s, "e/kept"); kv == nil {
		t.Errorf("key of the kept-alive lease deleted")
	}
	err = s.KeepAlive(ctx, short)
	if !errors.Is(err, store.ErrNoLease) {
		t.Errorf("KeepAlive of expired lease: %v, want ErrNoLease", err)
	}
	_, err = s.Txn(ctx, nil, []store.Op{store.PutWithLease("e/c", nil, short)}, nil)
	wantErr(t, "put with expired lease", err, store.ErrNoLease)
}
