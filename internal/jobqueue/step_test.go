package jobqueue

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/corral/corral/internal/store"
)

func TestCommitStepAtomicity(t *testing.T) {
	e := newEnv(t, nil)
	type outcome struct {
		conflictErr error
		okRes       StepResult
		okErr       error
	}
	out := make(chan outcome, 1)
	e.runner.on("OP_CAS", func(ctx context.Context, h *OpHandle) (any, error) {
		if err := h.SetRunning(ctx); err != nil {
			return nil, err
		}
		var o outcome
		_, o.conflictErr = h.CommitStep(ctx, StepCommit{
			Cmps:     []store.Cmp{store.ModRevisionIs("/cfg/x", 999999)},
			Ops:      []store.Op{store.Put("/cfg/y", []byte("y"))},
			Next:     1,
			Data:     json.RawMessage(`{"plan":1}`),
			Children: [][]json.RawMessage{{op(`{"OP_ID":"OP_NOOP"}`)}},
		})
		o.okRes, o.okErr = h.CommitStep(ctx, StepCommit{
			Cmps: []store.Cmp{store.Missing("/cfg/x")},
			Ops:  []store.Op{store.Put("/cfg/x", []byte("x"))},
			Next: 1,
			Data: json.RawMessage(`{"plan":2}`),
		})
		out <- o
		return nil, nil
	})
	id := e.submit(`{"OP_ID":"OP_CAS"}`)
	e.waitStatus(id, StatusSuccess)
	o := recv(t, out, "op did not report")
	if !errors.Is(o.conflictErr, ErrConflict) {
		t.Fatalf("failing compare: %v", o.conflictErr)
	}
	if o.okErr != nil {
		t.Fatalf("good step: %v", o.okErr)
	}
	ctx := ctxT(t)
	if kv, _ := e.st.Get(ctx, "/cfg/y"); kv != nil {
		t.Error("write of the failed step landed")
	}
	kv, _ := e.st.Get(ctx, "/cfg/x")
	if kv == nil || kv.ModRevision != o.okRes.Revision {
		t.Errorf("good step write %+v, revision %d", kv, o.okRes.Revision)
	}
	rec := storedRecord(t, e.st, e.q.jobKey(id))
	if rec.Ops[0].Cursor != 1 || string(rec.Ops[0].StepData) != `{"plan":2}` {
		t.Errorf("cursor %d data %s", rec.Ops[0].Cursor, rec.Ops[0].StepData)
	}
	all, _ := e.q.Query(ctx, nil, []string{"id"})
	if len(all) != 1 {
		t.Errorf("child job of the failed step exists: %v", all)
	}
}

func TestChildJobs(t *testing.T) {
	e := newEnv(t, nil)
	e.runner.on("OP_PARENT", func(ctx context.Context, h *OpHandle) (any, error) {
		if err := h.SetRunning(ctx); err != nil {
			return nil, err
		}
		res, err := h.CommitStep(ctx, StepCommit{Next: 1, Children: [][]json.RawMessage{
			{op(`{"OP_ID":"OP_NOOP","result":"c1"}`)},
			{op(`{"OP_ID":"OP_NOOP","result":"c2","depends":[[-1,["success"]]]}`)},
		}})
		if err != nil {
			return nil, err
		}
		jobs := []any{}
		for _, id := range res.ChildIDs {
			jobs = append(jobs, []any{true, id})
		}
		return map[string]any{"jobs": jobs}, nil
	})
	e.runner.on("OP_BADPARENT", func(ctx context.Context, h *OpHandle) (any, error) {
		_, err := h.CommitStep(ctx, StepCommit{Next: 1, Children: [][]json.RawMessage{{op(`{"nope":1}`)}}})
		return nil, err
	})
	id := e.submit(`{"OP_ID":"OP_PARENT"}`)
	e.waitStatus(id, StatusSuccess)
	var res []struct {
		Jobs [][2]any `json:"jobs"`
	}
	b, _ := json.Marshal(e.query(id, "opresult")[0])
	if err := json.Unmarshal(b, &res); err != nil || len(res[0].Jobs) != 2 {
		t.Fatalf("parent result %s: %v", b, err)
	}
	c1, c2 := int64(res[0].Jobs[0][1].(float64)), int64(res[0].Jobs[1][1].(float64))
	if c2 != c1+1 || c1 <= id {
		t.Errorf("child ids %d %d (parent %d)", c1, c2, id)
	}
	e.waitStatus(c2, StatusSuccess)
	jsonEq(t, e.query(c1, "opresult")[0], `["c1"]`)
	if rec := storedRecord(t, e.st, e.q.jobKey(c2)); len(rec.Ops[0].Depends) != 1 || rec.Ops[0].Depends[0].JobID != c1 {
		t.Errorf("child depends %+v", rec.Ops[0].Depends)
	}
	bad := e.submit(`{"OP_ID":"OP_BADPARENT"}`)
	e.waitStatus(bad, StatusError)
	jsonEq(t, e.query(bad, "opresult")[0], `[["OpPrereqError",["child job 0: opcode has no OP_ID","wrong_input"]]]`)
}

func TestSuspendUntilDeadline(t *testing.T) {
	e := newEnv(t, nil)
	var runs atomic.Int32
	e.runner.on("OP_SLEEP", func(ctx context.Context, h *OpHandle) (any, error) {
		runs.Add(1)
		if cur, _ := h.Cursor(); cur == 0 {
			if err := h.SetRunning(ctx); err != nil {
				return nil, err
			}
			if _, err := h.CommitStep(ctx, StepCommit{Next: 1}); err != nil {
				return nil, err
			}
			return nil, h.Suspend(ctx, time.Now().Add(30*time.Millisecond), "")
		}
		if h.Resumed() {
			return nil, fmt.Errorf("a woken op is not resumed")
		}
		if w := h.Woken(); w != WokenByDeadline {
			return nil, fmt.Errorf("woken by %q, want the deadline", w)
		}
		if err := h.SetRunning(ctx); err != nil {
			return nil, err
		}
		return "woke", nil
	})
	id := e.submit(`{"OP_ID":"OP_SLEEP"}`)
	e.waitStatus(id, StatusSuccess, StatusError)
	jsonEq(t, e.query(id, "opresult", "opstatus"), `[["woke"],["success"]]`)
	if n := runs.Load(); n != 2 {
		t.Errorf("ran %d times", n)
	}
	if rec := storedRecord(t, e.st, e.q.jobKey(id)); rec.Ops[0].Suspend != nil || rec.Ops[0].Woken != "" {
		t.Errorf("suspension left in the record: %+v, woken %q", rec.Ops[0].Suspend, rec.Ops[0].Woken)
	}
}

func TestSuspendUntilNotify(t *testing.T) {
	e := newEnv(t, func(o *Options) { o.MaxRunning = func() int { return 1 } })
	var runs atomic.Int32
	e.runner.on("OP_AGENT", func(ctx context.Context, h *OpHandle) (any, error) {
		runs.Add(1)
		if cur, _ := h.Cursor(); cur == 0 {
			if err := h.RecordLocks(ctx, []string{"node:exclusive:n1"}); err != nil {
				return nil, err
			}
			if err := h.SetRunning(ctx); err != nil {
				return nil, err
			}
			if _, err := h.CommitStep(ctx, StepCommit{Next: 1}); err != nil {
				return nil, err
			}
			return nil, h.Suspend(ctx, time.Now().Add(time.Hour), fmt.Sprintf("callback/%d", h.JobID()))
		}
		if len(h.RecordedLocks()) != 0 {
			return nil, fmt.Errorf("locks kept across suspension: %v", h.RecordedLocks())
		}
		if w := h.Woken(); w != WokenByEvent {
			return nil, fmt.Errorf("woken by %q, want the event", w)
		}
		if err := h.SetRunning(ctx); err != nil {
			return nil, err
		}
		return "called back", nil
	})
	e.runner.on("OP_BAD", func(ctx context.Context, h *OpHandle) (any, error) {
		return nil, h.Suspend(ctx, time.Time{}, "")
	})
	id := e.submit(`{"OP_ID":"OP_AGENT"}`)
	waitParked(t, e.q, 1)
	// A parked job does not hold a run slot.
	other := e.submit(`{"OP_ID":"OP_NOOP"}`)
	e.waitStatus(other, StatusSuccess)
	if st := e.query(id, "status")[0]; st != "waiting" {
		t.Errorf("parked status %v", st)
	}
	rec := storedRecord(t, e.st, e.q.jobKey(id))
	if op := rec.Ops[0]; op.Suspend == nil || op.Suspend.Event != fmt.Sprintf("callback/%d", id) || len(op.Locks) != 0 || op.Status != StatusWaiting {
		t.Errorf("stored parked op %+v", op)
	}
	e.q.Notify("something else")
	if st := e.q.Stats(); st.Suspended != 1 {
		t.Errorf("woken by another event: %+v", st)
	}
	e.q.Notify(fmt.Sprintf("callback/%d", id))
	e.waitStatus(id, StatusSuccess)
	if n := runs.Load(); n != 2 {
		t.Errorf("ran %d times", n)
	}
	bad := e.submit(`{"OP_ID":"OP_BAD"}`)
	e.waitStatus(bad, StatusError)
}

func TestSuspensionSurvivesRestart(t *testing.T) {
	e := newEnv(t, nil)
	park := func(ctx context.Context, h *OpHandle) (any, error) {
		if cur, _ := h.Cursor(); cur == 0 {
			if err := h.SetRunning(ctx); err != nil {
				return nil, err
			}
			if _, err := h.CommitStep(ctx, StepCommit{Next: 1}); err != nil {
				return nil, err
			}
			var in struct {
				Event string `json:"event"`
				In    int64  `json:"in_ms"`
			}
			_ = json.Unmarshal(h.Input(), &in)
			var until time.Time
			if in.In != 0 {
				until = time.Now().Add(time.Duration(in.In) * time.Millisecond)
			}
			return nil, h.Suspend(ctx, until, in.Event)
		}
		if err := h.SetRunning(ctx); err != nil {
			return nil, err
		}
		return "resumed by " + h.Woken(), nil
	}
	e.runner.on("OP_PARK", park)
	onEvent := e.submit(`{"OP_ID":"OP_PARK","event":"ev"}`)
	onDeadline := e.submit(`{"OP_ID":"OP_PARK","in_ms":1000}`)
	waitParked(t, e.q, 2)

	e.restart()
	e.runner.on("OP_PARK", park)
	e.start()
	if r := e.runner.recoveries(); len(r) != 0 {
		t.Errorf("parked ops recovered: %+v", r)
	}
	e.waitStatus(onDeadline, StatusSuccess) // its deadline passes while parked
	jsonEq(t, e.query(onDeadline, "opresult"), `[["resumed by deadline"]]`)
	if st := e.query(onEvent, "status")[0]; st != "waiting" {
		t.Errorf("event job woke without its event: %v", st)
	}
	e.q.Notify("ev")
	e.waitStatus(onEvent, StatusSuccess)
	jsonEq(t, e.query(onEvent, "opresult"), `[["resumed by event"]]`)
}

// TestFinalStepAndWritesPerJob checks the short write path of an op: waiting
// is published without a write, locks and running share one write, and a
// final step commit records the op's success. A one-op job then costs three
// store transactions: submit, running, final step.
func TestFinalStepAndWritesPerJob(t *testing.T) {
	e := newEnv(t, nil)
	g := newGate()
	e.runner.on("OP_FINAL", func(ctx context.Context, h *OpHandle) (any, error) {
		if err := g.pass(ctx); err != nil {
			return nil, err
		}
		if err := h.SetRunningWithLocks(ctx, []string{"node:shared:n1"}); err != nil {
			return nil, err
		}
		if _, err := h.CommitStep(ctx, StepCommit{
			Ops:  []store.Op{store.Put("/cfg/final", []byte("v"))},
			Next: 1, Final: true, Result: json.RawMessage(`{"done":true}`),
		}); err != nil {
			return nil, err
		}
		return map[string]bool{"done": true}, nil
	})
	ctx := ctxT(t)
	// A first job takes the first block of job ids (a write of its own).
	e.runner.on("OP_NOOP", func(ctx context.Context, h *OpHandle) (any, error) { return nil, nil })
	e.waitStatus(e.submit(`{"OP_ID":"OP_NOOP"}`), StatusSuccess)
	rev0, err := e.st.Revision(ctx)
	if err != nil {
		t.Fatal(err)
	}
	id := e.submit(`{"OP_ID":"OP_FINAL"}`)
	g.wait(t)
	// The op is waiting in memory only: queries see it, the store does not.
	if st := e.waitStatus(id, StatusWaiting); st != StatusWaiting {
		t.Fatalf("status %s", st)
	}
	if rec := storedRecord(t, e.st, e.q.jobKey(id)); rec.Ops[0].Status != StatusQueued {
		t.Errorf("stored op status %s while waiting, want queued", rec.Ops[0].Status)
	}
	g.open()
	e.waitStatus(id, StatusSuccess)
	rec := storedRecord(t, e.st, e.q.jobKey(id))
	op0 := rec.Ops[0]
	if op0.Status != StatusSuccess || string(op0.Result) != `{"done":true}` || op0.Start == nil || op0.Exec == nil || op0.End == nil || rec.End == nil {
		t.Errorf("stored op %+v", op0)
	}
	if kv, _ := e.st.Get(ctx, "/cfg/final"); kv == nil {
		t.Error("the final step's write is missing")
	}
	rev1, err := e.st.Revision(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if n := rev1 - rev0; n != 3 {
		t.Errorf("a one-op job took %d store transactions, want 3 (submit, running, final step)", n)
	}
}

// TestWaitingOpRequeuedAfterRestart: a waiting op was never written, so a
// restart finds it queued and runs it again.
func TestWaitingOpRequeuedAfterRestart(t *testing.T) {
	e := newEnv(t, nil)
	g := newGate()
	var runs atomic.Int32
	e.runner.on("OP_W", func(ctx context.Context, h *OpHandle) (any, error) {
		if runs.Add(1) == 1 {
			if err := g.pass(ctx); err != nil {
				return nil, err
			}
		}
		return nil, h.SetRunning(ctx)
	})
	id := e.submit(`{"OP_ID":"OP_W"}`)
	g.wait(t)
	e.restart()
	e.runner.on("OP_W", func(ctx context.Context, h *OpHandle) (any, error) {
		runs.Add(1)
		return nil, h.SetRunning(ctx)
	})
	e.start()
	e.waitStatus(id, StatusSuccess)
	if n := runs.Load(); n != 2 {
		t.Errorf("op ran %d times, want 2 (once before the restart, once after)", n)
	}
}

// CommitFailure records the op's failure and the runner's writes in one
// transaction; a failing compare writes neither and leaves the outcome to
// the queue.
func TestCommitFailure(t *testing.T) {
	e := newEnv(t, nil)
	type outcome struct{ conflictErr, okErr error }
	out := make(chan outcome, 1)
	e.runner.on("OP_REVERT", func(ctx context.Context, h *OpHandle) (any, error) {
		if err := h.SetRunning(ctx); err != nil {
			return nil, err
		}
		cause := errors.New("step failed")
		var o outcome
		o.conflictErr = h.CommitFailure(ctx, cause, []store.Cmp{store.ModRevisionIs("/cfg/x", 999999)},
			[]store.Op{store.Put("/cfg/y", []byte("y"))}, nil)
		var applied int64
		o.okErr = h.CommitFailure(ctx, cause, []store.Cmp{store.Missing("/cfg/x")},
			[]store.Op{store.Put("/cfg/x", []byte("x"))}, func(rev int64) { applied = rev })
		if o.okErr == nil && applied == 0 {
			o.okErr = errors.New("committed callback did not run")
		}
		out <- o
		return nil, cause
	})
	id := e.submit(`{"OP_ID":"OP_REVERT"}`, `{"OP_ID":"OP_NOOP"}`)
	e.waitStatus(id, StatusError)
	o := recv(t, out, "op did not report")
	if !errors.Is(o.conflictErr, ErrConflict) || o.okErr != nil {
		t.Fatalf("conflict: %v; good commit: %v", o.conflictErr, o.okErr)
	}
	ctx := ctxT(t)
	if kv, _ := e.st.Get(ctx, "/cfg/y"); kv != nil {
		t.Error("write of the conflicting commit landed")
	}
	kv, _ := e.st.Get(ctx, "/cfg/x")
	rec := storedRecord(t, e.st, e.q.jobKey(id))
	if kv == nil || rec.Ops[0].Status != StatusError || rec.Ops[1].Status != StatusError {
		t.Fatalf("write %+v, ops %s/%s", kv, rec.Ops[0].Status, rec.Ops[1].Status)
	}
	jobKV, _ := e.st.Get(ctx, e.q.jobKey(id))
	if jobKV.ModRevision != kv.ModRevision {
		t.Errorf("failure recorded at revision %d, the runner's write at %d: not one transaction", jobKV.ModRevision, kv.ModRevision)
	}
	if !strings.Contains(string(rec.Ops[0].Result), "step failed") {
		t.Errorf("result %s", rec.Ops[0].Result)
	}
}
