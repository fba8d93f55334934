// Package election elects one master among the master candidates through
// the store, and fences the writes of a master that has lost the role.
//
// A candidate campaigns by creating the election key (DefaultKey) with a
// lease of its own. The store's transaction decides ties: the key is put
// only if it is missing, so exactly one candidate succeeds; the others watch
// the key and try again when it goes (the leader resigned, or its lease
// expired because it stopped renewing it).
//
// The winner holds a Term. The term's token is the key's CreateRevision:
// revisions only grow, so every term has a larger token than the one
// before, and a key deleted and created again never gets its old token
// back. Fenced wraps a store so that each write of the term commits only
// while the key still has that token; the token is also the master's epoch
// for node RPCs.
//
// A term ends when the leader resigns, when the store reports its lease or
// key gone, or when the leader could not renew its lease in time. The last
// is judged on the leader's own clock, so that a leader cut off from the
// store steps down before the store can elect another (see Config.Margin).
//
// A master daemon campaigns at start-up, and once elected runs everything
// that writes (queue, configuration) on Fenced(store, term) and under
// term.Context(); when Done closes it stops them, refuses further requests
// and campaigns again (or exits and restarts as a standby). Standbys name
// or reach the master with CurrentLeader.
package election

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"
	"unicode/utf8"

	"github.com/corral/corral/internal/store"
)

// DefaultKey is the election key. The handover key (see Term.Handover) is
// the election key plus HandoverSuffix.
const (
	DefaultKey     = "/election/master"
	HandoverSuffix = "/handover"
)

// Defaults of Config.
const (
	DefaultTTL = 5 * time.Second
	// maxNameLen bounds a candidate's name and address in the key's value.
	maxNameLen = 255
	// retryFloor and retryCeil bound the pause before a campaign retries
	// after a store error.
	retryFloor = 100 * time.Millisecond
	retryCeil  = 2 * time.Second
)

var (
	// ErrFenced is returned by a fenced store's write when the term it was
	// made for is over: nothing was applied.
	ErrFenced = errors.New("election: fenced: no longer the leader")
	// ErrDeposed is the reason a term ended without the leader giving it
	// up: lease or key gone, key taken by another, or no renewal in time.
	ErrDeposed = errors.New("election: leadership lost")
	// ErrResigned is the reason a term ended by Resign or Handover.
	ErrResigned = errors.New("election: resigned")
	// ErrNoLeader means nobody leads at the moment.
	ErrNoLeader = errors.New("election: no leader")
)

// Config describes one candidate. Store and Name are required.
type Config struct {
	Store store.Store
	// Key is the election key (default DefaultKey). All candidates of a
	// cluster use the same key.
	Key string
	// Name identifies the candidate (its node name); names must be unique
	// among the candidates.
	Name string
	// Address is where the candidate serves as master, published to the
	// others while it leads (e.g. for forwarding and for the CLI).
	Address string
	// TTL is the lease's time to live (default DefaultTTL), in whole
	// seconds as the store counts them; at least 1 s. etcd raises TTLs
	// below its minimum (2 s with default raft settings), which only makes
	// the server side wait longer.
	TTL time.Duration
	// RenewInterval is the pause between renewals (default TTL/3).
	RenewInterval time.Duration
	// Margin is how long before the earliest possible server-side expiry
	// of the lease the leader considers itself deposed when it could not
	// renew (default TTL/5, at most TTL/2).
	//
	// The store starts a lease's TTL when it receives the grant or renewal,
	// which is after the leader sent it; so the lease cannot expire before
	// send time + TTL, on the store's clock. The leader gives up at send
	// time + TTL - Margin on its own monotonic clock (wall-clock steps do
	// not move it). The margin covers the rate difference of the two
	// clocks (NTP keeps it under 500 ppm, 2.5 ms over 5 s) and the time
	// the leader needs to stop acting once its timer fires. It cannot
	// cover a leader process frozen for longer than the margin (a long GC
	// pause, SIGSTOP, a suspended VM): such a leader may wake up still
	// believing it leads. That is what Fenced and the node epochs are for;
	// the timer only makes a partitioned leader step down early.
	Margin time.Duration
	// HandoverTTL is how long the other candidates defer to the one named
	// by Handover before they campaign anyway (default TTL).
	HandoverTTL time.Duration
	// Reclaim lets a candidate take over a key held under its own name, by
	// an earlier run of itself that did not resign (a restarted daemon
	// need not wait for its old lease to expire). Only safe when no two
	// live processes share a name.
	Reclaim bool
	// Logger receives the election's messages; nil discards them.
	Logger *slog.Logger
}

// Leader describes who leads.
type Leader struct {
	Name    string
	Address string
	// Token is the election key's CreateRevision: it identifies the term
	// and grows from one term to the next.
	Token int64
	// Lease is the lease the key is attached to.
	Lease int64
}

// Candidate campaigns for one master candidate. Its methods are safe for
// concurrent use.
type Candidate struct {
	cfg      Config
	st       store.Store
	key      string
	hkey     string
	ttlSecs  int64
	hoSecs   int64
	log      *slog.Logger
	value    []byte // the election key's value while this candidate leads
	retryMax time.Duration
}

// New checks cfg and fills in its defaults.
func New(cfg Config) (*Candidate, error) {
	if cfg.Store == nil {
		return nil, errors.New("election: no store")
	}
	if err := checkName("name", cfg.Name, true); err != nil {
		return nil, err
	}
	if err := checkName("address", cfg.Address, false); err != nil {
		return nil, err
	}
	if cfg.Key == "" {
		cfg.Key = DefaultKey
	}
	if cfg.TTL == 0 {
		cfg.TTL = DefaultTTL
	}
	if cfg.TTL < time.Second {
		return nil, fmt.Errorf("election: TTL %v is under 1s", cfg.TTL)
	}
	if cfg.RenewInterval == 0 {
		cfg.RenewInterval = cfg.TTL / 3
	}
	if cfg.Margin == 0 {
		cfg.Margin = cfg.TTL / 5
	}
	if cfg.Margin < 0 || cfg.Margin > cfg.TTL/2 {
		return nil, fmt.Errorf("election: margin %v not within (0, TTL/2]", cfg.Margin)
	}
	// A renewal must be due well before the local deadline, or one slow
	// renewal would depose the leader.
	if cfg.RenewInterval <= 0 || cfg.RenewInterval > (cfg.TTL-cfg.Margin)/2 {
		return nil, fmt.Errorf("election: renew interval %v not within (0, (TTL-margin)/2]", cfg.RenewInterval)
	}
	if cfg.HandoverTTL == 0 {
		cfg.HandoverTTL = cfg.TTL
	}
	if cfg.HandoverTTL < time.Second {
		return nil, fmt.Errorf("election: handover TTL %v is under 1s", cfg.HandoverTTL)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	value, err := json.Marshal(record{Name: cfg.Name, Address: cfg.Address})
	if err != nil {
		return nil, fmt.Errorf("election: %w", err)
	}
	return &Candidate{
		cfg:      cfg,
		st:       cfg.Store,
		key:      cfg.Key,
		hkey:     cfg.Key + HandoverSuffix,
		ttlSecs:  ceilSeconds(cfg.TTL),
		hoSecs:   ceilSeconds(cfg.HandoverTTL),
		log:      cfg.Logger.With("election", cfg.Key, "candidate", cfg.Name),
		value:    value,
		retryMax: min(retryCeil, cfg.RenewInterval),
	}, nil
}

func ceilSeconds(d time.Duration) int64 { return int64((d + time.Second - 1) / time.Second) }

// Leader returns who leads now, or ErrNoLeader.
func (c *Candidate) Leader(ctx context.Context) (Leader, error) {
	return CurrentLeader(ctx, c.st, c.key)
}

// CurrentLeader reads the election key (DefaultKey when key is "") and
// returns who leads now, or ErrNoLeader. Standbys, the CLI and tests use
// it to name or reach the master.
func CurrentLeader(ctx context.Context, s store.Store, key string) (Leader, error) {
	if key == "" {
		key = DefaultKey
	}
	kv, err := s.Get(ctx, key)
	if err != nil {
		return Leader{}, fmt.Errorf("election: reading %s: %w", key, err)
	}
	if kv == nil {
		return Leader{}, ErrNoLeader
	}
	return leaderOf(kv)
}

func leaderOf(kv *store.KV) (Leader, error) {
	r, err := parseRecord(kv.Value)
	if err != nil {
		return Leader{}, fmt.Errorf("election: key %s: %w", kv.Key, err)
	}
	return Leader{Name: r.Name, Address: r.Address, Token: kv.CreateRevision, Lease: kv.Lease}, nil
}

// state is what a campaign read of the two keys found.
type state struct {
	rev      int64
	leader   *store.KV
	handover *store.KV
}

// read reads the election and handover keys at one revision.
func (c *Candidate) read(ctx context.Context) (state, error) {
	res, err := c.st.Txn(ctx, nil, []store.Op{store.Get(c.key), store.Get(c.hkey)}, nil)
	if err != nil {
		return state{}, err
	}
	st := state{rev: res.Revision}
	if len(res.Results) == 2 {
		if kvs := res.Results[0]; len(kvs) > 0 {
			st.leader = &kvs[0]
		}
		if kvs := res.Results[1]; len(kvs) > 0 {
			st.handover = &kvs[0]
		}
	}
	return st, nil
}

// Campaign blocks until the candidate leads, and returns its term. It
// retries store errors until ctx ends; only ctx's end, a closed store or a
// request the store rejects as invalid make it fail.
func (c *Candidate) Campaign(ctx context.Context) (*Term, error) {
	backoff := retryFloor
	for {
		t, err := c.round(ctx)
		if t != nil {
			return t, nil
		}
		if err == nil {
			backoff = retryFloor
			continue
		}
		if ctx.Err() != nil {
			return nil, fmt.Errorf("election: campaign: %w", ctx.Err())
		}
		// Neither a closed store nor a request it rejects will get better.
		if errors.Is(err, store.ErrClosed) || errors.Is(err, store.ErrInvalid) {
			return nil, fmt.Errorf("election: campaign: %w", err)
		}
		c.log.Warn("campaign: store error; retrying", "err", err, "in", backoff)
		if err := pause(ctx, backoff); err != nil {
			return nil, fmt.Errorf("election: campaign: %w", err)
		}
		backoff = min(2*backoff, c.retryMax)
	}
}

// round reads the keys and either tries to win, reclaims a key of its own,
// or waits for the keys to change. A nil term and nil error mean: look
// again.
func (c *Candidate) round(ctx context.Context) (*Term, error) {
	st, err := c.read(ctx)
	if err != nil {
		return nil, err
	}
	if st.leader != nil {
		if c.cfg.Reclaim && c.ownKey(st.leader) {
			return nil, c.reclaim(ctx, st.leader)
		}
		return nil, c.wait(ctx, st.rev)
	}
	if st.handover != nil {
		if h, err := parseHandover(st.handover.Value); err == nil && h.To != c.cfg.Name {
			return nil, c.wait(ctx, st.rev)
		}
		// Named, or a value nobody can follow: take it and remove it.
	}
	return c.try(ctx, st)
}

// ownKey reports whether the key was put under this candidate's name.
func (c *Candidate) ownKey(kv *store.KV) bool {
	r, err := parseRecord(kv.Value)
	return err == nil && r.Name == c.cfg.Name
}

// try grants a lease and puts the key if it is still missing and the
// handover key is as read. A lost race returns nil, nil.
func (c *Candidate) try(ctx context.Context, st state) (*Term, error) {
	// The lease's TTL starts when the store receives the grant, so the
	// local deadline counts from before the request left.
	sent := time.Now()
	lease, err := c.st.Grant(ctx, c.ttlSecs)
	if err != nil {
		return nil, err
	}
	cmps := []store.Cmp{store.Missing(c.key)}
	then := []store.Op{store.PutWithLease(c.key, c.value, lease)}
	if st.handover == nil {
		cmps = append(cmps, store.Missing(c.hkey))
	} else {
		cmps = append(cmps, store.ModRevisionIs(c.hkey, st.handover.ModRevision))
		then = append(then, store.Delete(c.hkey))
	}
	then = append(then, store.Get(c.key))
	res, err := c.st.Txn(ctx, cmps, then, nil)
	if err != nil || !res.Succeeded {
		// Also when the outcome is unknown: if the put did commit,
		// revoking deletes the key at once instead of after the TTL.
		c.revokeQuietly(ctx, lease)
		return nil, err
	}
	kvs := res.Results[len(res.Results)-1]
	if len(kvs) != 1 {
		c.revokeQuietly(ctx, lease)
		return nil, fmt.Errorf("election: key %s missing right after it was put", c.key)
	}
	t := newTerm(c, Leader{Name: c.cfg.Name, Address: c.cfg.Address, Token: kvs[0].CreateRevision, Lease: lease}, sent, res.Revision)
	c.log.Info("elected", "token", t.Token, "lease", lease, "deadline_in", time.Until(t.Deadline()).Round(time.Millisecond))
	return t, nil
}

// reclaim deletes a key held under this candidate's name by an earlier
// run, and its lease.
func (c *Candidate) reclaim(ctx context.Context, kv *store.KV) error {
	res, err := c.st.Txn(ctx, []store.Cmp{{Key: c.key, Target: store.CmpCreateRevision, Op: store.Equal, Rev: kv.CreateRevision}},
		[]store.Op{store.Delete(c.key)}, nil)
	if err != nil {
		return err
	}
	if res.Succeeded {
		c.log.Info("reclaimed the election key of an earlier run", "token", kv.CreateRevision, "lease", kv.Lease)
		if kv.Lease != 0 {
			c.revokeQuietly(ctx, kv.Lease)
		}
	}
	return nil
}

// wait returns when the election or handover key changes after rev.
func (c *Candidate) wait(ctx context.Context, rev int64) error {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for resp := range c.st.Watch(wctx, c.key, rev+1) {
		if resp.Err != nil {
			// Campaign backs off, reads again, and watches from there.
			return fmt.Errorf("watching %s: %w", c.key, resp.Err)
		}
		for _, ev := range resp.Events {
			if ev.KV.Key == c.key || ev.KV.Key == c.hkey {
				return nil
			}
		}
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return store.ErrClosed
}

// revokeQuietly revokes a lease on a best-effort basis, even when ctx has
// ended, bounded by one TTL.
func (c *Candidate) revokeQuietly(ctx context.Context, lease int64) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.cfg.TTL)
	defer cancel()
	if err := c.st.Revoke(rctx, lease); err != nil && !errors.Is(err, store.ErrNoLease) {
		c.log.Debug("revoking a lease failed; it will expire", "lease", lease, "err", err)
	}
}

// pause waits d or until ctx ends. It is the backoff between retries of a
// failed store call.
func pause(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// record is the election key's value.
type record struct {
	Name    string `json:"name"`
	Address string `json:"address,omitempty"`
}

// handover is the handover key's value.
type handover struct {
	To   string `json:"to"`
	From string `json:"from,omitempty"`
}

// parseRecord decodes and checks the election key's value.
func parseRecord(b []byte) (record, error) {
	var r record
	if err := json.Unmarshal(b, &r); err != nil {
		return record{}, fmt.Errorf("leader record: %w", err)
	}
	if err := checkName("name", r.Name, true); err != nil {
		return record{}, err
	}
	if err := checkName("address", r.Address, false); err != nil {
		return record{}, err
	}
	return r, nil
}

// parseHandover decodes and checks the handover key's value.
func parseHandover(b []byte) (handover, error) {
	var h handover
	if err := json.Unmarshal(b, &h); err != nil {
		return handover{}, fmt.Errorf("handover record: %w", err)
	}
	if err := checkName("handover target", h.To, true); err != nil {
		return handover{}, err
	}
	if err := checkName("handover source", h.From, false); err != nil {
		return handover{}, err
	}
	return h, nil
}

// checkName accepts printable UTF-8 up to maxNameLen bytes: the values end
// up in log lines and error messages shown to operators.
func checkName(what, s string, required bool) error {
	if s == "" {
		if required {
			return fmt.Errorf("election: empty %s", what)
		}
		return nil
	}
	if len(s) > maxNameLen {
		return fmt.Errorf("election: %s longer than %d bytes", what, maxNameLen)
	}
	if !utf8.ValidString(s) {
		return fmt.Errorf("election: %s is not UTF-8", what)
	}
	for _, r := range s {
		if r < 0x20 || r == 0x7f {
			return fmt.Errorf("election: %s %q has control characters", what, s)
		}
	}
	return nil
}
