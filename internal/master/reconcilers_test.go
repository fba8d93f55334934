package master

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/corral/corral/internal/cmdlib"
	"github.com/corral/corral/internal/confdb"
	"github.com/corral/corral/internal/config"
	"github.com/corral/corral/internal/jobqueue"
	"github.com/corral/corral/internal/metrics"
	"github.com/corral/corral/internal/reconcile"
)

// reconcilerDaemon is a Daemon with a configuration, a job queue whose
// ops run runOp, and its reconcilers, without node RPC: tests keep to
// rounds that call no node.
func reconcilerDaemon(t *testing.T, opts Options, runOp func(context.Context) error) *Daemon {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testWait)
	defer cancel()
	st := testStore(t)
	cfg, err := confdb.Bootstrap(ctx, st, &config.Cluster{Meta: config.Meta{Name: "c1"}, ClusterName: "c1"},
		&config.NodeGroup{Meta: config.Meta{Name: "default"}}, &config.Node{Meta: config.Meta{Name: "n1"}})
	if err != nil {
		t.Fatal(err)
	}
	d := &Daemon{cfg: cfg, st: st, log: slog.New(slog.NewTextHandler(io.Discard, nil)), opts: opts}
	d.metrics = newDaemonMetrics(func() *jobqueue.Queue { return d.queue })
	q, err := jobqueue.New(jobqueue.Options{Store: st, Runner: runnerFunc(runOp)})
	if err != nil {
		t.Fatal(err)
	}
	if err := q.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(q.Stop)
	d.queue = q
	if d.reconcilers, err = d.newReconcilers(); err != nil {
		t.Fatal(err)
	}
	return d
}

func succeed(context.Context) error { return nil }

// TestWatcherPauseHoldsEveryReconciler: what the single watcher loop did
// is now separate reconcilers, and SetWatcherPause still holds all of
// them, as it held the loop; each shows in corrald's metrics.
func TestWatcherPauseHoldsEveryReconciler(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), testWait)
	defer cancel()
	d := reconcilerDaemon(t, Options{WatcherInterval: time.Minute}, succeed)
	r := d.reconcilers
	want := []string{reconcilerInstanceRestart, reconcilerJobArchive, reconcilerJoinTokenPrune, reconcilerLeftDisks, reconcilerImportSweep, reconcilerPowerSync, reconcilerAutoFailover,
		reconcilerCOEHealth, reconcilerCOEAutoheal, reconcilerCOEAutoscale}
	if got := r.Names(); !slices.Equal(got, ReconcilerNames()) || len(got) != len(want) {
		t.Fatalf("reconcilers %v, ReconcilerNames %v, want %v", got, ReconcilerNames(), want)
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
	for _, s := range d.reconcilerStates(time.Now()) {
		if !s.WatcherPaused || s.PausedUntil != nil {
			t.Errorf("%s: watcher paused %v, own pause %v; want only the watcher's", s.Name, s.WatcherPaused, s.PausedUntil)
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

// TestOwnPauseHoldsOneReconciler: a reconciler's own pause holds it and
// no other, is kept in the cluster configuration (a master opened on the
// same store sees it), and a pause for a while ends by itself.
func TestOwnPauseHoldsOneReconciler(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), testWait)
	defer cancel()
	d := reconcilerDaemon(t, Options{WatcherInterval: time.Minute}, succeed)
	now := time.Now()
	forever := float64(reconcile.UntilResumed)
	if _, err := d.setReconcilerPause(ctx, reconcilerJoinTokenPrune, &forever, now); err != nil {
		t.Fatal(err)
	}
	if ran, _ := d.reconcilers.RunOnce(ctx, reconcilerJoinTokenPrune); ran {
		t.Error("join-token-prune ran while paused")
	}
	if ran, _ := d.reconcilers.RunOnce(ctx, reconcilerJobArchive); !ran {
		t.Error("job-archive did not run while only join-token-prune is paused")
	}
	cfg, err := confdb.Open(ctx, d.st, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, paused := reconcile.Pauses(cfg.Cluster().ReconcilerPauses).PausedUntil(reconcilerJoinTokenPrune, now); !paused {
		t.Errorf("the configuration as read again holds no pause: %v", cfg.Cluster().ReconcilerPauses)
	}
	soon := float64(now.Add(time.Hour).Unix())
	if _, err := d.setReconcilerPause(ctx, reconcilerJobArchive, &soon, now); err != nil {
		t.Fatal(err)
	}
	states := map[string]*float64{}
	for _, s := range d.reconcilerStates(now) {
		states[s.Name] = s.PausedUntil
	}
	if p := states[reconcilerJoinTokenPrune]; p == nil || *p != 0 {
		t.Errorf("join-token-prune paused until %v, want 0 (until resumed)", p)
	}
	if p := states[reconcilerJobArchive]; p == nil || *p != soon {
		t.Errorf("job-archive paused until %v, want %v", p, soon)
	}
	if _, paused := reconcile.Pauses(d.cfg.Cluster().ReconcilerPauses).PausedUntil(reconcilerJoinTokenPrune, now.Add(1000*time.Hour)); !paused {
		t.Error("a pause until resumed ended by itself")
	}
	if _, err := d.setReconcilerPause(ctx, reconcilerJoinTokenPrune, nil, now); err != nil {
		t.Fatal(err)
	}
	if ran, _ := d.reconcilers.RunOnce(ctx, reconcilerJoinTokenPrune); !ran {
		t.Error("join-token-prune did not run once resumed")
	}
	for _, bad := range []struct {
		name  string
		until float64
		want  string
	}{{"nosuch", 0, "Unknown reconciler 'nosuch'; the reconcilers are: "}, {reconcilerJobArchive, -1, "A pause must end"}} {
		if _, err := d.setReconcilerPause(ctx, bad.name, &bad.until, now); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("pause %s until %v: %v, want %q", bad.name, bad.until, err, bad.want)
		}
	}
}

// TestReconcilerIntervals: a reconciler's own interval replaces the
// watcher's for it alone, --watcher-interval 0 leaves the others without
// one, and an unknown name is refused, listing the reconcilers.
func TestReconcilerIntervals(t *testing.T) {
	d := reconcilerDaemon(t, Options{WatcherInterval: -1, ReconcilerIntervals: map[string]time.Duration{reconcilerLeftDisks: 5 * time.Second}}, succeed)
	for _, in := range d.reconcilers.List() {
		want := time.Duration(0)
		if in.Name == reconcilerLeftDisks {
			want = 5 * time.Second
		}
		if in.Interval != want {
			t.Errorf("%s: interval %v, want %v", in.Name, in.Interval, want)
		}
	}
	d.opts.ReconcilerIntervals = map[string]time.Duration{"left-disks": time.Second}
	if _, err := d.newReconcilers(); err == nil || !strings.Contains(err.Error(), `no reconciler is named "left-disks"; the reconcilers are: coe-autoheal, coe-autoscale, coe-health, instance-restart, job-archive,`) {
		t.Errorf("unknown reconciler: %v", err)
	}
}

// TestLeftDiskRemovalSubmitsOneJob: the left-disk-removal reconciler
// submits no job while there is nothing to remove, one job marked with
// its name in the reason trail when there is, and no second one while
// that job has not finished. An offline node's disks wait, recorded in
// its status, without a job.
func TestLeftDiskRemovalSubmitsOneJob(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), testWait)
	defer cancel()
	release := make(chan struct{})
	d := reconcilerDaemon(t, Options{WatcherInterval: time.Minute}, func(ctx context.Context) error {
		select {
		case <-release:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	})
	jobs := func() int {
		st, _ := d.reconcilers.Stats(reconcilerLeftDisks)
		return int(st.JobsSubmitted)
	}
	round := func() {
		t.Helper()
		if ran, err := d.reconcilers.RunOnce(ctx, reconcilerLeftDisks); err != nil || !ran {
			t.Fatalf("round: ran %v, %v", ran, err)
		}
	}
	round()
	if n := jobs(); n != 0 {
		t.Fatalf("%d jobs with no disk left", n)
	}

	// An offline node's disk: recorded in its status, no job.
	n1, _ := d.cfg.Node("n1")
	n1.Offline = true
	tx := d.cfg.Begin()
	tx.PutNode(n1)
	tx.AddDiskRemoval(confdb.DiskRemoval{NodeUUID: n1.UUID, InstanceUUID: "i1", InstanceName: "gone1", DiskUUID: "d1"})
	if err := d.cfg.Commit(ctx, tx); err != nil {
		t.Fatal(err)
	}
	round()
	if n := jobs(); n != 0 {
		t.Fatalf("%d jobs for a disk on an offline node", n)
	}
	if c, ok := d.cfg.NodeStatus("n1").Condition(cmdlib.CondDisksLeft); !ok || c.Reason != cmdlib.ReasonNodeOffline {
		t.Fatalf("n1's DisksLeft: %+v, %v; want NodeOffline", c, ok)
	}

	// A disk of a node that left the cluster: its record is dropped by a job.
	tx = d.cfg.Begin()
	tx.AddDiskRemoval(confdb.DiskRemoval{NodeUUID: "departed", InstanceUUID: "i2", InstanceName: "gone2", DiskUUID: "d2"})
	if err := d.cfg.Commit(ctx, tx); err != nil {
		t.Fatal(err)
	}
	round()
	round() // the job has not finished: no second one
	if n := jobs(); n != 1 {
		t.Fatalf("%d jobs, want 1", n)
	}
	rows, err := d.queue.Query(ctx, nil, []string{"id", "ops"})
	if err != nil || len(rows) != 1 {
		t.Fatalf("jobs in the queue: %v, %v", rows, err)
	}
	b, _ := json.Marshal(rows[0][1])
	if !strings.Contains(string(b), `"OP_ID":"OP_CLUSTER_REMOVE_LEFT_DISKS"`) || !strings.Contains(string(b), `"reason":[["reconciler:left-disk-removal",`) {
		t.Errorf("the job's ops: %s", b)
	}
	close(release)
	waitJobDone(t, d, rows[0][0])
	round() // the record is still there (the fake runner did not drop it): a new job
	if n := jobs(); n != 2 {
		t.Fatalf("%d jobs after the first finished, want 2", n)
	}
}

func waitJobDone(t *testing.T, d *Daemon, id any) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testWait)
	defer cancel()
	for {
		var jid int64
		switch v := id.(type) {
		case int64:
			jid = v
		case float64:
			jid = int64(v)
		}
		if done, _ := d.jobDone(ctx, jid); done {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("job %v did not finish", id)
		case <-time.After(10 * time.Millisecond):
		}
	}
}
