package election

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/corral/corral/internal/store"
)

// Term is one candidate's time as leader. It ends once, for good: on
// Resign or Handover, or when leadership is lost. A new term needs a new
// Campaign.
//
// A Term made by hand (only Leader and Key set) never ends on its own; it
// is good for fencing with a known token (see Fenced).
type Term struct {
	Leader
	// Key is the election key the term holds.
	Key string

	c      *Candidate
	ctx    context.Context
	cancel context.CancelCauseFunc
	wg     sync.WaitGroup

	mu       sync.Mutex
	deadline time.Time // monotonic; no renewal by then means deposed
}

// newTerm starts the renewal and watch loops of a term won at revision
// rev, with the lease granted at sent.
func newTerm(c *Candidate, l Leader, sent time.Time, rev int64) *Term {
	ctx, cancel := context.WithCancelCause(context.Background())
	t := &Term{Leader: l, Key: c.key, c: c, ctx: ctx, cancel: cancel, deadline: c.deadlineFrom(sent)}
	t.wg.Add(2)
	go t.renew(sent)
	go t.watch(rev + 1)
	return t
}

// deadlineFrom is the local deadline after a grant or renewal sent at
// sent (see Config.Margin).
func (c *Candidate) deadlineFrom(sent time.Time) time.Time {
	return sent.Add(c.cfg.TTL - c.cfg.Margin)
}

// Done is closed when the term ends.
func (t *Term) Done() <-chan struct{} {
	if t.ctx == nil {
		return nil
	}
	return t.ctx.Done()
}

// Context is cancelled when the term ends, with Err as its cause. Work done
// on behalf of the leader (jobs, node RPCs) should run under it.
func (t *Term) Context() context.Context {
	if t.ctx == nil {
		return context.Background()
	}
	return t.ctx
}

// Err is nil while the term lasts, then why it ended: an error that
// matches ErrResigned or ErrDeposed. It reports a missed deadline even
// before Done is closed.
func (t *Term) Err() error {
	if t.ctx == nil {
		return nil
	}
	if t.ctx.Err() != nil {
		return context.Cause(t.ctx)
	}
	if d := t.Deadline(); !time.Now().Before(d) {
		return t.expired(d)
	}
	return nil
}

// Deadline is when the term ends unless the lease is renewed first. Calls
// made for the leader should not outlive it.
func (t *Term) Deadline() time.Time {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.deadline
}

func (t *Term) expired(d time.Time) error {
	return fmt.Errorf("%w: lease %d not renewed by the local deadline (%v)", ErrDeposed, t.Lease, d.Format(time.RFC3339Nano))
}

// end ends the term with cause (the first cause wins).
func (t *Term) end(cause error) {
	if t.ctx.Err() == nil {
		t.cancel(cause)
		if !errors.Is(cause, ErrResigned) {
			t.c.log.Warn("leadership lost", "token", t.Token, "reason", context.Cause(t.ctx))
		}
	}
}

type renewal struct {
	sent time.Time
	err  error
}

// renew renews the lease every RenewInterval, and ends the term when the
// store reports the lease gone or the local deadline passes. The renewal
// runs in its own goroutine so that a store that hangs cannot hold up the
// deadline.
func (t *Term) renew(sent time.Time) {
	defer t.wg.Done()
	cfg := &t.c.cfg
	deadline := time.NewTimer(time.Until(t.Deadline()))
	defer deadline.Stop()
	next := time.NewTimer(time.Until(sent.Add(cfg.RenewInterval)))
	defer next.Stop()
	results := make(chan renewal, 1)
	for {
		select {
		case <-t.ctx.Done():
			if !errors.Is(context.Cause(t.ctx), ErrResigned) {
				// Lets the next leader in sooner if the store can
				// still be reached; harmless if the key is another's.
				t.c.revokeQuietly(t.ctx, t.Lease)
			}
			return
		case <-deadline.C:
			t.end(t.expired(t.Deadline()))
		case <-next.C:
			t.wg.Add(1)
			go func() {
				defer t.wg.Done()
				r := renewal{sent: time.Now()}
				// One attempt may hang on a member that died or lost
				// its raft leader while the others could answer: give
				// it up after a renewal interval and try again, so
				// that two attempts fit before the deadline.
				ctx, cancel := context.WithDeadline(t.ctx, attemptDeadline(r.sent, cfg.RenewInterval, t.Deadline()))
				r.err = t.c.st.KeepAlive(ctx, t.Lease)
				cancel()
				results <- r
			}()
		case r := <-results:
			switch {
			case r.err == nil:
				d := t.c.deadlineFrom(r.sent)
				t.mu.Lock()
				if d.After(t.deadline) {
					t.deadline = d
				}
				t.mu.Unlock()
				deadline.Reset(time.Until(d))
				next.Reset(time.Until(r.sent.Add(cfg.RenewInterval)))
			case errors.Is(r.err, store.ErrNoLease):
				t.end(fmt.Errorf("%w: the store no longer knows lease %d", ErrDeposed, t.Lease))
			case errors.Is(r.err, store.ErrClosed):
				t.end(fmt.Errorf("%w: %w", ErrDeposed, r.err))
			default:
				if t.ctx.Err() == nil {
					t.c.log.Warn("lease renewal failed; retrying", "lease", t.Lease, "err", r.err,
						"deadline_in", time.Until(t.Deadline()).Round(time.Millisecond))
				}
				next.Reset(cfg.RenewInterval / 4)
			}
		}
	}
}

// attemptDeadline bounds one renewal attempt sent at sent: one renewal
// interval (at least a second) and never past the term's deadline.
func attemptDeadline(sent time.Time, interval time.Duration, deadline time.Time) time.Time {
	d := sent.Add(max(interval, time.Second))
	if deadline.Before(d) {
		return deadline
	}
	return d
}

// watch ends the term when the election key is deleted or taken by
// another. When the watch breaks it checks the key and watches again.
func (t *Term) watch(from int64) {
	defer t.wg.Done()
	backoff := retryFloor
	for t.ctx.Err() == nil {
		var lost error
		from, lost = t.follow(from)
		if lost != nil {
			t.end(lost)
			return
		}
		if t.ctx.Err() != nil {
			return
		}
		// The watch ended (compacted, lagged, store closed): look at the
		// key itself, then watch from that read.
		res, err := t.c.st.Txn(t.ctx, nil, []store.Op{store.Get(t.Key)}, nil)
		switch {
		case errors.Is(err, store.ErrClosed):
			t.end(fmt.Errorf("%w: %w", ErrDeposed, err))
			return
		case err != nil:
			if pause(t.ctx, backoff) != nil {
				return
			}
			backoff = min(2*backoff, t.c.retryMax)
			continue
		}
		backoff = retryFloor
		if len(res.Results) != 1 || len(res.Results[0]) == 0 {
			t.end(fmt.Errorf("%w: election key gone", ErrDeposed))
			return
		}
		if kv := res.Results[0][0]; kv.CreateRevision != t.Token {
			t.end(fmt.Errorf("%w: election key recreated at revision %d", ErrDeposed, kv.CreateRevision))
			return
		}
		from = res.Revision + 1
	}
}

// follow watches the election key from revision from until the watch
// ends, and returns where to resume, or why the term is lost.
func (t *Term) follow(from int64) (int64, error) {
	ctx, cancel := context.WithCancel(t.ctx)
	defer cancel()
	for resp := range t.c.st.Watch(ctx, t.Key, from) {
		if resp.Err != nil {
			return from, nil
		}
		for _, ev := range resp.Events {
			from = ev.KV.ModRevision + 1
			if ev.KV.Key != t.Key {
				continue
			}
			if ev.Type == store.EventDelete {
				return from, fmt.Errorf("%w: election key deleted at revision %d", ErrDeposed, ev.KV.ModRevision)
			}
			if ev.KV.CreateRevision != t.Token {
				return from, fmt.Errorf("%w: election key recreated at revision %d", ErrDeposed, ev.KV.CreateRevision)
			}
		}
	}
	return from, nil
}

// stop ends the term as resigned and waits for its loops.
func (t *Term) stop() {
	t.end(ErrResigned)
	t.wg.Wait()
}

// guard is the fencing compare: the election key still has the term's
// token.
func (t *Term) guard() store.Cmp {
	return store.Cmp{Key: t.Key, Target: store.CmpCreateRevision, Op: store.Equal, Rev: t.Token}
}

// Resign ends the term, then deletes the election key (if it still has the
// term's token) and revokes the lease, so that another candidate can win
// at once instead of after the TTL. The term is over when Resign returns,
// even with an error: the key then lingers until the lease expires.
func (t *Term) Resign(ctx context.Context) error {
	if t.c == nil {
		return errors.New("election: resign: not a campaigned term")
	}
	t.stop()
	// The term ended locally first, so a fenced write of ours cannot
	// commit once the key is gone and another leader may be elected.
	if _, err := t.c.st.Txn(ctx, []store.Cmp{t.guard()}, []store.Op{store.Delete(t.Key)}, nil); err != nil {
		return fmt.Errorf("election: resign: %w", err)
	}
	if err := t.c.st.Revoke(ctx, t.Lease); err != nil && !errors.Is(err, store.ErrNoLease) {
		return fmt.Errorf("election: resign: %w", err)
	}
	t.c.log.Info("resigned", "token", t.Token)
	return nil
}

// Handover ends the term like Resign, and names the candidate that should
// win next: the others defer to it until it has won or Config.HandoverTTL
// has passed (when it is down, say). It fails if the term was already lost.
func (t *Term) Handover(ctx context.Context, to string) error {
	if t.c == nil {
		return errors.New("election: handover: not a campaigned term")
	}
	if err := checkName("handover target", to, true); err != nil {
		return err
	}
	if to == t.Name {
		return fmt.Errorf("election: handover to %q: that is the leader itself", to)
	}
	value, err := json.Marshal(handover{To: to, From: t.Name})
	if err != nil {
		return fmt.Errorf("election: handover: %w", err)
	}
	lost := t.Err()
	t.stop()
	if lost != nil {
		return fmt.Errorf("election: handover: %w", lost)
	}
	c := t.c
	hlease, err := c.st.Grant(ctx, c.hoSecs)
	if err != nil {
		c.revokeQuietly(ctx, t.Lease)
		return fmt.Errorf("election: handover: %w", err)
	}
	res, err := c.st.Txn(ctx, []store.Cmp{t.guard()},
		[]store.Op{store.PutWithLease(c.hkey, value, hlease), store.Delete(t.Key)}, nil)
	if err != nil || !res.Succeeded {
		c.revokeQuietly(ctx, hlease)
		c.revokeQuietly(ctx, t.Lease)
		if err == nil {
			err = fmt.Errorf("%w: election key no longer has token %d", ErrDeposed, t.Token)
		}
		return fmt.Errorf("election: handover: %w", err)
	}
	if err := c.st.Revoke(ctx, t.Lease); err != nil && !errors.Is(err, store.ErrNoLease) {
		return fmt.Errorf("election: handover: %w", err)
	}
	c.log.Info("handed over", "token", t.Token, "to", to)
	return nil
}
