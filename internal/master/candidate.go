package master

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strings"
	"time"

	"github.com/corral/corral/internal/ecode"
	"github.com/corral/corral/internal/election"
	"github.com/corral/corral/internal/jobqueue"
	"github.com/corral/corral/internal/luxi"
	"github.com/corral/corral/internal/store"
	"github.com/corral/corral/internal/storecfg"
)

// resignTimeout bounds the resignation of a master that is shutting down:
// past it the lease simply expires.
const resignTimeout = 3 * time.Second

// replyGrace is how long a master that resigned on request keeps its LUXI
// connections open, so the MasterFailover reply reaches the client before
// the socket closes.
const replyGrace = 500 * time.Millisecond

// leaderPoll is how often a standby re-reads who leads, for its log.
const leaderPoll = time.Second

// ErrTermEnded is what a master's term ends with (resigned, handed over,
// or deposed); the candidate then stands by again in the same process.
var ErrTermEnded = errors.New("the master term ended")

// elected reports whether the cluster's store is one the candidates elect
// a master on (etcd); a bbolt cluster has a single master and no election.
func elected(opts Options) (bool, error) {
	cfg, err := storecfg.Load(opts.StateDir)
	if err != nil {
		return false, err
	}
	return cfg.Backend == storecfg.BackendEtcd, nil
}

// Backoff between two rounds of a candidate: a round that failed or a
// term that ended quickly waits longer, up to the maximum, so a persistent
// fault does not spin; a term that lasted resets it.
const (
	candidateBackoffMin = 500 * time.Millisecond
	candidateBackoffMax = 10 * time.Second
)

// runCandidate is Run for an elected master: stand by until this
// candidate wins, serve as master until the term ends, and stand by
// again, until ctx ends. A candidate never exits on its own: a failed
// takeover, a lost term, a store that cannot be reached are all
// transient for the cluster, and a candidate that exited would leave
// fewer to take over. Only a configuration error found before the first
// round ends it.
func runCandidate(ctx context.Context, opts Options) error {
	opts = opts.withDefaults()
	log := opts.Logger
	name := opts.CandidateName
	if name == "" {
		var err error
		if name, err = os.Hostname(); err != nil {
			return fmt.Errorf("candidate name: %w", err)
		}
	}
	addr, err := candidateAddress(opts)
	if err != nil {
		return err
	}
	if opts.ForwardAddress != "" {
		if _, _, err := forwardTLS(opts.StateDir); err != nil {
			return err
		}
	}
	backoff := candidateBackoffMin
	for {
		start := time.Now()
		err := candidateRound(ctx, opts, name, addr)
		if ctx.Err() != nil {
			return nil
		}
		if time.Since(start) > time.Minute {
			backoff = candidateBackoffMin
		}
		log.Error("standing by again", "candidate", name, "err", err, "after", backoff)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, candidateBackoffMax)
	}
}

// candidateRound opens the store, stands by until this candidate wins,
// and serves as master until the term ends. It returns nil only when ctx
// ended; otherwise why the round ended (ErrTermEnded for a term).
func candidateRound(ctx context.Context, opts Options, name, addr string) error {
	log := opts.Logger
	raw, err := openStore(ctx, opts)
	if err != nil {
		return err
	}
	owned := true
	defer func() {
		if owned {
			raw.Close()
		}
	}()
	cand, err := election.New(election.Config{Store: raw, Name: name, Address: addr, TTL: opts.ElectionTTL,
		Reclaim: opts.ElectionReclaim, Logger: log})
	if err != nil {
		return err
	}
	term, err := standBy(ctx, opts, raw, cand, name)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	log.Info("elected master", "candidate", name, "token", term.Token)

	// Everything the master does ends with the term: life is cancelled when
	// the term ends, when a fenced write reports the term lost, or when ctx
	// ends (a signal).
	life, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	unwatch := context.AfterFunc(term.Context(), func() { stop(context.Cause(term.Context())) })
	defer unwatch()
	alarm := &fenceAlarm{Store: election.Fenced(raw, term), trip: stop}

	d, err := openOn(ctx, opts, alarm, term)
	if err != nil {
		resign(term, log)
		return fmt.Errorf("taking over as master: %w", err)
	}
	owned = false
	defer d.Close()
	if h, ok := raw.(store.HealthReporter); ok {
		d.proc.StoreHealth = h.Health
	}
	d.proc.Etcd = etcdMembership(opts, raw, d)
	serr := d.Serve(life)
	if ctx.Err() != nil && term.Err() == nil {
		// Shut down on purpose: let a standby take over at once instead
		// of after the lease's TTL.
		d.queue.Stop()
		resign(term, log)
		return nil
	}
	cause := context.Cause(life)
	if cause == nil {
		cause = serr
	}
	if term.Err() == nil {
		// Serving failed while the term holds: give it up at once, so
		// another candidate need not wait for the lease to expire.
		d.queue.Stop()
		resign(term, log)
	}
	log.Error("master term ended: standing by again", "cause", cause, "token", term.Token)
	return fmt.Errorf("%w (token %d): %w", ErrTermEnded, term.Token, cause)
}

func resign(term *election.Term, log *slog.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), resignTimeout)
	defer cancel()
	if err := term.Resign(ctx); err != nil {
		log.Warn("resigning the master term", "err", err)
	}
}

// standBy campaigns while serving the LUXI socket: with forwarding, each
// connection is relayed to the current master; without it, or with no
// master to reach, calls are answered with an error naming the master. It
// returns the term once this candidate (named self) has won.
func standBy(ctx context.Context, opts Options, st store.Store, cand *election.Candidate, self string) (*election.Term, error) {
	sctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var divert func(context.Context, net.Conn) bool
	if opts.ForwardAddress != "" {
		fw, err := newForwarder(opts, st, self)
		if err != nil {
			return nil, err
		}
		divert = fw.divert
	}
	lo := opts.luxiOptions()
	lo.Path, lo.Mode, lo.Group, lo.Divert = opts.SocketPath, 0o660, opts.SocketGroup, divert
	if divert != nil {
		lo.DescriptorsPerConn = 2 // the client's and the relay's to the master
	}
	srv := luxi.NewServer(standbyHandler{st: st}, lo)
	served := make(chan struct{})
	go func() {
		defer close(served)
		if err := srv.Serve(sctx); err != nil {
			cancel(fmt.Errorf("standby LUXI socket: %w", err))
		}
	}()
	// The socket must be free for the master's server before Serve runs.
	defer func() { cancel(nil); <-served }()
	go logLeader(sctx, st, opts.Logger)
	term, err := cand.Campaign(sctx)
	if err != nil {
		if c := context.Cause(sctx); c != nil && ctx.Err() == nil && !errors.Is(c, context.Canceled) {
			return nil, c
		}
		return nil, err
	}
	return term, nil
}

// logLeader logs who leads whenever that changes, until ctx ends.
func logLeader(ctx context.Context, st store.Store, log *slog.Logger) {
	last := "\x00"
	t := time.NewTicker(leaderPoll)
	defer t.Stop()
	for {
		l, err := election.CurrentLeader(ctx, st, "")
		now := ""
		switch {
		case err == nil:
			now = l.Name + " at " + l.Address
		case errors.Is(err, election.ErrNoLeader):
			now = "none elected"
		}
		if err == nil || errors.Is(err, election.ErrNoLeader) {
			if now != last {
				log.Info("standby: master is "+now, "token", l.Token)
				last = now
			}
		} else if ctx.Err() == nil {
			log.Warn("standby: cannot read who the master is", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// standbyHandler answers every LUXI call of a standby with an error naming
// the master, so the CLI tells the operator where to go.
type standbyHandler struct{ st store.Store }

func (h standbyHandler) Call(ctx context.Context, method string, _ []json.RawMessage) (any, error) {
	return nil, standbyError(ctx, h.st)
}

func standbyError(ctx context.Context, st store.Store) *ecode.Error {
	l, err := election.CurrentLeader(ctx, st, "")
	switch {
	case err == nil:
		return ecode.Errorf(ecode.State, "this corrald is a standby; the master is %s at %s", l.Name, l.Address)
	case errors.Is(err, election.ErrNoLeader):
		return ecode.Errorf(ecode.State, "this corrald is a standby; no master is elected at the moment, retry shortly")
	}
	return ecode.Errorf(ecode.Environ, "this corrald is a standby and cannot read who the master is: %v", err)
}

// fenceAlarm ends the master's life as soon as a write reports the term
// lost, even before the term's own timers notice.
type fenceAlarm struct {
	store.Store
	trip context.CancelCauseFunc
}

func (f *fenceAlarm) Txn(ctx context.Context, cmps []store.Cmp, then, els []store.Op) (store.TxnResult, error) {
	res, err := f.Store.Txn(ctx, cmps, then, els)
	if errors.Is(err, election.ErrFenced) {
		f.trip(err)
	}
	return res, err
}

// termRunner runs ops under the term as well as the queue's context, so no
// op (nor its node RPCs) outlives the master's term.
type termRunner struct {
	jobqueue.OpRunner
	term *election.Term
}

func (r termRunner) RunOp(ctx context.Context, h *jobqueue.OpHandle) (any, error) {
	ctx, cancel := withTerm(ctx, r.term)
	defer cancel()
	return r.OpRunner.RunOp(ctx, h)
}

// withTerm derives from ctx a context that also ends with the term (nil:
// no election, ctx unchanged).
func withTerm(ctx context.Context, term *election.Term) (context.Context, context.CancelFunc) {
	if term == nil {
		return context.WithCancel(ctx)
	}
	ctx, cancel := context.WithCancelCause(ctx)
	stop := context.AfterFunc(term.Context(), func() { cancel(context.Cause(term.Context())) })
	return ctx, func() { stop(); cancel(nil) }
}

// failover ends this master's term on request: the queue stops first, so
// running ops keep their last committed step for the next master, then
// the term is handed to the named candidate (or resigned when to is "").
func (d *Daemon) failover(ctx context.Context, to string) (string, error) {
	if d.term == nil {
		return "", ecode.Errorf(ecode.State, "this cluster has a single master (its store is not on etcd): there is no other master candidate to fail over to")
	}
	if err := d.term.Err(); err != nil {
		return "", ecode.Errorf(ecode.State, "this master's term is already over: %v", err)
	}
	// Refuse what Handover would refuse before stopping anything: a
	// refused request must leave the master as it was.
	if to == d.term.Name {
		return "", ecode.Errorf(ecode.Inval, "%s is already the master", to)
	}
	if strings.IndexFunc(to, func(r rune) bool { return r < 0x20 || r == 0x7f }) >= 0 || len(to) > 255 {
		return "", ecode.Errorf(ecode.Inval, "invalid candidate name %q", to)
	}
	d.log.Info("master failover requested", "to", to)
	d.queue.Stop()
	if to == "" {
		if err := d.term.Resign(ctx); err != nil {
			return "", fmt.Errorf("resigning: %w", err)
		}
		return fmt.Sprintf("%s resigned; a master candidate takes over", d.term.Name), nil
	}
	if err := d.term.Handover(ctx, to); err != nil {
		return "", fmt.Errorf("handing over to %s: %w", to, err)
	}
	return fmt.Sprintf("%s handed the master role over to %s", d.term.Name, to), nil
}
