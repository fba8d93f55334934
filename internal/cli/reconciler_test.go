package cli

import (
	"context"
	"testing"
)

func TestClusterReconciler(t *testing.T) {
	f := newFake(t)
	f.mu.Lock()
	f.handle["QueryReconcilers"] = func(context.Context, []any) (any, error) {
		return []any{
			map[string]any{"name": "instance-restart", "interval": 60.0, "paused_until": nil, "watcher_paused": false,
				"last_run": float64(fakeEpoch - 30), "runs": 12.0, "errors": 1.0, "jobs_submitted": 3.0},
			map[string]any{"name": "left-disk-removal", "interval": 5.0, "paused_until": 0.0, "watcher_paused": false,
				"last_run": nil, "runs": 0.0, "errors": 0.0, "jobs_submitted": 0.0},
			map[string]any{"name": "pending-import-sweep", "interval": 0.0, "paused_until": float64(fakeEpoch + 3600), "watcher_paused": true,
				"last_run": nil, "runs": 0.0, "errors": 0.0, "jobs_submitted": 0.0},
		}, nil
	}
	f.handle["SetReconcilerPause"] = func(context.Context, []any) (any, error) { return nil, nil }
	f.mu.Unlock()
	r := f.run(t, "cluster", "reconciler", "list")
	want := `Name                 Interval PausedUntil                   LastRun             Runs Errors Jobs
instance-restart     1m0s     -                             2023-11-14 22:12:50   12      1    3
left-disk-removal    5s       resumed                       -                      0      0    0
pending-import-sweep never    2023-11-14 23:13:20 (watcher) -                      0      0    0
`
	if r.code != 0 || r.stdout != want {
		t.Fatalf("list: %+v\nwant stdout:\n%s", r, want)
	}
	steps := []struct {
		args []string
		out  string
	}{
		{[]string{"cluster", "reconciler", "pause", "left-disk-removal"}, "Reconciler left-disk-removal is paused until resumed.\n"},
		{[]string{"cluster", "reconciler", "pause", "job-archive", "--for", "1h"}, "Reconciler job-archive is paused until 2023-11-14 23:13:20.\n"},
		{[]string{"cluster", "reconciler", "resume", "left-disk-removal"}, "Reconciler left-disk-removal is no longer paused.\n"},
	}
	for _, s := range steps {
		if r := f.run(t, s.args...); r.code != 0 || r.stdout != s.out {
			t.Fatalf("%q: %+v, want stdout %q", s.args, r, s.out)
		}
	}
	c := f.callsTo("SetReconcilerPause")
	if len(c) != 3 || !sameJSON(t, c[0].Args, `["left-disk-removal",0]`) || !sameJSON(t, c[1].Args, `["job-archive",1700003600]`) ||
		!sameJSON(t, c[2].Args, `["left-disk-removal",null]`) {
		t.Fatalf("SetReconcilerPause calls %v", c)
	}
	if r := f.run(t, "cluster", "reconciler", "pause", "job-archive", "--for", "soon"); r.code == 0 {
		t.Errorf("a bad duration was accepted: %+v", r)
	}
}
