package master

import (
	"context"
	"fmt"
	"time"

	"github.com/corral/corral/internal/metrics"
	"github.com/corral/corral/internal/reconcile"
)

// Names of corrald's reconcilers, as the metrics' reconciler label shows
// them.
const (
	reconcilerInstanceRestart = "instance-restart"
	reconcilerJobArchive      = "job-archive"
	reconcilerJoinTokenPrune  = "join-token-prune"
	reconcilerImportSweep     = "pending-import-sweep"
	reconcilerLeftDisks       = "left-disk-removal"
)

// newReconcilers registers what Ganeti's watcher does, and Corral's own
// housekeeping, as separate reconcilers. They all run every
// Options.WatcherInterval and all obey the watcher pause (SetWatcherPause),
// as the single watcher loop they replace did.
func (d *Daemon) newReconcilers() (*reconcile.Registry, error) {
	var reg *metrics.Registry
	if d.metrics != nil {
		reg = d.metrics.reg
	}
	r := reconcile.New(reg)
	every := d.opts.WatcherInterval
	if every <= 0 {
		every = time.Minute // never run (Serve checks), but registrable
	}
	watcherPaused := func(now time.Time) bool { return paused(d.cfg.Cluster(), now) }
	w := newWatcher(d)
	all := []reconcile.Reconciler{
		{Name: reconcilerInstanceRestart, Run: w.restartInstances},
		{Name: reconcilerJobArchive, Run: d.archiveOldJobs},
		{Name: reconcilerJoinTokenPrune, Run: noJobs(d.pruneTokens)},
		{Name: reconcilerLeftDisks, Run: noJobs(d.removeLeftDisks)},
	}
	if d.opts.PendingImportTimeout >= 0 {
		all = append(all, reconcile.Reconciler{Name: reconcilerImportSweep, Run: noJobs(d.sweepImports)})
	}
	for _, rc := range all {
		rc.Interval, rc.Paused = every, watcherPaused
		if err := r.Register(rc); err != nil {
			return nil, fmt.Errorf("registering the reconcilers: %w", err)
		}
	}
	return r, nil
}

// noJobs adapts a round that submits no job.
func noJobs(round func(context.Context) error) func(context.Context) (int, error) {
	return func(ctx context.Context) (int, error) { return 0, round(ctx) }
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
