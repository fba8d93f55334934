package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"
)

// eventDelay is an OP_TEST_DELAY that takes the BGL (shared) and waits
// suspended for event for at most secs seconds.
func eventDelay(secs float64, event string) map[string]any {
	return map[string]any{"OP_ID": "OP_TEST_DELAY", "duration": secs, "no_locks": false, "wake_event": event}
}

// queueStats is the part of corrald's QueryStats answer this test reads.
type queueStats struct {
	Executing, Suspended int
}

// TestCrashStepWaitsForJobEnd suspends an op on the end of another job
// (its job-ended event, job/<id>/ended), kills corrald while that job
// runs, and checks that the job's end, after the restart, wakes the op; an
// op that suspends on the end of the job once it has ended is woken at
// once instead of waiting for its deadline.
func TestCrashStepWaitsForJobEnd(t *testing.T) {
	c := newCluster(t, clusterOpts{nodes: 1, hypervisors: []string{"fake"}, watcher: time.Hour})
	child := c.submitOne(map[string]any{"OP_ID": "OP_TEST_DELAY", "duration": 8})
	ended := fmt.Sprintf("job/%d/ended", child)
	parent := c.submitOne(eventDelay(600, ended))
	waitFor(t, 30*time.Second, "the op to suspend on "+ended, func() bool {
		var st queueStats
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		return c.luxi.Call(ctx, "QueryStats", nil, &st) == nil && st.Suspended == 1
	})
	c.killCorrald()
	c.restartCorrald()
	if status, res := c.waitJob(child, time.Minute); status != "success" {
		t.Fatalf("job %d ended %s: %s", child, status, toJSON(res))
	}
	if status, res := c.waitJob(parent, time.Minute); status != "success" {
		t.Fatalf("job %d ended %s: %s", parent, status, toJSON(res))
	}
	late := c.submitOne(eventDelay(600, ended))
	if status, res := c.waitJob(late, time.Minute); status != "success" {
		t.Fatalf("job %d ended %s: %s", late, status, toJSON(res))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	rows, err := queryJobs(ctx, c.luxi, []int64{parent, late}, []string{"oplog"})
	if err != nil {
		t.Fatal(err)
	}
	for i, id := range []int64{parent, late} {
		if logs := toJSON(rows[i][0]); !strings.Contains(logs, "Test delay woken by event "+ended) {
			t.Errorf("job %d's log lacks its wake-up by %s: %s", id, ended, logs)
		}
	}
}

// TestCrashSuspendedStepWaitsForEvent suspends two ops, one until an event
// and one until a deadline, kills corrald and starts it again: both stay
// parked with no lock and no run slot, the deadline wakes one, and the
// event, delivered with the CLI over LUXI, the other.
func TestCrashSuspendedStepWaitsForEvent(t *testing.T) {
	c := newCluster(t, clusterOpts{nodes: 1, hypervisors: []string{"fake"}, watcher: time.Hour})
	const event = "e2e/agent-called-back"
	onEvent := c.submitOne(eventDelay(600, event))
	onDeadline := c.submitOne(eventDelay(8, "e2e/never-delivered"))
	parked := func() bool {
		var st queueStats
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		err := c.luxi.Call(ctx, "QueryStats", nil, &st)
		return err == nil && st.Suspended == 2 && st.Executing == 0
	}
	waitFor(t, 30*time.Second, "both ops to suspend", parked)
	// A suspended op holds no lock: a job needing the BGL exclusively runs.
	c.mustSucceed(bglJob())

	c.killCorrald()
	c.restartCorrald()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	rows, err := queryJobs(ctx, c.luxi, []int64{onEvent}, []string{"status"})
	if err != nil {
		t.Fatal(err)
	}
	if st := rows[0][0]; st != "waiting" {
		t.Fatalf("job %d is %v after the restart, want waiting", onEvent, st)
	}
	c.mustSucceed(bglJob())

	if status, res := c.waitJob(onDeadline, time.Minute); status != "success" {
		t.Fatalf("job %d ended %s: %s", onDeadline, status, toJSON(res))
	}
	if err := c.luxi.NotifyEvent(ctx, "bad event name"); err == nil {
		t.Error("NotifyEvent accepted a name with spaces")
	}
	// The CLI delivers it through LUXI, as corral-rapi would.
	if out, err := c.corral("debug", "notify", event); err != nil {
		t.Fatalf("corral debug notify: %v: %s", err, out)
	}
	if status, res := c.waitJob(onEvent, time.Minute); status != "success" {
		t.Fatalf("job %d ended %s: %s", onEvent, status, toJSON(res))
	}
	rows, err = queryJobs(ctx, c.luxi, []int64{onEvent, onDeadline}, []string{"oplog"})
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []string{"Test delay woken by event " + event, "without event e2e/never-delivered"} {
		if logs := toJSON(rows[i][0]); !strings.Contains(logs, want) {
			t.Errorf("job log lacks %q: %s", want, logs)
		}
	}
}
