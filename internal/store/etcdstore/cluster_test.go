package etcdstore

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/corral/corral/internal/etcdproc"
	"github.com/corral/corral/internal/etcdproc/etcdtest"
	"github.com/corral/corral/internal/store"
)

// TestClusterFailover runs a store on three members (mutual TLS between
// clients and members and among members) and kills each member in turn
// with SIGKILL: first the leader, then whichever member answered the
// client's last request. While a member is down the store keeps reading,
// writing and renewing a lease through the other two, and one watch opened
// at the start sees every write exactly once, in order, although the member
// serving it died on the way.
func TestClusterFailover(t *testing.T) {
	certs := etcdtest.NewCerts(t)
	c := etcdtest.Start(t, etcdproc.Config{Members: 3, ClientTLS: &certs.Member, PeerTLS: &certs.Member})
	s := openT(t, Options{Endpoints: c.Endpoints(), TLS: certs.ClientTLS(t)})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	lease, err := s.Grant(ctx, 30)
	if err != nil {
		t.Fatal(err)
	}
	watch := s.Watch(ctx, "", 0)
	var written []int64
	n := 0
	write := func(count int) {
		t.Helper()
		for range count {
			written = append(written, putOnce(t, ctx, s, fmt.Sprintf("k/%03d", n), lease))
			n++
		}
	}
	write(3)
	checkHealth(t, ctx, s, "")

	killInTurn(t, ctx, s, c.Members, func(step int, victim *etcdproc.Member) {
		if step == 0 {
			checkHealth(t, ctx, s, victim.Name)
		}
		write(3)
		retry(t, ctx, "keepalive", func(ctx context.Context) error { return s.KeepAlive(ctx, lease) })
		retry(t, ctx, "range", func(ctx context.Context) error {
			kvs, _, err := s.Range(ctx, "k/", store.RangeOptions{})
			if err == nil && len(kvs) != n {
				t.Fatalf("range: %d keys, want %d", len(kvs), n)
			}
			return err
		})
	}, nil)
	write(3)

	// The watch delivered every write once and in order.
	var seen []int64
	timeout := time.After(30 * time.Second)
	for len(seen) < len(written) {
		select {
		case resp, ok := <-watch:
			if !ok || resp.Err != nil {
				t.Fatalf("watch ended after %d events: %v", len(seen), resp.Err)
			}
			for _, e := range resp.Events {
				if e.Type != store.EventPut || e.KV.Lease != lease {
					t.Errorf("unexpected event %+v", e)
				}
				seen = append(seen, e.KV.ModRevision)
			}
		case <-timeout:
			t.Fatalf("watch saw %d of %d writes", len(seen), len(written))
		}
	}
	if fmt.Sprint(seen) != fmt.Sprint(written) {
		t.Errorf("watch saw revisions %v, the writes were at %v", seen, written)
	}
}

// putOnce creates key, retrying through failover. The compare makes a
// retry of a write that did go through harmless: the else branch then
// reads the key back.
func putOnce(t *testing.T, ctx context.Context, s *Store, key string, lease int64) int64 {
	t.Helper()
	var rev int64
	retry(t, ctx, "put "+key, func(ctx context.Context) error {
		res, err := s.Txn(ctx, []store.Cmp{store.Missing(key)},
			[]store.Op{store.PutWithLease(key, []byte(key), lease)}, []store.Op{store.Get(key)})
		if err != nil {
			return err
		}
		rev = res.Revision
		if !res.Succeeded {
			rev = res.Results[0][0].ModRevision
		}
		return nil
	})
	return rev
}

// retry runs fn until it succeeds, giving each try two seconds; the errors
// of a member dying or of an election in progress are expected for a
// moment. (A write that reaches a follower just after the leader died is
// lost with the leader and only times out, hence the short tries.) Errors
// of the store itself fail the test.
func retry(t *testing.T, ctx context.Context, what string, fn func(context.Context) error) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	var last error
	for tries := 1; ; tries++ {
		tctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		err := fn(tctx)
		cancel()
		if err == nil {
			if tries > 1 {
				t.Logf("%s: succeeded on try %d (the last error: %v)", what, tries, last)
			}
			return
		}
		last = err
		for _, e := range []error{store.ErrNoLease, store.ErrInvalid, store.ErrTooLarge, store.ErrClosed, store.ErrDuplicateKey} {
			if errors.Is(err, e) {
				t.Fatalf("%s: %v", what, err)
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: still failing after %d tries: %v", what, tries, err)
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s: %v", what, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// killInTurn kills each member with SIGKILL in turn and restarts it: the
// leader first, then the member that answers the client, if it is still to
// be killed, else any that is. So the client loses the member it talks to.
// down runs while the victim is dead, up (if not nil) after its restart.
func killInTurn(t *testing.T, ctx context.Context, s *Store, members []*etcdproc.Member, down, up func(step int, victim *etcdproc.Member)) {
	t.Helper()
	// Which member is which, by etcd's member id.
	byID := map[uint64]*etcdproc.Member{}
	for _, m := range members {
		st, err := s.cli.Status(ctx, m.ClientURL)
		if err != nil {
			t.Fatal(err)
		}
		byID[st.Header.MemberId] = m
	}
	killed := map[*etcdproc.Member]bool{}
	for step := range members {
		victim := leader(t, ctx, s, byID)
		if step > 0 {
			victim = nil
			if m := servedBy(t, ctx, s, byID); !killed[m] {
				victim = m
			}
			for _, m := range members {
				if victim == nil && !killed[m] {
					victim = m
				}
			}
		}
		killed[victim] = true
		t.Logf("step %d: killing %s (the leader is %s)", step, victim.Name, leader(t, ctx, s, byID).Name)
		if err := victim.Kill(); err != nil {
			t.Fatal(err)
		}
		down(step, victim)
		if err := victim.Start(ctx); err != nil {
			t.Fatalf("restarting %s: %v", victim.Name, err)
		}
		if up != nil {
			up(step, victim)
		}
	}
}

// leader returns the member that leads the cluster now.
func leader(t *testing.T, ctx context.Context, s *Store, byID map[uint64]*etcdproc.Member) *etcdproc.Member {
	t.Helper()
	var m *etcdproc.Member
	retry(t, ctx, "finding the leader", func(ctx context.Context) error {
		for _, cand := range byID {
			st, err := s.cli.Status(ctx, cand.ClientURL)
			if err != nil {
				continue
			}
			if m = byID[st.Leader]; m != nil {
				return nil
			}
		}
		return errors.New("no member knows a leader")
	})
	return m
}

// servedBy returns the member that answers the client's next read.
func servedBy(t *testing.T, ctx context.Context, s *Store, byID map[uint64]*etcdproc.Member) *etcdproc.Member {
	t.Helper()
	var m *etcdproc.Member
	retry(t, ctx, "reading", func(ctx context.Context) error {
		resp, err := s.cli.Get(ctx, "any")
		if err != nil {
			return err
		}
		if m = byID[resp.Header.MemberId]; m == nil {
			return fmt.Errorf("answer from unknown member %x", resp.Header.MemberId)
		}
		return nil
	})
	return m
}

// checkHealth expects every member healthy but down (if not ""), and one
// leader among the healthy ones.
func checkHealth(t *testing.T, ctx context.Context, s *Store, down string) {
	t.Helper()
	hs, err := s.Health(ctx)
	if err != nil {
		t.Fatalf("Health: %v", err)
	}
	if len(hs) != 3 {
		t.Fatalf("Health lists %d members, want 3: %+v", len(hs), hs)
	}
	leaders := 0
	for _, h := range hs {
		if h.Name == down {
			if h.Healthy || h.Err == "" {
				t.Errorf("killed member %s reported healthy: %+v", h.Name, h)
			}
			continue
		}
		// A survivor may briefly know no leader while one is elected.
		for deadline := time.Now().Add(30 * time.Second); !h.Healthy; {
			if time.Now().After(deadline) {
				t.Fatalf("member %s stays unhealthy: %s", h.Name, h.Err)
			}
			time.Sleep(200 * time.Millisecond)
			again, err := s.Health(ctx)
			if err != nil {
				t.Fatalf("Health: %v", err)
			}
			for _, g := range again {
				if g.Name == h.Name {
					h = g
				}
			}
		}
		if h.Leader {
			leaders++
		}
	}
	if leaders > 1 || (down == "" && leaders != 1) {
		t.Errorf("%d leaders reported: %+v", leaders, hs)
	}
}
