// Package reconcile runs corrald's periodic reconcilers: each compares the
// configuration with what it observes and submits jobs to close the gap,
// on its own interval, unless its pause switch holds it. The registry
// counts every reconciler's runs, errors, jobs submitted and rounds
// skipped while paused, and times its last run, for corrald's metrics.
package reconcile

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/corral/corral/internal/metrics"
)

// Reconciler is one periodic reconciler.
type Reconciler struct {
	// Name identifies it to an operator: in logs and in the metrics'
	// reconciler label.
	Name string
	// Interval is the time between the starts of two runs; 0 runs it only
	// when asked (RunOnce), never on a timer.
	Interval time.Duration
	// Paused is its pause switch: while it reports true for the current
	// time, a due run is skipped (nil: never paused).
	Paused func(now time.Time) bool
	// Run is one round. It returns how many jobs it submitted and why the
	// round failed, if it did; a failed round is retried at the next tick.
	Run func(ctx context.Context) (submitted int, err error)
}

// Stats are a reconciler's counters since the registry was made.
type Stats struct {
	Runs          uint64        // rounds run (paused rounds excluded)
	Errors        uint64        // rounds that returned an error
	JobsSubmitted uint64        // jobs its rounds submitted
	PausedRounds  uint64        // due rounds skipped because it was paused
	LastRun       time.Time     // when the last round started (zero: none yet)
	LastDuration  time.Duration // how long the last round took
	LastError     string        // the last failed round's error ("" if none yet)
}

type entry struct {
	rc    Reconciler
	mu    sync.Mutex
	stats Stats
}

// Registry holds the registered reconcilers and runs them.
type Registry struct {
	mu      sync.Mutex
	entries map[string]*entry
	started bool

	runs, errs, jobs, paused *metrics.CounterVec
	lastSecs                 *metrics.GaugeVec
}

// New makes an empty registry. With a non-nil reg its counters are also
// exposed as corral_reconciler_* metrics labelled by reconciler.
func New(reg *metrics.Registry) *Registry {
	r := &Registry{entries: map[string]*entry{}}
	if reg != nil {
		r.runs = reg.Counter("corral_reconciler_runs_total", "Rounds run by each periodic reconciler of corrald.", "reconciler")
		r.errs = reg.Counter("corral_reconciler_errors_total", "Rounds of each reconciler that failed.", "reconciler")
		r.jobs = reg.Counter("corral_reconciler_jobs_submitted_total", "Jobs submitted by each reconciler.", "reconciler")
		r.paused = reg.Counter("corral_reconciler_paused_rounds_total", "Due rounds of each reconciler skipped because its pause switch held it.", "reconciler")
		r.lastSecs = reg.Gauge("corral_reconciler_last_run_seconds", "How long each reconciler's last round took.", "reconciler")
	}
	return r
}

// Register adds rc. Names are unique, the interval not negative and Run
// set; reconcilers cannot be added once Run has started.
func (r *Registry) Register(rc Reconciler) error {
	switch {
	case rc.Name == "":
		return fmt.Errorf("a reconciler needs a name")
	case rc.Interval < 0:
		return fmt.Errorf("reconciler %s: interval %v is negative", rc.Name, rc.Interval)
	case rc.Run == nil:
		return fmt.Errorf("reconciler %s: no run function", rc.Name)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.started {
		return fmt.Errorf("reconciler %s: the registry already runs", rc.Name)
	}
	if _, dup := r.entries[rc.Name]; dup {
		return fmt.Errorf("reconciler %s is already registered", rc.Name)
	}
	r.entries[rc.Name] = &entry{rc: rc}
	if r.runs != nil {
		// Every series exists from the start, at zero.
		r.runs.With(rc.Name)
		r.errs.With(rc.Name)
		r.jobs.With(rc.Name)
		r.paused.With(rc.Name)
		r.lastSecs.With(rc.Name)
	}
	return nil
}

// Names are the registered reconcilers, sorted.
func (r *Registry) Names() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]string, 0, len(r.entries))
	for n := range r.entries {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Stats returns the named reconciler's counters.
func (r *Registry) Stats(name string) (Stats, bool) {
	r.mu.Lock()
	e, ok := r.entries[name]
	r.mu.Unlock()
	if !ok {
		return Stats{}, false
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.stats, true
}

// Info is what the registry knows of one reconciler: its name, interval
// and counters.
type Info struct {
	Name     string
	Interval time.Duration // 0: it runs only when asked
	Stats
}

// List describes every registered reconciler, sorted by name.
func (r *Registry) List() []Info {
	names := r.Names()
	out := make([]Info, 0, len(names))
	for _, name := range names {
		r.mu.Lock()
		e := r.entries[name]
		r.mu.Unlock()
		e.mu.Lock()
		out = append(out, Info{Name: name, Interval: e.rc.Interval, Stats: e.stats})
		e.mu.Unlock()
	}
	return out
}

// RunOnce runs one round of the named reconciler now, unless it is paused;
// it reports whether the round ran.
func (r *Registry) RunOnce(ctx context.Context, name string) (bool, error) {
	r.mu.Lock()
	e, ok := r.entries[name]
	r.mu.Unlock()
	if !ok {
		return false, fmt.Errorf("no reconciler %s", name)
	}
	return r.round(ctx, e), nil
}

// Run starts every registered reconciler that has an interval, each with
// its own ticker, and returns once ctx ends and every round under way has
// returned.
func (r *Registry) Run(ctx context.Context) {
	r.mu.Lock()
	r.started = true
	entries := make([]*entry, 0, len(r.entries))
	for _, e := range r.entries {
		if e.rc.Interval > 0 {
			entries = append(entries, e)
		}
	}
	r.mu.Unlock()
	var wg sync.WaitGroup
	for _, e := range entries {
		wg.Add(1)
		go func() {
			defer wg.Done()
			t := time.NewTicker(e.rc.Interval)
			defer t.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case <-t.C:
					r.round(ctx, e)
				}
			}
		}()
	}
	wg.Wait()
	<-ctx.Done() // also when no reconciler has an interval
}

// round runs e once unless paused, and records what happened. Rounds of
// one reconciler never overlap: its ticker goroutine and RunOnce share
// e.mu.
func (r *Registry) round(ctx context.Context, e *entry) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	name := e.rc.Name
	if e.rc.Paused != nil && e.rc.Paused(time.Now()) {
		e.stats.PausedRounds++
		if r.paused != nil {
			r.paused.With(name).Inc()
		}
		return false
	}
	start := time.Now()
	n, err := e.rc.Run(ctx)
	took := time.Since(start)
	e.stats.Runs++
	e.stats.LastRun, e.stats.LastDuration = start, took
	if n > 0 {
		e.stats.JobsSubmitted += uint64(n)
	}
	if err != nil {
		e.stats.Errors++
		e.stats.LastError = err.Error()
	}
	if r.runs != nil {
		r.runs.With(name).Inc()
		r.lastSecs.With(name).Set(took.Seconds())
		if n > 0 {
			r.jobs.With(name).Add(float64(n))
		}
		if err != nil {
			r.errs.With(name).Inc()
		}
	}
	return true
}
