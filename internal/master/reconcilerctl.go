package master

import (
	"context"
	"encoding/json"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/corral/corral/internal/ecode"
	"github.com/corral/corral/internal/luxi"
	"github.com/corral/corral/internal/reconcile"
)

// The reconcilers' own pause switches and their state, for the Corral-only
// LUXI methods QueryReconcilers and SetReconcilerPause (`corral cluster
// reconciler`).

// luxiQueryReconcilers answers QueryReconcilers: [].
func (h *luxiHandler) luxiQueryReconcilers(ctx context.Context, args []json.RawMessage) (any, error) {
	return h.d.reconcilerStates(time.Now()), nil
}

// luxiSetReconcilerPause answers SetReconcilerPause: [name, until].
func (h *luxiHandler) luxiSetReconcilerPause(ctx context.Context, args []json.RawMessage) (any, error) {
	name, err := arg[string](args, 0, "reconciler name")
	if err != nil {
		return nil, err
	}
	until, err := optArg[*float64](args, 1, nil)
	if err != nil {
		return nil, err
	}
	return h.d.setReconcilerPause(ctx, name, until, time.Now())
}

// reconcilerStates describes every registered reconciler at now.
func (d *Daemon) reconcilerStates(now time.Time) []luxi.ReconcilerState {
	c := d.cfg.Cluster()
	pauses := reconcile.Pauses(c.ReconcilerPauses)
	var out []luxi.ReconcilerState
	for _, in := range d.reconcilers.List() {
		s := luxi.ReconcilerState{Name: in.Name, Interval: in.Interval.Seconds(), WatcherPaused: paused(c, now),
			LastDuration: in.LastDuration.Seconds(), Runs: in.Runs, Errors: in.Errors, LastError: in.LastError,
			JobsSubmitted: in.JobsSubmitted, PausedRounds: in.PausedRounds}
		if until, ok := pauses.PausedUntil(in.Name, now); ok {
			s.PausedUntil = &until
		}
		if !in.LastRun.IsZero() {
			t := float64(in.LastRun.UnixNano()) / 1e9
			s.LastRun = &t
		}
		out = append(out, s)
	}
	return out
}

// setReconcilerPause pauses the named reconciler until the Unix time until
// (reconcile.UntilResumed: until resumed), or resumes it when until is
// nil. The switch is in the cluster configuration, so a restarted or new
// master keeps it.
func (d *Daemon) setReconcilerPause(ctx context.Context, name string, until *float64, now time.Time) (any, error) {
	names := d.reconcilers.Names()
	if !slices.Contains(names, name) {
		return nil, ecode.Errorf(ecode.NoEnt, "Unknown reconciler '%s'; the reconcilers are: %s", name, strings.Join(names, ", "))
	}
	if until != nil && (*until < 0 || math.IsNaN(*until) || math.IsInf(*until, 0)) {
		return nil, ecode.Errorf(ecode.Inval, "A pause must end at a Unix time, or be 0 to last until resumed, not %v", *until)
	}
	c := d.cfg.Cluster()
	pauses := reconcile.Pauses(c.ReconcilerPauses)
	if until == nil {
		pauses = pauses.Without(name, now)
	} else {
		pauses = pauses.With(name, *until, now)
	}
	c.ReconcilerPauses = pauses
	tx := d.cfg.Begin()
	tx.PutCluster(c)
	if err := d.cfg.Commit(ctx, tx); err != nil {
		return nil, err
	}
	if until == nil {
		d.log.Info("reconciler resumed", "reconciler", name)
		return nil, nil
	}
	d.log.Info("reconciler paused", "reconciler", name, "until", *until)
	return *until, nil
}
