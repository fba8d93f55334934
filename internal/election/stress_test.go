package election

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/corral/corral/internal/store"
)

// counterWrite is what a leader writes to the stress test's counter key.
type counterWrite struct {
	Name  string `json:"name"`
	Token int64  `json:"token"`
	Seq   int    `json:"seq"`
}

// checkHistory replays the events of the election key and the counter key
// in revision order and reports the first write that a correct fence would
// have refused: one made for a term other than the election key's at that
// revision, one by a candidate that did not win that term, or one that
// goes back to an earlier term or an earlier sequence number. It returns
// the number of writes.
func checkHistory(events []store.Event, key, counter string, wins map[int64]string) (int, error) {
	var cur, last int64
	writes := 0
	seq := map[int64]int{}
	for _, ev := range events {
		switch ev.KV.Key {
		case key:
			cur = 0
			if ev.Type == store.EventPut {
				cur = ev.KV.CreateRevision
			}
		case counter:
			if ev.Type != store.EventPut {
				return writes, fmt.Errorf("revision %d: counter deleted", ev.KV.ModRevision)
			}
			var w counterWrite
			if err := json.Unmarshal(ev.KV.Value, &w); err != nil {
				return writes, fmt.Errorf("revision %d: %w", ev.KV.ModRevision, err)
			}
			at := ev.KV.ModRevision
			switch {
			case w.Token != cur:
				return writes, fmt.Errorf("revision %d: %s wrote for term %d while the election key was at %d", at, w.Name, w.Token, cur)
			case wins[w.Token] != w.Name:
				return writes, fmt.Errorf("revision %d: %s wrote for term %d, won by %q", at, w.Name, w.Token, wins[w.Token])
			case w.Token < last:
				return writes, fmt.Errorf("revision %d: write for term %d after one for term %d", at, w.Token, last)
			case w.Seq <= seq[w.Token]:
				return writes, fmt.Errorf("revision %d: term %d wrote %d after %d", at, w.Token, w.Seq, seq[w.Token])
			}
			last, seq[w.Token] = w.Token, w.Seq
			writes++
		}
	}
	return writes, nil
}

func TestCheckHistory(t *testing.T) {
	const key, counter = "k", "c"
	elect := func(rev int64) store.Event {
		return store.Event{Type: store.EventPut, KV: store.KV{Key: key, CreateRevision: rev, ModRevision: rev}}
	}
	drop := func(rev int64) store.Event {
		return store.Event{Type: store.EventDelete, KV: store.KV{Key: key, ModRevision: rev}}
	}
	write := func(rev int64, name string, token int64, seq int) store.Event {
		v, _ := json.Marshal(counterWrite{name, token, seq})
		return store.Event{Type: store.EventPut, KV: store.KV{Key: counter, Value: v, ModRevision: rev}}
	}
	wins := map[int64]string{1: "a", 4: "b"}
	tests := []struct {
		name   string
		events []store.Event
		want   string // "" = valid
	}{
		{"valid", []store.Event{elect(1), write(2, "a", 1, 1), drop(3), elect(4), write(5, "b", 4, 1), write(6, "b", 4, 2)}, ""},
		{"write after deposition", []store.Event{elect(1), drop(2), write(3, "a", 1, 1)}, "while the election key was at 0"},
		{"old term writes in the new", []store.Event{elect(1), drop(3), elect(4), write(5, "a", 1, 1)}, "while the election key was at 4"},
		{"second writer in a term", []store.Event{elect(1), write(2, "a", 1, 1), write(3, "b", 1, 2)}, "won by"},
		{"sequence goes back", []store.Event{elect(1), write(2, "a", 1, 2), write(3, "a", 1, 2)}, "wrote 2 after 2"},
		{"counter deleted", []store.Event{elect(1), {Type: store.EventDelete, KV: store.KV{Key: counter}}}, "deleted"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := checkHistory(tc.events, key, counter, wins)
			if (err == nil) != (tc.want == "") || (err != nil && !strings.Contains(err.Error(), tc.want)) {
				t.Fatalf("checkHistory: %v, want %q", err, tc.want)
			}
		})
	}
}

// TestStress runs four candidates that write a counter as fast as a pacing
// ticker allows while they lead, and deposes the leader over and over: by
// revoking its lease, deleting its key, resigning, or partitioning it from
// the store (its stuck writes reach the store after the next leader won).
// The store's history must show every write made under the term the
// election key had at that revision, by that term's winner, in order.
func TestStress(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		rounds := 16
		if b.name == "etcd" {
			rounds = 8
		}
		if testing.Short() {
			rounds = 4
		}
		runStress(t, b, rounds)
	})
}

// writesPerRound is how many writes a leader commits before the stress
// test deposes it.
const writesPerRound = 10

type stressWin struct {
	term  *Term
	f     *faulty
	wrote chan struct{} // closed once the term has committed a few writes
	done  chan struct{} // closed when the leader stopped writing
}

func runStress(t *testing.T, b backend, rounds int) {
	const key, counter, end = "/s/master", "/s/counter", "/s/end"
	conn := b.open(t)
	admin := conn(t)
	ctx := ctxT(t, 4*waitLimit)
	start, err := admin.Revision(ctx)
	if err != nil {
		t.Fatal(err)
	}

	var (
		mu          sync.Mutex
		wins        = map[int64]string{}
		refused     atomic.Int64 // writes refused by the store's compare
		refusedHere atomic.Int64 // writes refused locally
		wg          sync.WaitGroup
	)
	won := make(chan stressWin)
	wctx, stop := context.WithCancel(ctx)
	defer stop()

	lead := func(w stressWin) {
		defer close(w.done)
		fs := Fenced(w.f, w.term)
		tick := time.NewTicker(2 * time.Millisecond)
		defer tick.Stop()
		for seq := 1; ; seq++ {
			select {
			case <-tick.C:
			case <-wctx.Done():
				return
			}
			if w.term.Err() != nil {
				return
			}
			v, _ := json.Marshal(counterWrite{w.term.Name, w.term.Token, seq})
			_, err := fs.Txn(wctx, nil, []store.Op{store.Put(counter, v)}, nil)
			switch {
			case err == nil:
				if seq == writesPerRound {
					close(w.wrote)
				}
			case isFenced(err):
				t.Logf("%s seq %d: %v", w.term.Name, seq, err)
				if strings.Contains(err.Error(), "election key") {
					refused.Add(1)
				} else {
					refusedHere.Add(1)
				}
				return
			case wctx.Err() != nil:
				return
			default:
				t.Logf("%s: write failed: %v", w.term.Name, err)
				return
			}
		}
	}
	for i := range 4 {
		f := newFaulty(conn(t))
		// The widest margin: a partitioned leader must step down before
		// the next wins even when the machine is loaded.
		c := newT(t, Config{Store: f, Key: key, Name: fmt.Sprintf("n%d", i), TTL: b.ttl, Margin: b.ttl / 2, RenewInterval: b.ttl / 4})
		wg.Add(1)
		go func() {
			defer wg.Done()
			for wctx.Err() == nil {
				term, err := c.Campaign(wctx)
				if err != nil {
					return
				}
				mu.Lock()
				wins[term.Token] = c.cfg.Name
				mu.Unlock()
				w := stressWin{term, f, make(chan struct{}), make(chan struct{})}
				select {
				case won <- w:
					lead(w)
				case <-wctx.Done():
					close(w.done)
				}
				select {
				case <-term.Done():
				case <-wctx.Done():
				}
				rctx, cancel := context.WithTimeout(context.Background(), waitLimit)
				term.Resign(rctx)
				cancel()
			}
		}()
	}

	next := func() stressWin {
		select {
		case w := <-won:
			return w
		case <-time.After(2 * waitLimit):
			t.Fatal("no new leader")
		}
		return stressWin{}
	}
	cur := next()
	for i := range rounds {
		select {
		case <-cur.wrote:
		case <-cur.term.Done():
		case <-time.After(waitLimit):
			t.Fatalf("round %d: the leader neither wrote nor lost its term", i)
		}
		how := i % 4
		var err error
		switch how {
		case 0:
			err = admin.Revoke(ctx, cur.term.Lease)
		case 1:
			_, err = admin.Txn(ctx, nil, []store.Op{store.Delete(key)}, nil)
		case 2:
			err = cur.term.Resign(ctx)
		case 3:
			cur.f.partition()
		}
		if err != nil && !errors.Is(err, store.ErrNoLease) {
			t.Fatalf("round %d: deposing: %v", i, err)
		}
		w := next()
		if how == 3 {
			select {
			case <-cur.term.Done():
			default:
				t.Errorf("round %d: %s won while the partitioned %s still believed it led", i, w.term.Name, cur.term.Name)
			}
			cur.f.heal()
			// Its write stuck in the partition now reaches the store.
			select {
			case <-cur.done:
			case <-time.After(waitLimit):
				t.Fatalf("round %d: the partitioned leader did not stop writing", i)
			}
		}
		cur = w
	}
	stop()
	wg.Wait()

	mustTxn(t, admin, nil, []store.Op{store.Put(end, nil)}, nil)
	var events []store.Event
	wctx2, cancel := context.WithTimeout(ctx, waitLimit)
	defer cancel()
collect:
	for resp := range admin.Watch(wctx2, "/s/", start+1) {
		if resp.Err != nil {
			t.Fatalf("watch: %v", resp.Err)
		}
		for _, ev := range resp.Events {
			if ev.KV.Key == end {
				break collect
			}
			events = append(events, ev)
		}
	}
	if wctx2.Err() != nil {
		t.Fatal("the history did not reach the end marker")
	}
	writes, err := checkHistory(events, key, counter, wins)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d terms, %d writes; fenced writes refused by the store: %d, locally: %d", len(wins), writes, refused.Load(), refusedHere.Load())
	if len(wins) < rounds+1 || writes < rounds*writesPerRound {
		t.Errorf("%d terms and %d writes for %d rounds: the test did not exercise what it should", len(wins), writes, rounds)
	}
	if rounds >= 4 && refused.Load() == 0 {
		t.Error("no write was refused by the store: the partitioned leaders' late writes should have been")
	}
}
