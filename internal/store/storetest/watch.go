package storetest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/corral/corral/internal/store"
)

// ev is an event reduced to what the watch tests compare.
type ev struct {
	typ   store.EventType
	key   string
	value string
	rev   int64
}

func (e ev) String() string {
	if e.typ == store.EventDelete {
		return fmt.Sprintf("del %s@%d", e.key, e.rev)
	}
	return fmt.Sprintf("put %s=%s@%d", e.key, e.value, e.rev)
}

// collect reads n events from ch, failing on an error response, a closed
// channel or a timeout.
func collect(t *testing.T, ch <-chan store.WatchResponse, n int) []ev {
	t.Helper()
	var out []ev
	timeout := time.NewTimer(waitLimit)
	defer timeout.Stop()
	lastRev := int64(0)
	for len(out) < n {
		select {
		case resp, ok := <-ch:
			if !ok {
				t.Fatalf("watch closed after %v, want %d events", out, n)
			}
			if resp.Err != nil {
				t.Fatalf("watch error after %v: %v", out, resp.Err)
			}
			for _, e := range resp.Events {
				if e.KV.ModRevision < lastRev {
					t.Errorf("event %s@%d after revision %d", e.KV.Key, e.KV.ModRevision, lastRev)
				}
				lastRev = e.KV.ModRevision
				out = append(out, ev{e.Type, e.KV.Key, string(e.KV.Value), e.KV.ModRevision})
			}
		case <-timeout.C:
			t.Fatalf("timed out with events %v, want %d", out, n)
		}
	}
	return out
}

func sameEvents(t *testing.T, got, want []ev) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("events %v, want %v", got, want)
		return
	}
	for i := range got {
		if got[i] != want[i] {
			t.Errorf("events %v, want %v", got, want)
			return
		}
	}
}

func testWatchFromNow(t *testing.T, s store.Store) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	mustPut(t, s, "w/old", "x")
	ch := s.Watch(ctx, "w/", 0)
	r1 := mustPut(t, s, "w/a", "1")
	mustPut(t, s, "other", "2")       // outside the prefix
	mustPut(t, s, "w", "3")           // shorter than the prefix
	r2 := mustPut(t, s, "w/b/c", "4") // nested
	r3 := mustTxn(t, s, nil, []store.Op{store.Delete("w/a"), store.Put("w/d", []byte("5")), store.Put("x", nil)}, nil).Revision
	r4 := mustTxn(t, s, nil, []store.Op{store.DeletePrefix("w/")}, nil).Revision
	mustTxn(t, s, nil, []store.Op{store.Delete("w/missing")}, nil) // no change, no event
	r5 := mustPut(t, s, "w/z", "6")
	got := collect(t, ch, 8)
	want := []ev{
		{store.EventPut, "w/a", "1", r1},
		{store.EventPut, "w/b/c", "4", r2},
		{store.EventDelete, "w/a", "", r3},
		{store.EventPut, "w/d", "5", r3},
		{store.EventDelete, "w/b/c", "", r4},
		{store.EventDelete, "w/d", "", r4},
		{store.EventDelete, "w/old", "", r4},
		{store.EventPut, "w/z", "6", r5},
	}
	sameEvents(t, got, want)
}

func testWatchFromRevision(t *testing.T, s store.Store) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r1 := mustPut(t, s, "h/a", "1")
	r2 := mustPut(t, s, "h/b", "2")
	mustPut(t, s, "i/x", "3")
	r3 := mustPut(t, s, "h/a", "4")

	// From a past revision: history first, then live events.
	ch := s.Watch(ctx, "h/", r2)
	r4 := mustPut(t, s, "h/c", "5")
	sameEvents(t, collect(t, ch, 3), []ev{
		{store.EventPut, "h/b", "2", r2},
		{store.EventPut, "h/a", "4", r3},
		{store.EventPut, "h/c", "5", r4},
	})

	// The put event carries the key's full metadata.
	ch2 := s.Watch(ctx, "h/a", r3)
	select {
	case resp := <-ch2:
		if resp.Err != nil || len(resp.Events) == 0 {
			t.Fatalf("watch from %d: %+v", r3, resp)
		}
		kv := resp.Events[0].KV
		want := store.KV{Key: "h/a", Value: []byte("4"), CreateRevision: r1, ModRevision: r3, Version: 2}
		if !sameKV(kv, want) {
			t.Errorf("event KV = %+v, want %+v", kv, want)
		}
	case <-time.After(waitLimit):
		t.Fatalf("no event from revision %d", r3)
	}

	// From a future revision: nothing until that revision.
	ch3 := s.Watch(ctx, "h/", r4+2)
	mustPut(t, s, "h/skip", "6")
	r6 := mustPut(t, s, "h/seen", "7")
	sameEvents(t, collect(t, ch3, 1), []ev{{store.EventPut, "h/seen", "7", r6}})
}

// testWatchEnds checks that a watch closes when its context ends or the
// store closes.
func testWatchEnds(t *testing.T, open func(t *testing.T) store.Store) {
	s := open(t)
	ctx, cancel := context.WithCancel(context.Background())
	ch := s.Watch(ctx, "", 0)
	mustPut(t, s, "a", "1")
	collect(t, ch, 1)
	cancel()
	waitClosed(t, ch, "after cancel")

	ch = s.Watch(context.Background(), "", 0)
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	waitClosed(t, ch, "after Close")
}

// waitClosed drains ch until it closes; an error response is allowed.
func waitClosed(t *testing.T, ch <-chan store.WatchResponse, when string) {
	t.Helper()
	timeout := time.After(waitLimit)
	for {
		select {
		case resp, ok := <-ch:
			if !ok {
				return
			}
			if len(resp.Events) > 0 {
				t.Errorf("%s: unexpected events %+v", when, resp.Events)
			}
		case <-timeout:
			t.Fatalf("watch not closed %s", when)
		}
	}
}

func testClosed(t *testing.T, s store.Store) {
	ctx := context.Background()
	mustPut(t, s, "a", "1")
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if _, err := s.Txn(ctx, nil, []store.Op{store.Put("b", nil)}, nil); !errors.Is(err, store.ErrClosed) {
		t.Errorf("Txn after Close: %v, want ErrClosed", err)
	}
	if _, err := s.Get(ctx, "a"); !errors.Is(err, store.ErrClosed) {
		t.Errorf("Get after Close: %v, want ErrClosed", err)
	}
	if _, _, err := s.Range(ctx, "", store.RangeOptions{}); !errors.Is(err, store.ErrClosed) {
		t.Errorf("Range after Close: %v, want ErrClosed", err)
	}
	if _, err := s.Grant(ctx, 10); !errors.Is(err, store.ErrClosed) {
		t.Errorf("Grant after Close: %v, want ErrClosed", err)
	}
	waitClosed(t, s.Watch(ctx, "", 0), "when opened after Close")
}
