package master

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/corral/corral/internal/confdb"
	"github.com/corral/corral/internal/config"
	"github.com/corral/corral/internal/jobqueue"
	"github.com/corral/corral/internal/metrics"
)

// TestWatcherPauseHoldsEveryReconciler: what the single watcher loop did
// is now separate reconcilers, and SetWatcherPause still holds all of
// them, as it held the loop; each shows in corrald's metrics.
func TestWatcherPauseHoldsEveryReconciler(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), testWait)
	defer cancel()
	st := testStore(t)
	cfg, err := confdb.Bootstrap(ctx, st, &config.Cluster{Meta: config.Meta{Name: "c1"}, ClusterName: "c1"},
		&config.NodeGroup{Meta: config.Meta{Name: "default"}}, &config.Node{Meta: config.Meta{Name: "n1"}})
	if err != nil {
		t.Fatal(err)
	}
	d := &Daemon{cfg: cfg, st: st, log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		opts: Options{WatcherInterval: time.Minute}}
	d.metrics = newDaemonMetrics(func() *jobqueue.Queue { return d.queue })
	q, err := jobqueue.New(jobqueue.Options{Store: st, Runner: runnerFunc(func(context.Context) error { return nil })})
	if err != nil {
		t.Fatal(err)
	}
	if err := q.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(q.Stop)
	d.queue = q
	r, err := d.newReconcilers()
	if err != nil {
		t.Fatal(err)
	}
	want := []string{reconcilerInstanceRestart, reconcilerJobArchive, reconcilerJoinTokenPrune, reconcilerLeftDisks, reconcilerImportSweep}
	if got := r.Names(); len(got) != len(want) {
		t.Fatalf("reconcilers %v, want %v", got, want)
	}
	// Unpaused, the rounds that need no node run.
	for _, name := range []string{reconcilerJobArchive, reconcilerJoinTokenPrune} {
		if ran, err := r.RunOnce(ctx, name); err != nil || !ran {
			t.Fatalf("%s unpaused: ran %v, %v", name, ran, err)
		}
	}
	until := float64(time.Now().Add(time.Hour).Unix())
	if _, err := d.setWatcherPause(ctx, &until); err != nil {
		t.Fatal(err)
	}
	for _, name := range want {
		if ran, err := r.RunOnce(ctx, name); err != nil || ran {
			t.Errorf("%s under the watcher pause: ran %v, %v", name, ran, err)
		}
	}
	text, err := d.metrics.text()
	if err != nil {
		t.Fatal(err)
	}
	fams, err := metrics.ParseText(text)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range want {
		if n, _ := fams.Value("corral_reconciler_paused_rounds_total", "reconciler", name); n != 1 {
			t.Errorf("%s: %v paused rounds in the metrics, want 1", name, n)
		}
	}
	if n, _ := fams.Value("corral_reconciler_runs_total", "reconciler", reconcilerJobArchive); n != 1 {
		t.Errorf("job-archive: %v runs in the metrics, want 1", n)
	}
}
