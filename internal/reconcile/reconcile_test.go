package reconcile

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/corral/corral/internal/metrics"
)

func TestRegisterRejects(t *testing.T) {
	r := New(nil)
	run := func(context.Context) (int, error) { return 0, nil }
	for _, rc := range []Reconciler{
		{Interval: time.Second, Run: run},
		{Name: "a", Interval: -time.Second, Run: run},
		{Name: "a", Interval: time.Second},
	} {
		if err := r.Register(rc); err == nil {
			t.Errorf("Register(%+v) accepted", rc)
		}
	}
	if err := r.Register(Reconciler{Name: "a", Interval: time.Second, Run: run}); err != nil {
		t.Fatal(err)
	}
	if err := r.Register(Reconciler{Name: "a", Interval: time.Second, Run: run}); err == nil {
		t.Error("a second reconciler named a was accepted")
	}
}

// Each reconciler ticks on its own interval: the fast one runs again and
// again while the hourly one has not run at all.
func TestEachReconcilerHasItsOwnInterval(t *testing.T) {
	r := New(nil)
	fast := make(chan struct{}, 16)
	var slowRuns atomic.Int32
	must(t, r.Register(Reconciler{Name: "fast", Interval: time.Millisecond, Run: func(context.Context) (int, error) {
		select {
		case fast <- struct{}{}:
		default:
		}
		return 1, nil
	}}))
	must(t, r.Register(Reconciler{Name: "slow", Interval: time.Hour, Run: func(context.Context) (int, error) {
		slowRuns.Add(1)
		return 0, nil
	}}))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { r.Run(ctx); close(done) }()
	for range 3 {
		<-fast
	}
	cancel()
	<-done // Run returns once its reconcilers stopped
	st, _ := r.Stats("fast")
	if st.Runs < 3 || st.JobsSubmitted != st.Runs {
		t.Errorf("fast: %+v, want >= 3 runs each submitting one job", st)
	}
	if n := slowRuns.Load(); n != 0 {
		t.Errorf("the hourly reconciler ran %d times", n)
	}
	if err := r.Register(Reconciler{Name: "late", Interval: time.Second, Run: func(context.Context) (int, error) { return 0, nil }}); err == nil {
		t.Error("Register after Run accepted")
	}
}

// A reconciler without an interval runs only when asked: Run does not
// tick it, and returns only once ctx ends even when no reconciler ticks.
func TestNoIntervalRunsOnlyWhenAsked(t *testing.T) {
	r := New(nil)
	var runs atomic.Int32
	must(t, r.Register(Reconciler{Name: "manual", Run: func(context.Context) (int, error) { runs.Add(1); return 0, nil }}))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { r.Run(ctx); close(done) }()
	if ran, err := r.RunOnce(ctx, "manual"); err != nil || !ran {
		t.Fatalf("RunOnce = %v, %v", ran, err)
	}
	select {
	case <-done:
		t.Fatal("Run returned before its context ended")
	case <-time.After(20 * time.Millisecond):
	}
	cancel()
	<-done
	if n := runs.Load(); n != 1 {
		t.Errorf("%d rounds, want the 1 asked for", n)
	}
}

// List reports each reconciler's interval and counters, with the start of
// its last round.
func TestList(t *testing.T) {
	r := New(nil)
	must(t, r.Register(Reconciler{Name: "b", Interval: time.Minute, Run: func(context.Context) (int, error) { return 2, nil }}))
	must(t, r.Register(Reconciler{Name: "a", Run: func(context.Context) (int, error) { return 0, errors.New("down") }}))
	before := time.Now()
	for _, n := range []string{"a", "b", "b"} {
		if _, err := r.RunOnce(context.Background(), n); err != nil {
			t.Fatal(err)
		}
	}
	l := r.List()
	if len(l) != 2 || l[0].Name != "a" || l[1].Name != "b" {
		t.Fatalf("List() = %+v, want a then b", l)
	}
	if l[0].Interval != 0 || l[0].Runs != 1 || l[0].Errors != 1 || l[0].LastError != "down" {
		t.Errorf("a: %+v", l[0])
	}
	if l[1].Interval != time.Minute || l[1].Runs != 2 || l[1].JobsSubmitted != 4 || l[1].LastRun.Before(before) {
		t.Errorf("b: %+v", l[1])
	}
}

func TestPauseSkipsRounds(t *testing.T) {
	r := New(nil)
	var pausedFlag atomic.Bool
	pausedFlag.Store(true)
	var runs atomic.Int32
	must(t, r.Register(Reconciler{Name: "w", Interval: time.Minute,
		Paused: func(time.Time) bool { return pausedFlag.Load() },
		Run:    func(context.Context) (int, error) { runs.Add(1); return 0, nil }}))
	ctx := context.Background()
	for range 2 {
		if ran, err := r.RunOnce(ctx, "w"); err != nil || ran {
			t.Fatalf("RunOnce while paused = %v, %v", ran, err)
		}
	}
	pausedFlag.Store(false)
	if ran, err := r.RunOnce(ctx, "w"); err != nil || !ran {
		t.Fatalf("RunOnce after the pause = %v, %v", ran, err)
	}
	st, _ := r.Stats("w")
	if runs.Load() != 1 || st.Runs != 1 || st.PausedRounds != 2 {
		t.Errorf("runs %d, stats %+v; want 1 run and 2 paused rounds", runs.Load(), st)
	}
	if _, err := r.RunOnce(ctx, "nosuch"); err == nil {
		t.Error("RunOnce of an unknown reconciler succeeded")
	}
}

func TestMetrics(t *testing.T) {
	reg := metrics.NewRegistry()
	r := New(reg)
	fail := true
	must(t, r.Register(Reconciler{Name: "restart", Interval: time.Minute, Run: func(context.Context) (int, error) {
		time.Sleep(time.Millisecond)
		if fail {
			return 1, errors.New("queue drained")
		}
		return 2, nil
	}}))
	must(t, r.Register(Reconciler{Name: "idle", Interval: time.Minute, Paused: func(time.Time) bool { return true },
		Run: func(context.Context) (int, error) { return 0, nil }}))
	ctx := context.Background()
	_, _ = r.RunOnce(ctx, "restart")
	fail = false
	_, _ = r.RunOnce(ctx, "restart")
	_, _ = r.RunOnce(ctx, "idle")
	st, _ := r.Stats("restart")
	if st.Runs != 2 || st.Errors != 1 || st.JobsSubmitted != 3 || st.LastError != "queue drained" || st.LastDuration < time.Millisecond {
		t.Errorf("stats %+v", st)
	}
	var b strings.Builder
	if err := reg.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	text := b.String()
	for _, want := range []string{
		`corral_reconciler_runs_total{reconciler="restart"} 2`,
		`corral_reconciler_errors_total{reconciler="restart"} 1`,
		`corral_reconciler_jobs_submitted_total{reconciler="restart"} 3`,
		`corral_reconciler_paused_rounds_total{reconciler="idle"} 1`,
		`corral_reconciler_runs_total{reconciler="idle"} 0`,
		`corral_reconciler_last_run_seconds{reconciler="restart"} `,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("exposition lacks %q:\n%s", want, text)
		}
	}
	if _, err := metrics.ParseText(text); err != nil {
		t.Errorf("exposition does not parse: %v", err)
	}
}

// Rounds of one reconciler never overlap, even when RunOnce meets a tick.
func TestRoundsDoNotOverlap(t *testing.T) {
	r := New(nil)
	var inside, overlaps atomic.Int32
	must(t, r.Register(Reconciler{Name: "x", Interval: time.Millisecond, Run: func(context.Context) (int, error) {
		if inside.Add(1) > 1 {
			overlaps.Add(1)
		}
		time.Sleep(100 * time.Microsecond)
		inside.Add(-1)
		return 0, nil
	}}))
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); r.Run(ctx) }()
	for range 50 {
		_, _ = r.RunOnce(ctx, "x")
	}
	cancel()
	wg.Wait()
	if n := overlaps.Load(); n != 0 {
		t.Errorf("%d overlapping rounds", n)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
