package jobqueue

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/corral/corral/internal/ecode"
)

func TestWaitForChange(t *testing.T) {
	e := newEnv(t, func(o *Options) { o.MaxRunning = func() int { return 1 } })
	ctx := ctxT(t)
	g := newGate()
	e.runner.on("OP_LOGGATE", func(ctx context.Context, h *OpHandle) (any, error) {
		if err := h.SetRunning(ctx); err != nil {
			return nil, err
		}
		if err := h.Log(ctx, "message", "a"); err != nil {
			return nil, err
		}
		if err := g.pass(ctx); err != nil {
			return nil, err
		}
		return "done", h.Log(ctx, "message", "b")
	})
	id := e.submit(`{"OP_ID":"OP_LOGGATE"}`)
	g.wait(t)
	queued := e.submit(`{"OP_ID":"OP_NOOP"}`) // stays queued behind the gate

	fields := []string{"status", "opstatus"}
	info, logs, changed, err := e.q.WaitForChange(ctx, id, fields, nil, -1, time.Hour)
	if err != nil || !changed {
		t.Fatalf("nil prev: %v %v", changed, err)
	}
	jsonEq(t, info, `["running",["running"]]`)
	if len(logs) != 1 || logs[0][0] != int64(1) {
		t.Fatalf("logs %v", logs)
	}
	jsonEq(t, logs[0][3], `"a"`)
	// Same info but an unseen log entry: returns at once.
	_, logs, changed, err = e.q.WaitForChange(ctx, id, fields, info, -1, time.Hour)
	if err != nil || !changed || len(logs) != 1 {
		t.Errorf("unseen log: %v %v %v", logs, changed, err)
	}
	// Nothing new: waits for the timeout, then returns the same answer.
	info2, logs, changed, err := e.q.WaitForChange(ctx, id, fields, info, 1, 20*time.Millisecond)
	if err != nil || changed || len(logs) != 0 {
		t.Errorf("timeout: %v %v %v", logs, changed, err)
	}
	jsonEq(t, info2, `["running",["running"]]`)
	// Timeout 0: the current answer at once.
	if _, _, changed, err := e.q.WaitForChange(ctx, queued, []string{"status"}, []any{"queued"}, -1, 0); changed || err != nil {
		t.Errorf("zero timeout: %v %v", changed, err)
	}
	// A prev from a client (JSON-decoded numbers, maps) compares equal.
	qinfo, _, _, err := e.q.WaitForChange(ctx, queued, []string{"id", "priority", "opstart"}, nil, -1, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, changed, _ := e.q.WaitForChange(ctx, queued, []string{"id", "priority", "opstart"},
		[]any{float64(queued), float64(0), []any{nil}}, -1, time.Millisecond); changed {
		t.Errorf("decoded prev %v reported as a change from %v", qinfo, qinfo)
	}

	// The caller's context ends a wait.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, _, _, err := e.q.WaitForChange(cctx, queued, []string{"status"}, []any{"queued"}, -1, time.Hour); err == nil {
		t.Error("cancelled ctx did not end the wait")
	}

	// A waiter blocked on the job returns when the next log entry comes.
	type result struct {
		logs    [][]any
		changed bool
		err     error
	}
	done := make(chan result, 1)
	go func() {
		_, logs, changed, err := e.q.WaitForChange(ctx, id, fields, info, 1, testTimeout)
		done <- result{logs, changed, err}
	}()
	g.open()
	r := recv(t, done, "waiter did not return")
	if r.err != nil || !r.changed || len(r.logs) == 0 || r.logs[0][0] != int64(2) {
		t.Errorf("after release: %+v", r)
	}
	e.waitStatus(id, StatusSuccess)
	// Finalized: returns at once even with an up-to-date prev.
	fin, _, _, _ := e.q.WaitForChange(ctx, id, fields, nil, -1, 0)
	_, _, changed, err = e.q.WaitForChange(ctx, id, fields, fin, 2, time.Hour)
	if err != nil || !changed {
		t.Errorf("finalized: %v %v", changed, err)
	}
	if _, _, _, err := e.q.WaitForChange(ctx, 777777, fields, nil, -1, time.Hour); !isKind(err, ecode.JobLost) {
		t.Errorf("unknown job: %v", err)
	}
	if _, _, _, err := e.q.WaitForChange(ctx, id, []string{"nope"}, nil, -1, time.Hour); ecode.ClassOf(err) != ecode.Inval {
		t.Errorf("unknown field: %v", err)
	}
}

func TestSubscriptionCoalesces(t *testing.T) {
	e := newEnv(t, nil)
	g := newGate()
	logged := make(chan struct{})
	e.runner.on("OP_CHATTY", func(ctx context.Context, h *OpHandle) (any, error) {
		if err := h.SetRunning(ctx); err != nil {
			return nil, err
		}
		if err := g.pass(ctx); err != nil {
			return nil, err
		}
		for i := range 50 {
			if err := h.Log(ctx, "message", i); err != nil {
				return nil, err
			}
		}
		close(logged)
		return nil, g.pass(ctx)
	})
	id := e.submit(`{"OP_ID":"OP_CHATTY"}`)
	g.wait(t)
	sub, err := e.q.Subscribe(id)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	g.release <- struct{}{} // let it log, with a reader that does not read
	recv(t, logged, "op did not log")
	g.wait(t)
	if n := len(sub.C); n != 1 {
		t.Fatalf("pending notifications %d, want 1", n)
	}
	<-sub.C
	select {
	case <-sub.C:
		t.Fatal("a second notification was queued")
	default:
	}
	// The slow reader catches up with one read of the current state.
	_, logs, _, err := e.q.WaitForChange(ctxT(t), id, []string{"status"}, []any{"running"}, 0, time.Hour)
	if err != nil || len(logs) != 50 {
		t.Errorf("catch-up read: %d entries, %v", len(logs), err)
	}
	g.open()
	e.waitStatus(id, StatusSuccess)
	sub.Close()
	sub.Close()
	if _, err := e.q.Subscribe(424242); !isKind(err, ecode.JobLost) {
		t.Errorf("subscribe unknown: %v", err)
	}
}

func TestManyWaiters(t *testing.T) {
	e := newEnv(t, func(o *Options) { o.MaxRunning = func() int { return 1 } })
	g := newGate()
	e.runner.on("OP_BLOCK", func(ctx context.Context, h *OpHandle) (any, error) { return nil, g.pass(ctx) })
	b := e.submit(`{"OP_ID":"OP_BLOCK"}`)
	g.wait(t)
	id := e.submit(`{"OP_ID":"OP_NOOP"}`)
	const n = 200
	var wg sync.WaitGroup
	errs := make(chan error, n)
	started := make(chan struct{}, n)
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			prev := []any{"queued"}
			started <- struct{}{}
			for {
				info, _, _, err := e.q.WaitForChange(ctxT(t), id, []string{"status"}, prev, -1, testTimeout)
				if err != nil {
					errs <- err
					return
				}
				if info[0] == "success" {
					return
				}
				prev = info
			}
		}()
	}
	for range n {
		<-started
	}
	g.open()
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	e.waitStatus(b, StatusSuccess)
	j := e.q.lookup(id)
	j.mu.Lock()
	left := len(j.subs)
	j.mu.Unlock()
	if left != 0 {
		t.Errorf("%d subscriptions leaked", left)
	}
}
