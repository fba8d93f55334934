package jobqueue

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"
)

type finalCall struct {
	op     string
	status Status
	took   time.Duration
}

// TestFinalizedHook checks Options.Finalized: one call per job reaching a
// final status, with its first op and its time in the queue, made before
// waiters learn of the status, and none for jobs already final at start.
func TestFinalizedHook(t *testing.T) {
	var mu sync.Mutex
	var calls []finalCall
	// Each reading of the clock is a second after the last, so a job's end
	// is strictly after its submission.
	var clockMu sync.Mutex
	clock := time.Unix(1000, 0)
	now := func() time.Time {
		clockMu.Lock()
		defer clockMu.Unlock()
		clock = clock.Add(time.Second)
		return clock
	}
	hook := func(op string, st Status, took time.Duration) {
		mu.Lock()
		calls = append(calls, finalCall{op, st, took})
		mu.Unlock()
	}
	e := newEnv(t, func(o *Options) { o.Now, o.Finalized = now, hook })
	e.runner.on("OP_FAIL", func(ctx context.Context, h *OpHandle) (any, error) {
		return nil, errors.New("no")
	})
	got := func() []finalCall {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(calls)
	}

	e.waitStatus(e.submit(`{"OP_ID":"OP_NOOP"}`, `{"OP_ID":"OP_FAIL"}`), StatusError)
	e.waitStatus(e.submit(`{"OP_ID":"OP_NOOP"}`), StatusSuccess)
	c := got()
	if len(c) != 2 {
		t.Fatalf("calls = %+v, want 2", c)
	}
	want := []finalCall{{"OP_NOOP", StatusError, 0}, {"OP_NOOP", StatusSuccess, 0}}
	for i := range want {
		if c[i].op != want[i].op || c[i].status != want[i].status || c[i].took < time.Second {
			t.Errorf("call %d = %+v, want %s %s after at least 1s", i, c[i], want[i].op, want[i].status)
		}
	}

	e.close()
	e.st = openStore(t, e.path)
	e.runner = newRunner()
	e.start()
	if c := got(); len(c) != 2 {
		t.Fatalf("restart reported already final jobs: %+v", c)
	}
}
