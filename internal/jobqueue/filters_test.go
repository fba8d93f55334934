package jobqueue

import (
	"context"
	"encoding/json"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/corral/corral/internal/jobfilter"
)

func filterRule(t *testing.T, action string, preds string) jobfilter.Rule {
	t.Helper()
	var r jobfilter.Rule
	js := `{"priority":0,"action":` + action + `,"predicates":` + preds + `}`
	if err := json.Unmarshal([]byte(js), &r); err != nil {
		t.Fatalf("%s: %v", js, err)
	}
	return r
}

func TestFilterRejectCancelsQueuedJobs(t *testing.T) {
	e := newEnv(t, nil)
	ctx := ctxT(t)
	id, err := e.q.ReplaceFilter(ctx, filterRule(t, `"REJECT"`, `[["opcode", ["=", "OP_ID", "OP_NOOP"]], ["reason", ["=", "source", "test"]]]`))
	if err != nil {
		t.Fatal(err)
	}
	rejected := e.submit(`{"OP_ID":"OP_NOOP","reason":[["test","why",1]]}`)
	accepted := e.submit(`{"OP_ID":"OP_NOOP","reason":[["other","why",1]]}`)
	if st := e.waitStatus(rejected, StatusCanceled, StatusSuccess, StatusError); st != StatusCanceled {
		t.Fatalf("rejected job ended %s", st)
	}
	jsonEq(t, e.query(rejected, "opresult")[0], `["Job canceled by request"]`)
	if st := e.waitStatus(accepted, StatusSuccess, StatusError, StatusCanceled); st != StatusSuccess {
		t.Fatalf("unmatched job ended %s", st)
	}
	if got := e.q.Filters(); len(got) != 1 || got[0].UUID != id || got[0].Watermark != 0 {
		t.Fatalf("filters %+v", got)
	}
	if err := e.q.DeleteFilter(ctx, id); err != nil {
		t.Fatal(err)
	}
	if err := e.q.DeleteFilter(ctx, id); err == nil || err.Error() != "Filter rule with UUID "+id+" does not exist" {
		t.Fatalf("second delete: %v", err)
	}
	if st := e.waitStatus(e.submit(`{"OP_ID":"OP_NOOP","reason":[["test","why",1]]}`), StatusSuccess, StatusError, StatusCanceled); st != StatusSuccess {
		t.Fatalf("after delete: %s", st)
	}
}

func TestFilterPauseHoldsUntilDeleted(t *testing.T) {
	e := newEnv(t, nil)
	ctx := ctxT(t)
	first := e.submit(`{"OP_ID":"OP_NOOP"}`)
	e.waitStatus(first, StatusSuccess)
	// Only jobs after the watermark (the last id when the rule was added).
	pause := filterRule(t, `"PAUSE"`, `[["jobid", [">", "id", "watermark"]]]`)
	pause.Priority = 5
	id, err := e.q.ReplaceFilter(ctx, pause)
	if err != nil {
		t.Fatal(err)
	}
	if w := e.q.Filters()[0].Watermark; w != first {
		t.Fatalf("watermark %d, want %d", w, first)
	}
	// A rule of higher priority (lower number) accepts OP_NOOP jobs with
	// the result "go": it decides before the PAUSE rule. A CONTINUE rule
	// before both decides nothing.
	if _, err := e.q.ReplaceFilter(ctx, filterRule(t, `"ACCEPT"`, `[["opcode", ["=", "result", "go"]]]`)); err != nil {
		t.Fatal(err)
	}
	if _, err := e.q.ReplaceFilter(ctx, filterRule(t, `"CONTINUE"`, `[]`)); err != nil {
		t.Fatal(err)
	}
	held := e.submit(`{"OP_ID":"OP_NOOP"}`)
	goJob := e.submit(`{"OP_ID":"OP_NOOP","result":"go"}`)
	e.waitStatus(goJob, StatusSuccess)
	if st := e.waitStatus(held, StatusQueued); st != StatusQueued {
		t.Fatalf("held job %s", st)
	}
	if s := e.q.Stats(); s.Ready != 1 {
		t.Fatalf("stats while paused %+v", s)
	}
	// The rules survive a restart, and still hold the job.
	e.restart()
	e.start()
	if len(e.q.Filters()) != 3 {
		t.Fatalf("filters after restart: %+v", e.q.Filters())
	}
	if s := e.q.Stats(); s.Ready != 1 || s.Executing != 0 {
		t.Fatalf("stats after restart %+v", s)
	}
	if err := e.q.DeleteFilter(ctx, id); err != nil {
		t.Fatal(err)
	}
	e.waitStatus(held, StatusSuccess)
}

func TestFilterRateLimit(t *testing.T) {
	e := newEnv(t, nil)
	ctx := ctxT(t)
	var running, most atomic.Int32
	g := newGate()
	e.runner.on("OP_BLOCK", func(ctx context.Context, h *OpHandle) (any, error) {
		if err := h.SetRunning(ctx); err != nil {
			return nil, err
		}
		n := running.Add(1)
		defer running.Add(-1)
		for {
			m := most.Load()
			if n <= m || most.CompareAndSwap(m, n) {
				break
			}
		}
		return nil, g.pass(ctx)
	})
	if _, err := e.q.ReplaceFilter(ctx, filterRule(t, `["RATE_LIMIT", 2]`, `[["opcode", ["=", "OP_ID", "OP_BLOCK"]]]`)); err != nil {
		t.Fatal(err)
	}
	var ids []int64
	for range 5 {
		ids = append(ids, e.submit(`{"OP_ID":"OP_BLOCK"}`))
	}
	other := e.submit(`{"OP_ID":"OP_NOOP"}`) // not limited: runs past the held jobs
	e.waitStatus(other, StatusSuccess)
	g.wait(t)
	g.wait(t)
	// The other job's goroutine may still be leaving the executing
	// count after its success.
	deadline := time.Now().Add(10 * time.Second)
	s := e.q.Stats()
	for s.Executing != 2 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
		s = e.q.Stats()
	}
	if s.Executing != 2 || s.Ready != 3 || s.ByStatus["running"] != 2 {
		t.Fatalf("with two slots: %+v", s)
	}
	g.open()
	for _, id := range ids {
		e.waitStatus(id, StatusSuccess)
	}
	if m := most.Load(); m != 2 {
		t.Fatalf("at most %d ran at once, want 2", m)
	}
}

func TestReplaceFilterChecks(t *testing.T) {
	e := newEnv(t, nil)
	ctx := ctxT(t)
	r := filterRule(t, `"ACCEPT"`, `[]`)
	r.UUID = "not-a-uuid"
	if _, err := e.q.ReplaceFilter(ctx, r); err == nil || err.Error() != "Unable to parse UUID" {
		t.Fatalf("bad uuid: %v", err)
	}
	r.UUID = "0b6d1f2e-6f3a-4c1e-9a53-3b6c1e0e8a11"
	if id, err := e.q.ReplaceFilter(ctx, r); err != nil || id != r.UUID {
		t.Fatalf("upsert with a uuid: %q %v", id, err)
	}
	r.Priority = -1
	if _, err := e.q.ReplaceFilter(ctx, r); err == nil {
		t.Fatal("negative priority accepted")
	}
}

func TestFilterRejectsJobWaitingForDependency(t *testing.T) {
	e := newEnv(t, nil)
	ctx := ctxT(t)
	g := newGate()
	e.runner.on("OP_BLOCK", func(ctx context.Context, h *OpHandle) (any, error) { return nil, g.pass(ctx) })
	first := e.submit(`{"OP_ID":"OP_BLOCK"}`)
	g.wait(t)
	dependent := e.submit(fmt.Sprintf(`{"OP_ID":"OP_NOOP","depends":[[%d,[]]]}`, first))
	if s := e.q.Stats(); s.Blocked != 1 {
		t.Fatalf("stats %+v, want the dependent job blocked", s)
	}
	// The rule cancels the blocked job at once, without waiting for its
	// dependency; the running job it also matches is not touched.
	if _, err := e.q.ReplaceFilter(ctx, filterRule(t, `"REJECT"`, `[]`)); err != nil {
		t.Fatal(err)
	}
	e.waitStatus(dependent, StatusCanceled)
	g.open()
	e.waitStatus(first, StatusSuccess)
}
