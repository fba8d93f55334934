package cmdlib

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestDelayRefusesUnboundedDurations: a duration that is not a finite
// number within a week fails the op as invalid instead of overflowing into
// a delay that is over at once.
func TestDelayRefusesUnboundedDurations(t *testing.T) {
	e := openEnv(t, filepath.Join(t.TempDir(), "s.db"), newNodeDouble(), true)
	defer e.close()
	for _, d := range []float64{1e308, 1e10, 604801, -1} {
		st, res := e.run(t, map[string]any{"OP_ID": "OP_TEST_DELAY", "duration": d})
		b, _ := json.Marshal(res)
		if st != "error" || !strings.Contains(string(b), `parameter \"duration\"`) || !strings.Contains(string(b), "wrong_input") {
			t.Errorf("duration %v: got %s %s, want an invalid-input error naming duration", d, st, b)
		}
	}
}

// TestDelayOfAWeekSleeps: the longest valid delay really waits (it is
// still running well after it started) and an interruptible one can be
// canceled.
func TestDelayOfAWeekSleeps(t *testing.T) {
	e := openEnv(t, filepath.Join(t.TempDir(), "s.db"), newNodeDouble(), true)
	defer e.close()
	raw, _ := json.Marshal(map[string]any{"OP_ID": "OP_TEST_DELAY", "duration": 7 * 24 * 3600, "interruptible": true})
	id, err := e.q.Submit(context.Background(), []json.RawMessage{raw})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	status := func() any {
		rows, err := e.q.Query(ctx, []int64{id}, []string{"status"})
		if err != nil {
			t.Fatal(err)
		}
		return rows[0][0]
	}
	for status() != "running" {
		if ctx.Err() != nil {
			t.Fatal("job never ran")
		}
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(300 * time.Millisecond)
	if st := status(); st != "running" {
		t.Fatalf("a week-long delay is %v after 300ms, want running", st)
	}
	if _, _, err := e.q.Cancel(ctx, id, true); err != nil {
		t.Fatal(err)
	}
	if st, _ := e.wait(t, id); st != "canceled" {
		t.Fatalf("status %s, want canceled", st)
	}
}

// TestDelayWithNoNodeSleepsInTheJob: with on_master false and no on_nodes,
// Ganeti's LUTestDelay sleeps in the job itself; so does Corral. The job
// is still running (not done at once) until it is canceled.
func TestDelayWithNoNodeSleepsInTheJob(t *testing.T) {
	e := openEnv(t, filepath.Join(t.TempDir(), "s.db"), newNodeDouble(), true)
	defer e.close()
	raw, _ := json.Marshal(map[string]any{"OP_ID": "OP_TEST_DELAY", "duration": 3600, "on_master": false, "interruptible": true})
	id, err := e.q.Submit(context.Background(), []json.RawMessage{raw})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var st any
	for {
		rows, err := e.q.Query(ctx, []int64{id}, []string{"status"})
		if err != nil {
			t.Fatal(err)
		}
		if st = rows[0][0]; st != "queued" && st != "waiting" {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(200 * time.Millisecond)
	if rows, _ := e.q.Query(ctx, []int64{id}, []string{"status"}); rows[0][0] != "running" {
		t.Fatalf("an hour's delay on no node is %v, want running", rows[0][0])
	}
	if _, _, err := e.q.Cancel(ctx, id, true); err != nil {
		t.Fatal(err)
	}
	if st, _ := e.wait(t, id); st != "canceled" {
		t.Fatalf("status %s, want canceled", st)
	}
}
