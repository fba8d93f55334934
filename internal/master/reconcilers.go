package master

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/corral/corral/internal/metrics"
	"github.com/corral/corral/internal/reconcile"
)

// Names of corrald's reconcilers, as the metrics' reconciler label, the
// --reconciler-interval flag and `corral cluster reconciler` name them.
const (
	reconcilerInstanceRestart = "instance-restart"
	reconcilerJobArchive      = "job-archive"
	reconcilerJoinTokenPrune  = "join-token-prune"
	reconcilerImportSweep     = "pending-import-sweep"
	reconcilerLeftDisks       = "left-disk-removal"
	reconcilerPowerSync       = "machine-power-sync"
	// reconcilerAutoFailover is in autofailover.go.
)

// ReconcilerNames lists corrald's reconcilers, sorted.
func ReconcilerNames() []string {
	return slices.Sorted(slices.Values([]string{reconcilerInstanceRestart, reconcilerJobArchive,
		reconcilerJoinTokenPrune, reconcilerImportSweep, reconcilerLeftDisks, reconcilerPowerSync, reconcilerAutoFailover,
		reconcilerCOEHealth, reconcilerCOEAutoheal, reconcilerCOEAutoscale}))
}

// newReconcilers registers what Ganeti's watcher does, and Corral's own
// housekeeping, as separate reconcilers. Each runs every
// Options.ReconcilerIntervals[name], else every Options.WatcherInterval;
// each obeys its own pause switch (SetReconcilerPause) and the watcher
// pause (SetWatcherPause), which holds them all as it held the single
// watcher loop they replace.
func (d *Daemon) newReconcilers() (*reconcile.Registry, error) {
	if err := reconcile.CheckNames("--reconciler-interval", slices.Collect(maps.Keys(d.opts.ReconcilerIntervals)), ReconcilerNames()); err != nil {
		return nil, err
	}
	var reg *metrics.Registry
	if d.metrics != nil {
		reg = d.metrics.reg
	}
	r := reconcile.New(reg)
	w := newWatcher(d)
	all := []reconcile.Reconciler{
		{Name: reconcilerInstanceRestart, Run: w.restartInstances},
		{Name: reconcilerJobArchive, Run: d.archiveOldJobs},
		{Name: reconcilerJoinTokenPrune, Run: noJobs(d.pruneTokens)},
		{Name: reconcilerLeftDisks, Run: d.oneJob(reconcilerLeftDisks, "disks left by failed changes", d.planLeftDiskRemoval)},
		{Name: reconcilerPowerSync, Run: d.oneJob(reconcilerPowerSync, "bare-metal power states", d.planPowerSync)},
		{Name: reconcilerAutoFailover, Run: newAutoFailover(d).run},
		{Name: reconcilerCOEHealth, Run: d.perCOECluster(reconcilerCOEHealth, "COE cluster health changed", d.planCOEHealth)},
		{Name: reconcilerCOEAutoheal, Run: d.perCOECluster(reconcilerCOEAutoheal, "COE cluster nodes NotReady too long", d.planCOEAutoheal)},
		{Name: reconcilerCOEAutoscale, Run: d.perCOECluster(reconcilerCOEAutoscale, "COE cluster pods pending or nodes idle", newCOEAutoscaler(d).plan)},
	}
	if d.opts.PendingImportTimeout >= 0 {
		all = append(all, reconcile.Reconciler{Name: reconcilerImportSweep,
			Run: d.oneJob(reconcilerImportSweep, "imports that received nothing", d.planImportSweep)})
	} else if _, set := d.opts.ReconcilerIntervals[reconcilerImportSweep]; set {
		d.log.Warn("an interval is set for the pending-import-sweep reconciler, which --pending-import-timeout 0 disables")
	}
	for _, rc := range all {
		rc.Interval, rc.Paused = d.reconcilerInterval(rc.Name), d.reconcilerPaused(rc.Name)
		if err := r.Register(rc); err != nil {
			return nil, fmt.Errorf("registering the reconcilers: %w", err)
		}
	}
	return r, nil
}

// reconcilerInterval is how often the named reconciler runs: its own
// interval when set, else the watcher's; 0 never (--watcher-interval 0).
func (d *Daemon) reconcilerInterval(name string) time.Duration {
	if every, ok := d.opts.ReconcilerIntervals[name]; ok {
		return every
	}
	return max(d.opts.WatcherInterval, 0)
}

// reconcilerPaused is the named reconciler's pause switch: the watcher
// pause, or its own, both kept in the cluster configuration so that they
// survive a restart or a failover of the master.
func (d *Daemon) reconcilerPaused(name string) func(time.Time) bool {
	return func(now time.Time) bool {
		c := d.cfg.Cluster()
		if paused(c, now) {
			return true
		}
		_, own := reconcile.Pauses(c.ReconcilerPauses).PausedUntil(name, now)
		return own
	}
}

// noJobs adapts a round that submits no job.
func noJobs(round func(context.Context) error) func(context.Context) (int, error) {
	return func(ctx context.Context) (int, error) { return 0, round(ctx) }
}

// oneJob adapts a round that hands its work to one job: plan reads the
// configuration and what the nodes report, and returns the op to submit,
// or nil when there is nothing to do, so that an idle cluster gets no job.
// While the job of an earlier round is still queued or running, and while
// the queue is drained, a round submits nothing; a failed job is the next
// round's error, and that round plans again.
func (d *Daemon) oneJob(name, why string, plan func(context.Context) (map[string]any, error)) func(context.Context) (int, error) {
	var last int64 // the last job submitted; rounds of one reconciler never overlap
	return func(ctx context.Context) (int, error) {
		var failed error
		if last != 0 {
			done, failure := d.jobDone(ctx, last)
			if !done {
				return 0, nil
			}
			if failure != "" {
				failed = fmt.Errorf("job %d failed: %s", last, failure)
			}
			last = 0
		}
		if d.queue.Drained() {
			return 0, failed
		}
		op, err := plan(ctx)
		if err != nil || op == nil {
			return 0, errors.Join(failed, err)
		}
		id, err := d.submitReconcilerJob(ctx, name, why, op)
		if err != nil {
			return 0, errors.Join(failed, fmt.Errorf("submitting %s: %w", op["OP_ID"], err))
		}
		last = id
		d.log.Info("watcher: submitted a job", "reconciler", name, "job", id, "opcode", op["OP_ID"])
		return 1, failed
	}
}

// ReasonSource is the source of the reason trail entry that marks the
// jobs the named reconciler submits, as Ganeti's watcher marks its own
// with "gnt:watcher".
func ReasonSource(reconciler string) string { return "reconciler:" + reconciler }

// submitReconcilerJob submits op as a one-op job of the named reconciler,
// with a reason trail saying so and why.
func (d *Daemon) submitReconcilerJob(ctx context.Context, name, why string, op map[string]any) (int64, error) {
	op["reason"] = []any{[]any{ReasonSource(name), why, time.Now().UnixNano()}}
	raw, err := json.Marshal(op)
	if err != nil {
		return 0, fmt.Errorf("encoding the job of reconciler %s: %w", name, err)
	}
	return d.queue.Submit(ctx, []json.RawMessage{raw})
}

// archiveOldJobs is the job-archive reconciler: it archives the jobs
// finished more than archiveAge ago, as Ganeti's watcher does.
func (d *Daemon) archiveOldJobs(ctx context.Context) (int, error) {
	n, _, err := d.queue.AutoArchive(ctx, archiveAge, 30*time.Second)
	if err != nil {
		d.log.Warn("watcher: auto-archive failed", "err", err)
		return 0, fmt.Errorf("archiving old jobs: %w", err)
	}
	if n > 0 {
		d.log.Info("watcher: archived old jobs", "count", n)
	}
	return 0, nil
}
