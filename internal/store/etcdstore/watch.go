package etcdstore

import (
	"context"
	"errors"
	"fmt"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/corral/corral/internal/store"
)

// Watch implements store.Store on an etcd watch of the prefix's range.
//
// A watch "from now" first reads the current revision and watches from the
// one after it: etcd registers a watch asynchronously, and a write made
// right after Watch returns must not be missed.
//
// When the member serving the watch goes away, the client resumes it on
// another member from the revision after the last event delivered, so no
// event is lost or repeated. The watch does not insist on the member having
// a leader: it goes quiet during an election rather than ending.
func (s *Store) Watch(ctx context.Context, prefix string, fromRev int64) <-chan store.WatchResponse {
	out := make(chan store.WatchResponse, 1)
	if s.check(ctx) != nil {
		close(out)
		return out
	}
	if fromRev <= 0 {
		rev, err := s.Revision(ctx)
		if err != nil {
			if ctx.Err() == nil && !errors.Is(err, store.ErrClosed) {
				out <- store.WatchResponse{Err: fmt.Errorf("watch %q: %w", prefix, err)}
			}
			close(out)
			return out
		}
		fromRev = rev + 1
	}
	s.mu.Lock()
	if s.closed.Load() {
		s.mu.Unlock()
		close(out)
		return out
	}
	s.watches.Add(1)
	s.mu.Unlock()
	// The etcd watch ends with the caller's context or with the store.
	wctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(s.ctx, cancel)
	key, end := s.span(prefix)
	wch := s.cli.Watch(wctx, key, clientv3.WithRange(end), clientv3.WithRev(fromRev))
	go func() {
		defer s.watches.Done()
		defer close(out)
		defer stop()
		defer cancel()
		s.serveWatch(wctx, prefix, fromRev, wch, out)
	}()
	return out
}

// serveWatch converts etcd's responses until the watch ends.
func (s *Store) serveWatch(ctx context.Context, prefix string, fromRev int64, wch clientv3.WatchChan, out chan<- store.WatchResponse) {
	send := func(resp store.WatchResponse) bool {
		select {
		case out <- resp:
			return true
		case <-ctx.Done():
			return false
		}
	}
	for {
		var (
			resp clientv3.WatchResponse
			ok   bool
		)
		select {
		case resp, ok = <-wch:
		case <-ctx.Done():
			return
		}
		if !ok || ctx.Err() != nil {
			return
		}
		if err := resp.Err(); err != nil {
			if resp.CompactRevision != 0 {
				err = fmt.Errorf("from revision %d (oldest available %d): %w (etcd: %w)",
					fromRev, resp.CompactRevision, store.ErrCompacted, err)
			} else {
				err = s.mapErr(err)
			}
			send(store.WatchResponse{Err: fmt.Errorf("watch %q: %w", prefix, err)})
			return
		}
		if len(resp.Events) == 0 {
			continue // creation or progress notice
		}
		evs := make([]store.Event, len(resp.Events))
		for i, e := range resp.Events {
			if e.Type == mvccpb.DELETE {
				evs[i] = store.Event{Type: store.EventDelete, KV: store.KV{
					Key: string(e.Kv.Key[len(s.prefix):]), ModRevision: e.Kv.ModRevision}}
			} else {
				evs[i] = store.Event{Type: store.EventPut, KV: s.fromKV(e.Kv)}
			}
		}
		if !send(store.WatchResponse{Events: evs}) {
			return
		}
	}
}
