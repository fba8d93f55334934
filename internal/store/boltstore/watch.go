package boltstore

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/corral/corral/internal/store"
)

// hub keeps the recent history of events and fans new events out to the
// watchers. Publishing never blocks: each watcher has its own queue, drained
// by its own goroutine, and a queue that grows past its limit ends that
// watch with store.ErrWatchLagged.
//
// Events are shared between the history and every watcher; their values
// must not be modified by receivers.
type hub struct {
	mu         sync.Mutex
	rev        int64 // last published revision
	compacted  int64 // the history may lack events of revisions <= compacted
	history    []store.Event
	maxHistory int
	buffer     int
	watchers   map[*watcher]struct{}
	done       chan struct{}
	closed     bool
}

type watcher struct {
	prefix  string
	from    int64
	wake    chan struct{} // capacity 1: "pending has something"
	pending []store.Event // guarded by hub.mu
	limit   int           // guarded by hub.mu
	lagged  bool          // guarded by hub.mu
}

// newHub starts with an empty history: watches from revisions at or before
// rev are compacted.
func newHub(rev int64, maxHistory, buffer int) *hub {
	return &hub{
		rev:        rev,
		compacted:  rev,
		maxHistory: maxHistory,
		buffer:     buffer,
		watchers:   make(map[*watcher]struct{}),
		done:       make(chan struct{}),
	}
}

// publish records the events of committed requests (each slice one
// revision, in order) and sets the published revision to rev.
func (h *hub) publish(revs [][]store.Event, rev int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, evs := range revs {
		for w := range h.watchers {
			h.enqueue(w, evs)
		}
		h.history = append(h.history, evs...)
	}
	h.rev = rev
	h.trim()
}

// enqueue adds the events w wants; h.mu is held.
func (h *hub) enqueue(w *watcher, evs []store.Event) {
	added := false
	for i := range evs {
		ev := &evs[i]
		if ev.KV.ModRevision < w.from || !strings.HasPrefix(ev.KV.Key, w.prefix) {
			continue
		}
		w.pending = append(w.pending, *ev)
		added = true
	}
	if !added {
		return
	}
	if len(w.pending) > w.limit {
		w.pending = nil
		w.lagged = true
		delete(h.watchers, w)
	}
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// trim drops whole revisions from the front of the history until it fits,
// always keeping the newest revision.
func (h *hub) trim() {
	for len(h.history) > h.maxHistory {
		first := h.history[0].KV.ModRevision
		n := sort.Search(len(h.history), func(i int) bool { return h.history[i].KV.ModRevision > first })
		if n == len(h.history) {
			return
		}
		clear(h.history[:n]) // let the values be collected
		h.history = h.history[n:]
		h.compacted = first
	}
}

func (h *hub) close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return
	}
	h.closed = true
	close(h.done)
	clear(h.watchers)
}

func (h *hub) remove(w *watcher) {
	h.mu.Lock()
	delete(h.watchers, w)
	h.mu.Unlock()
}

// Watch implements store.Store. Events of revisions from fromRev on that are
// still in the in-memory history are sent first, then live ones. Since the
// history starts empty at Open, a watch from any revision at or before the
// one the store opened at gets store.ErrCompacted.
func (s *Store) Watch(ctx context.Context, prefix string, fromRev int64) <-chan store.WatchResponse {
	return s.hub.watch(ctx, prefix, fromRev)
}

func (h *hub) watch(ctx context.Context, prefix string, fromRev int64) <-chan store.WatchResponse {
	out := make(chan store.WatchResponse, 1)
	h.mu.Lock()
	if h.closed || ctx.Err() != nil {
		h.mu.Unlock()
		close(out)
		return out
	}
	if fromRev <= 0 {
		fromRev = h.rev + 1
	}
	if fromRev <= h.compacted {
		compacted := h.compacted
		h.mu.Unlock()
		out <- store.WatchResponse{Err: fmt.Errorf("watch %q from revision %d (oldest available %d): %w",
			prefix, fromRev, compacted+1, store.ErrCompacted)}
		close(out)
		return out
	}
	w := &watcher{prefix: prefix, from: fromRev, wake: make(chan struct{}, 1)}
	i := sort.Search(len(h.history), func(i int) bool { return h.history[i].KV.ModRevision >= fromRev })
	// The catch-up may exceed the buffer; only what piles up on top of it
	// counts as lag.
	w.limit = len(h.history) - i + h.buffer
	h.enqueue(w, h.history[i:])
	h.watchers[w] = struct{}{}
	h.mu.Unlock()
	go h.serve(ctx, w, out)
	return out
}

// serve delivers w's queue to out until the watch ends.
func (h *hub) serve(ctx context.Context, w *watcher, out chan<- store.WatchResponse) {
	defer close(out)
	defer h.remove(w)
	send := func(resp store.WatchResponse) bool {
		select {
		case out <- resp:
			return true
		case <-ctx.Done():
		case <-h.done:
		}
		return false
	}
	for {
		select {
		case <-w.wake:
		case <-ctx.Done():
			return
		case <-h.done:
			return
		}
		h.mu.Lock()
		evs, lagged := w.pending, w.lagged
		w.pending = nil
		w.limit = h.buffer
		h.mu.Unlock()
		if len(evs) > 0 && !send(store.WatchResponse{Events: evs}) {
			return
		}
		if lagged {
			send(store.WatchResponse{Err: fmt.Errorf("watch %q: %w", w.prefix, store.ErrWatchLagged)})
			return
		}
	}
}
