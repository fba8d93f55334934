package jobqueue

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// unsafeOp runs n steps and declares step `unsafe` unsafe to repeat: it
// calls BeginUnsafe before the step's work, as the processor does. The
// step's work is passing gates[i], if set.
func (s *stepper) unsafeOp(n, unsafe int) opFunc {
	return func(ctx context.Context, h *OpHandle) (any, error) {
		if !h.Resumed() {
			if err := h.RecordLocks(ctx, s.locks); err != nil {
				return nil, err
			}
			if err := h.SetRunning(ctx); err != nil {
				return nil, err
			}
		}
		cur, _ := h.Cursor()
		for i := cur; i < n; i++ {
			if i == unsafe {
				if err := h.BeginUnsafe(ctx, BeganStep{Step: i, Name: "write", Check: "the file /x"}); err != nil {
					return nil, err
				}
			}
			s.count(s.runs, i)
			s.mu.Lock()
			g := s.gates[i]
			s.mu.Unlock()
			if g != nil {
				if err := g.pass(ctx); err != nil {
					return nil, err
				}
			}
			if _, err := h.CommitStep(ctx, StepCommit{Next: i + 1, Data: json.RawMessage(fmt.Sprintf(`{"done":%d}`, i+1))}); err != nil {
				return nil, err
			}
			s.count(s.commits, i)
		}
		return fmt.Sprintf("%d steps", n), nil
	}
}

// TestUnsafeStepInterrupted stops the queue while an unsafe step runs (its
// begin is recorded, its commit is not): the next start fails the op with a
// message naming the step, without running it or re-acquiring its locks,
// while a cancel requested before the stop does not turn the failure into
// a cancel.
func TestUnsafeStepInterrupted(t *testing.T) {
	for _, cancel := range []bool{false, true} {
		t.Run(fmt.Sprintf("cancel=%v", cancel), func(t *testing.T) {
			e := newEnv(t, nil)
			s1 := newStepper()
			s1.locks = webLock
			s1.gates[1] = newGate()
			e.runner.on("OP_UNSAFE", s1.unsafeOp(3, 1))
			id := e.submit(`{"OP_ID":"OP_UNSAFE"}`, `{"OP_ID":"OP_NOOP"}`)
			s1.gates[1].wait(t)
			if cancel {
				if ok, _, err := e.q.Cancel(ctxT(t), id, true); err != nil || !ok {
					t.Fatalf("cancel: %v %v", ok, err)
				}
			}

			e.restart()
			rec := storedRecord(t, e.st, e.q2key(id))
			if b := rec.Ops[0].Began; b == nil || *b != (BeganStep{Step: 1, Name: "write", Check: "the file /x"}) || rec.Ops[0].Cursor != 1 {
				t.Fatalf("stored op before the restart: cursor %d began %+v", rec.Ops[0].Cursor, rec.Ops[0].Began)
			}

			s2 := newStepper()
			e.runner.on("OP_UNSAFE", s2.unsafeOp(3, 1))
			e.start()
			e.waitStatus(id, StatusError)
			if got := s2.get(s2.runs, 1) + s2.get(s2.runs, 2); got != 0 {
				t.Errorf("steps ran after the restart: %v", s2.runs)
			}
			if r := e.runner.recoveries(); len(r) != 0 {
				t.Errorf("the failed op's locks were re-acquired: %+v", r)
			}
			row := e.query(id, "opstatus", "opresult", "oplog")
			jsonEq(t, row[0], `["error","error"]`)
			res, _ := json.Marshal(row[1].([]any)[0])
			for _, want := range []string{"OP_UNSAFE", `step 1 (\"write\")`, "may or may not have taken effect", "Check the file /x", "OpExecError"} {
				if !strings.Contains(string(res), want) {
					t.Errorf("op result %s lacks %q", res, want)
				}
			}
			logs, _ := json.Marshal(row[2].([]any)[0])
			if !strings.Contains(string(logs), "may or may not have taken effect") {
				t.Errorf("op log does not tell why the op failed: %s", logs)
			}
			if rec := storedRecord(t, e.st, e.q.jobKey(id)); len(rec.Ops[0].Locks) != 0 {
				t.Errorf("failed op still records locks: %v", rec.Ops[0].Locks)
			}
			// The queue goes on with other jobs.
			e.waitStatus(e.submit(`{"OP_ID":"OP_NOOP"}`), StatusSuccess)
		})
	}
}

// TestUnsafeStepCommitted: once the unsafe step commits it is no longer in
// doubt; a stop at the next (safe) step resumes there as usual.
func TestUnsafeStepCommitted(t *testing.T) {
	e := newEnv(t, nil)
	s1 := newStepper()
	s1.locks = webLock
	s1.gates[2] = newGate()
	e.runner.on("OP_UNSAFE", s1.unsafeOp(3, 1))
	id := e.submit(`{"OP_ID":"OP_UNSAFE"}`)
	s1.gates[2].wait(t)

	e.restart()
	rec := storedRecord(t, e.st, e.q2key(id))
	if op := rec.Ops[0]; op.Cursor != 2 || op.Began != nil {
		t.Fatalf("stored op: cursor %d began %+v, want cursor 2 and no begun step", op.Cursor, op.Began)
	}
	s2 := newStepper()
	e.runner.on("OP_UNSAFE", s2.unsafeOp(3, 1))
	e.start()
	e.waitStatus(id, StatusSuccess)
	if s2.get(s2.runs, 1) != 0 || s2.get(s2.runs, 2) != 1 {
		t.Errorf("resumed steps %v, want step 2 once", s2.runs)
	}
	if r := e.runner.recoveries(); len(r) != 1 {
		t.Errorf("recoveries %+v, want the op's", r)
	}
}

// TestBeginUnsafeChecksCursor: a begin for any step but the one the op is
// at is a runner bug and is refused without a write.
func TestBeginUnsafeChecksCursor(t *testing.T) {
	e := newEnv(t, nil)
	errs := make(chan error, 1)
	e.runner.on("OP_BAD", func(ctx context.Context, h *OpHandle) (any, error) {
		if err := h.SetRunning(ctx); err != nil {
			return nil, err
		}
		err := h.BeginUnsafe(ctx, BeganStep{Step: 1, Name: "x"})
		if _, ok := h.Began(); ok {
			err = fmt.Errorf("refused begin is visible (%v)", err)
		}
		errs <- err
		return nil, nil
	})
	id := e.submit(`{"OP_ID":"OP_BAD"}`)
	e.waitStatus(id, StatusSuccess)
	if err := recv(t, errs, "op did not report"); err == nil || !strings.Contains(err.Error(), "cursor 0") {
		t.Errorf("begin of step 1 at cursor 0: %v", err)
	}
}

func TestBeganStepErr(t *testing.T) {
	cases := []struct {
		b    BeganStep
		want string
	}{
		{BeganStep{Step: 2, Name: "rename-os", Check: "the disk"}, `OP_X: step 2 ("rename-os") was interrupted`},
		{BeganStep{Step: 0, Name: "run"}, "Check what the step changes;"},
	}
	for _, c := range cases {
		if got := c.b.Err("OP_X").Error(); !strings.Contains(got, c.want) {
			t.Errorf("%+v: %q lacks %q", c.b, got, c.want)
		}
	}
}
