package master

import (
	"context"
	"encoding/json"
	"sync"
	"time"

	"github.com/corral/corral/internal/config"
	"github.com/corral/corral/internal/query"
)

// Watcher limits, as Ganeti's watcher.
const (
	maxRestartTries = 5
	archiveAge      = 6 * time.Hour
)

// watcher restarts instances that should run but do not, and archives old
// jobs. It runs inside corrald on the master only.
type watcher struct {
	d       *Daemon
	mu      sync.Mutex
	tries   map[string]int   // instance uuid -> restart attempts
	given   map[string]bool  // instance uuid -> gave up (reported once)
	pending map[string]int64 // instance uuid -> restart job not yet finished
}

func newWatcher(d *Daemon) *watcher {
	return &watcher{d: d, tries: map[string]int{}, given: map[string]bool{}, pending: map[string]int64{}}
}

// jobDone reports whether a job has finished (or is unknown).
func (w *watcher) jobDone(ctx context.Context, id int64) bool {
	rows, err := w.d.queue.Query(ctx, []int64{id}, []string{"status"})
	if err != nil || len(rows) == 0 || rows[0] == nil {
		return true
	}
	switch rows[0][0] {
	case "success", "error", "canceled":
		return true
	}
	return false
}

func (w *watcher) run(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			w.once(ctx)
		}
	}
}

// Paused reports whether SetWatcherPause holds the watcher.
func paused(c *config.Cluster, now time.Time) bool {
	return c.WatcherPauseUntil > float64(now.Unix())
}

func (w *watcher) once(ctx context.Context) {
	d := w.d
	if paused(d.cfg.Cluster(), time.Now()) {
		d.log.Debug("watcher paused")
		return
	}
	d.pruneTokens(ctx)
	d.sweepImports(ctx)
	d.removeLeftDisks(ctx)
	live := d.gatherInstances(ctx, d.cfg.Nodes())
	w.mu.Lock()
	defer w.mu.Unlock()
	insts := d.cfg.Instances()
	known := map[string]bool{}
	for _, inst := range insts {
		known[inst.UUID] = true
	}
	for u := range w.tries {
		if !known[u] {
			delete(w.tries, u)
			delete(w.given, u)
			delete(w.pending, u)
		}
	}
	for _, inst := range insts {
		if id, ok := w.pending[inst.UUID]; ok {
			if !w.jobDone(ctx, id) {
				continue // its restart is still queued or running
			}
			delete(w.pending, inst.UUID)
		}
		if inst.AdminState != config.AdminUp {
			delete(w.tries, inst.UUID)
			delete(w.given, inst.UUID)
			continue
		}
		l, ok := live[inst.PrimaryNode]
		if !ok || l.state != query.RSNormal {
			continue // node offline or unreachable: nothing to decide
		}
		if _, running := l.byID[inst.UUID]; running {
			delete(w.tries, inst.UUID)
			delete(w.given, inst.UUID)
			continue
		}
		if w.tries[inst.UUID] >= maxRestartTries {
			if !w.given[inst.UUID] {
				w.given[inst.UUID] = true
				d.log.Error("watcher: instance does not stay up, giving up", "instance", inst.Name, "tries", maxRestartTries)
			}
			continue
		}
		w.tries[inst.UUID]++
		op, _ := json.Marshal(map[string]any{"OP_ID": "OP_INSTANCE_STARTUP", "instance_name": inst.Name,
			"reason": []any{[]any{"watcher", "restart of an instance that should run", time.Now().Unix()}}})
		id, err := d.queue.Submit(ctx, []json.RawMessage{op})
		if err != nil {
			d.log.Warn("watcher: cannot submit restart", "instance", inst.Name, "err", err)
			continue
		}
		w.pending[inst.UUID] = id
		d.log.Info("watcher: restarting instance", "instance", inst.Name, "job", id, "try", w.tries[inst.UUID])
	}
	if n, _, err := d.queue.AutoArchive(ctx, archiveAge, 30*time.Second); err != nil {
		d.log.Warn("watcher: auto-archive failed", "err", err)
	} else if n > 0 {
		d.log.Info("watcher: archived old jobs", "count", n)
	}
}
