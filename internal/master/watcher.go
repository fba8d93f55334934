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
	d     *Daemon
	mu    sync.Mutex
	tries map[string]int // instance uuid -> restart attempts
	given map[string]bool
}

func newWatcher(d *Daemon) *watcher {
	return &watcher{d: d, tries: map[string]int{}, given: map[string]bool{}}
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
	live := d.gatherInstances(ctx, d.cfg.Nodes())
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, inst := range d.cfg.Instances() {
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
		d.log.Info("watcher: restarting instance", "instance", inst.Name, "job", id, "try", w.tries[inst.UUID])
	}
	if n, _, err := d.queue.AutoArchive(ctx, archiveAge, 30*time.Second); err != nil {
		d.log.Warn("watcher: auto-archive failed", "err", err)
	} else if n > 0 {
		d.log.Info("watcher: archived old jobs", "count", n)
	}
}
