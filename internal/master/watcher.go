package master

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/corral/corral/internal/cmdlib"
	"github.com/corral/corral/internal/config"
	"github.com/corral/corral/internal/ecode"
	"github.com/corral/corral/internal/query"
)

// Watcher limits, as Ganeti's watcher.
const (
	maxRestartTries = 5
	archiveAge      = 6 * time.Hour
)

// watcher restarts instances that should run but do not: the
// instance-restart reconciler (reconcilers.go). It runs inside corrald on
// the master only.
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

// jobDone reports whether a job has finished (or is unknown), and the
// error it failed with ("" if none).
func (d *Daemon) jobDone(ctx context.Context, id int64) (bool, string) {
	rows, err := d.queue.Query(ctx, []int64{id}, []string{"status", "opresult"})
	if err != nil || len(rows) == 0 || rows[0] == nil {
		return true, ""
	}
	switch rows[0][0] {
	case "success", "canceled":
		return true, ""
	case "error":
		return true, jobFailure(rows[0][1])
	}
	return false, ""
}

// jobFailure is the message of the error a job's first opcode failed with.
func jobFailure(opresult any) string {
	b, err := json.Marshal(opresult)
	var results []any
	if err != nil || json.Unmarshal(b, &results) != nil || len(results) == 0 {
		return "failed"
	}
	return ecode.Decode(results[0]).Msg
}

// Paused reports whether SetWatcherPause holds the watcher.
func paused(c *config.Cluster, now time.Time) bool {
	return c.WatcherPauseUntil > float64(now.Unix())
}

// restartInstances is the instance-restart reconciler: it submits a
// startup job for each instance that should run but does not, up to
// maxRestartTries times, and records what it did in the instance's status.
// It returns how many jobs it submitted and the submissions that failed.
func (w *watcher) restartInstances(ctx context.Context) (int, error) {
	return w.restartInstancesSeen(ctx, w.d.gatherInstances(ctx, w.d.cfg.Nodes()))
}

// restartInstancesSeen is restartInstances on what the nodes answered:
// live maps a node's uuid to the instances it runs.
func (w *watcher) restartInstancesSeen(ctx context.Context, live map[string]*instanceLive) (int, error) {
	d := w.d
	submitted := 0
	var failed []error
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
			done, failure := d.jobDone(ctx, id)
			if !done {
				continue // its restart is still queued or running
			}
			delete(w.pending, inst.UUID)
			if failure != "" {
				d.updateInstanceStatus(ctx, inst, func(s *config.Status, _ time.Time) {
					s.LastError = fmt.Sprintf("restart job %d: %s", id, failure)
				})
			}
		}
		if cmdlib.InRescue(d.cfg.InstanceStatus(inst.UUID)) {
			// Rescued, or on its way in or out: a restart would start its
			// own system and quietly end the rescue. Its rescue and
			// unrescue jobs own it.
			delete(w.tries, inst.UUID)
			delete(w.given, inst.UUID)
			continue
		}
		if inst.AdminState != config.AdminUp {
			delete(w.tries, inst.UUID)
			delete(w.given, inst.UUID)
			d.updateInstanceStatus(ctx, inst, notWantedStatus)
			continue
		}
		l, ok := live[inst.PrimaryNode]
		if !ok || l.state != query.RSNormal {
			continue // node offline or unreachable: nothing to decide
		}
		if _, running := l.byID[inst.UUID]; running {
			delete(w.tries, inst.UUID)
			delete(w.given, inst.UUID)
			d.updateInstanceStatus(ctx, inst, runningStatus(inst))
			continue
		}
		if w.tries[inst.UUID] >= maxRestartTries {
			if !w.given[inst.UUID] {
				w.given[inst.UUID] = true
				d.log.Error("watcher: instance does not stay up, giving up", "instance", inst.Name, "tries", maxRestartTries)
				d.updateInstanceStatus(ctx, inst, gaveUpStatus(inst))
			}
			continue
		}
		w.tries[inst.UUID]++
		id, err := d.submitReconcilerJob(ctx, reconcilerInstanceRestart, "restart of an instance that should run",
			map[string]any{"OP_ID": "OP_INSTANCE_STARTUP", "instance_name": inst.Name})
		if err != nil {
			d.log.Warn("watcher: cannot submit restart", "instance", inst.Name, "err", err)
			d.updateInstanceStatus(ctx, inst, notSubmittedStatus(inst, err))
			failed = append(failed, fmt.Errorf("restart of %s: %w", inst.Name, err))
			continue
		}
		submitted++
		w.pending[inst.UUID] = id
		d.log.Info("watcher: restarting instance", "instance", inst.Name, "job", id, "try", w.tries[inst.UUID])
		d.updateInstanceStatus(ctx, inst, restartingStatus(inst, w.tries[inst.UUID], id))
	}
	return submitted, errors.Join(failed...)
}
