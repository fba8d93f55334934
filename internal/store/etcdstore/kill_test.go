package etcdstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/corral/corral/internal/etcdproc"
	"github.com/corral/corral/internal/etcdproc/etcdtest"
	"github.com/corral/corral/internal/store"
)

// TestWritesThroughKills writes without pause from several goroutines to a
// three-member cluster while each member in turn, the leader first, is
// killed with SIGKILL and restarted: compare-guarded increments of one
// counter, and puts of fresh keys. Every Txn must either succeed, with its
// effect there exactly once, or fail definitely with no effect: the
// counter ends equal to the number of increments that succeeded, each
// acknowledged put's key was written once at the revision returned, each
// failed put's key is missing, and no Txn leaves its outcome unknown.
func TestWritesThroughKills(t *testing.T) {
	c := etcdtest.Start(t, etcdproc.Config{Members: 3})
	s := openT(t, Options{Endpoints: c.Endpoints()})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	var (
		done      = make(chan struct{})
		wg        sync.WaitGroup
		progress  atomic.Int64 // successful writes
		incs      atomic.Int64 // successful increments
		failed    atomic.Int64 // definite failures
		mu        sync.Mutex
		acked     = map[string]int64{} // put key -> revision
		refused   []string             // keys of failed puts
		uncertain []error
	)
	stopped := func() bool {
		select {
		case <-done:
			return true
		default:
			return false
		}
	}
	outcome := func(err error, what string) {
		if errors.Is(err, store.ErrUncertain) {
			mu.Lock()
			uncertain = append(uncertain, fmt.Errorf("%s: %w", what, err))
			mu.Unlock()
			return
		}
		failed.Add(1)
		t.Logf("%s failed: %v", what, err)
	}
	for w := range 4 {
		wg.Go(func() {
			for !stopped() {
				kv, err := s.Get(ctx, "ctr")
				if err != nil {
					select { // a read: tried again shortly
					case <-done:
					case <-time.After(20 * time.Millisecond):
					}
					continue
				}
				n, mod := 0, int64(0)
				if kv != nil {
					n, _ = strconv.Atoi(string(kv.Value))
					mod = kv.ModRevision
				}
				res, err := s.Txn(ctx, []store.Cmp{store.ModRevisionIs("ctr", mod)},
					[]store.Op{store.Put("ctr", []byte(strconv.Itoa(n+1)))}, nil)
				switch {
				case err != nil:
					outcome(err, fmt.Sprintf("increment by %d", w))
				case res.Succeeded:
					incs.Add(1)
					progress.Add(1)
				}
			}
		})
	}
	for w := range 2 {
		wg.Go(func() {
			for i := 0; !stopped(); i++ {
				key := fmt.Sprintf("p/%d/%06d", w, i)
				res, err := s.Txn(ctx, nil, []store.Op{store.Put(key, []byte(key))}, nil)
				mu.Lock()
				if err == nil {
					acked[key] = res.Revision
				} else if !errors.Is(err, store.ErrUncertain) {
					refused = append(refused, key)
				}
				mu.Unlock()
				if err != nil {
					outcome(err, "put "+key)
				} else {
					progress.Add(1)
				}
			}
		})
	}
	stop := sync.OnceFunc(func() {
		close(done)
		wg.Wait()
	})
	defer stop()
	// waitProgress waits until n more writes have succeeded.
	waitProgress := func(n int64, what string) {
		t.Helper()
		want := progress.Load() + n
		deadline := time.Now().Add(45 * time.Second)
		for progress.Load() < want {
			if time.Now().After(deadline) {
				t.Fatalf("%s: %d of %d writes done in 45 s", what, progress.Load()-want+n, n)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}

	waitProgress(20, "before the first kill")
	killInTurn(t, ctx, s, c.Members, func(_ int, victim *etcdproc.Member) {
		waitProgress(30, "with "+victim.Name+" dead")
	}, func(_ int, victim *etcdproc.Member) {
		waitProgress(30, "after restarting "+victim.Name)
	})
	stop()

	t.Logf("%d increments, %d puts, %d definite failures; %d tries sent again, %d outcomes learned from markers",
		incs.Load(), len(acked), failed.Load(), s.retries.Load(), s.settled.Load())
	for _, err := range uncertain {
		t.Errorf("outcome unknown with a quorum up: %v", err)
	}
	kv, err := s.Get(ctx, "ctr")
	if err != nil {
		t.Fatal(err)
	}
	if kv == nil || string(kv.Value) != strconv.FormatInt(incs.Load(), 10) || kv.Version != incs.Load() {
		t.Errorf("counter %+v, want %d after as many increments", kv, incs.Load())
	}
	kvs, _, err := s.Range(ctx, "p/", store.RangeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	found := map[string]store.KV{}
	for _, kv := range kvs {
		found[kv.Key] = kv
	}
	for key, rev := range acked {
		if kv, ok := found[key]; !ok || kv.Version != 1 || kv.ModRevision != rev {
			t.Errorf("acknowledged put of %s at %d: stored %+v (present %v), want version 1 at that revision", key, rev, kv, ok)
		}
	}
	for _, key := range refused {
		if kv, ok := found[key]; ok {
			t.Errorf("failed put of %s applied: %+v", key, kv)
		}
	}
	if len(found) != len(acked) {
		t.Errorf("%d keys stored, %d puts acknowledged", len(found), len(acked))
	}
}
