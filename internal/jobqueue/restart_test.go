package jobqueue

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"testing"

	"github.com/corral/corral/internal/ecode"
)

var webLock = []string{"instance:exclusive:web1"}

// logSerials lists the serials of a job's log, op by op.
func logSerials(t *testing.T, e *env, id int64) [][]int64 {
	t.Helper()
	var out [][]int64
	for _, l := range e.query(id, "oplog")[0].([]any) {
		var s []int64
		for _, entry := range l.([]any) {
			s = append(s, entry.([]any)[0].(int64))
		}
		out = append(out, s)
	}
	return out
}

func TestResumeAfterStopMidStep(t *testing.T) {
	e := newEnv(t, nil)
	done := e.submit(`{"OP_ID":"OP_NOOP","result":"before"}`)
	e.waitStatus(done, StatusSuccess)

	s1 := newStepper()
	s1.locks = webLock
	s1.gates[1] = newGate()
	e.runner.on("OP_STEPS", s1.fn(3))
	id := e.submit(`{"OP_ID":"OP_STEPS"}`, `{"OP_ID":"OP_NOOP","result":"second op"}`)
	queued := e.submit(`{"OP_ID":"OP_NOOP","result":"queued at stop"}`)
	s1.gates[1].wait(t) // step 0 committed, step 1 running, not committed

	e.restart() // Stop cancels the op's ctx; nothing is written for it
	rec := storedRecord(t, e.st, e.q2key(id))
	if op := rec.Ops[0]; op.Status != StatusRunning || op.Cursor != 1 || !slices.Equal(op.Locks, webLock) {
		t.Fatalf("stored op after stop: %+v", op)
	}

	s2 := newStepper()
	e.runner.on("OP_STEPS", s2.fn(3))
	e.start()
	if r := e.runner.recoveries(); len(r) != 1 || r[0].Job != id || r[0].Op != 0 || !slices.Equal(r[0].Locks, webLock) || !r[0].Resumed {
		t.Fatalf("recoveries %+v", r)
	}
	e.waitStatus(id, StatusSuccess)
	e.waitStatus(queued, StatusSuccess)
	if s2.get(s2.runs, 0) != 0 || s2.get(s2.runs, 1) != 1 || s2.get(s2.runs, 2) != 1 {
		t.Errorf("after restart: committed step re-ran or uncommitted one skipped: %v", s2.runs)
	}
	if s1.get(s1.commits, 0) != 1 || s1.get(s1.commits, 1) != 0 {
		t.Errorf("before restart: %v", s1.commits)
	}
	jsonEq(t, e.query(id, "opresult", "opstatus"), `[["3 steps","second op"],["success","success"]]`)
	// Log serials continue across the restart: step 0 and the interrupted
	// step 1 wrote 1 and 2; the resumed run writes 3 and 4.
	if got := logSerials(t, e, id); !slices.Equal(got[0], []int64{1, 2, 3, 4}) {
		t.Errorf("log serials %v", got)
	}
	jsonEq(t, e.query(done, "opresult", "status"), `[["before"],"success"]`)
	if rec := storedRecord(t, e.st, e.q.jobKey(id)); len(rec.Ops[0].Locks) != 0 {
		t.Errorf("locks kept after the op finished: %v", rec.Ops[0].Locks)
	}
	// Ids are never reused.
	next := e.submit(`{"OP_ID":"OP_NOOP"}`)
	if next <= queued {
		t.Errorf("id %d reused (last before restart %d)", next, queued)
	}
}

// q2key gives the job key without a running queue.
func (e *env) q2key(id int64) string { return fmt.Sprintf("%sjobs/%020d", DefaultPrefix, id) }

// TestResumeFromCrashSnapshot takes a consistent copy of the store while an
// op is mid-step (what a crash would leave) and starts a second master on
// it.
func TestResumeFromCrashSnapshot(t *testing.T) {
	e := newEnv(t, nil)
	e.runner.on("OP_LOGONE", func(ctx context.Context, h *OpHandle) (any, error) {
		return "logged", h.Log(ctx, "message", "hello")
	})
	logged := e.submit(`{"OP_ID":"OP_LOGONE"}`)
	e.waitStatus(logged, StatusSuccess)
	s1 := newStepper()
	s1.locks = webLock
	s1.gates[2] = newGate()
	e.runner.on("OP_STEPS", s1.fn(4))
	id := e.submit(`{"OP_ID":"OP_STEPS"}`)
	s1.gates[2].wait(t)

	snap := filepath.Join(t.TempDir(), "crash.db")
	if err := e.st.Backup(ctxT(t), snap); err != nil {
		t.Fatal(err)
	}
	other := &env{t: t, path: snap, runner: newRunner()}
	other.st = openStore(t, snap)
	t.Cleanup(other.close)
	s2 := newStepper()
	other.runner.on("OP_STEPS", s2.fn(4))
	other.start()
	other.waitStatus(id, StatusSuccess)
	if s2.get(s2.runs, 0)+s2.get(s2.runs, 1) != 0 || s2.get(s2.runs, 2) != 1 || s2.get(s2.runs, 3) != 1 {
		t.Errorf("resumed steps %v", s2.runs)
	}
	if r := other.runner.recoveries(); len(r) != 1 || !slices.Equal(r[0].Locks, webLock) {
		t.Errorf("recoveries %+v", r)
	}
	jsonEq(t, other.query(logged, "opresult")[0], `["logged"]`)
	entry := other.query(logged, "oplog")[0].([]any)[0].([]any)[0].([]any)
	if entry[2] != "message" {
		t.Errorf("log entry %v", entry)
	}
	jsonEq(t, entry[3], `"hello"`)
	if got := logSerials(t, other, logged); !slices.Equal(got[0], []int64{1}) {
		t.Errorf("finished job's log after crash: %v", got)
	}
	newID := other.submit(`{"OP_ID":"OP_NOOP"}`)
	if newID <= id {
		t.Errorf("new id %d not above %d", newID, id)
	}
	kv, err := other.st.Get(ctxT(t), DefaultPrefix+"idblock")
	if err != nil || kv == nil {
		t.Fatal("no id block", err)
	}
	if lim, _ := strconv.ParseInt(string(kv.Value), 10, 64); lim <= newID {
		t.Errorf("id block %d not beyond handed-out id %d", lim, newID)
	}
	s1.gates[2].open()
	e.waitStatus(id, StatusSuccess)
}

func TestRecoverWaitingWithLocksAndFailures(t *testing.T) {
	e := newEnv(t, nil)
	g := newGate()
	e.runner.on("OP_LOCKED", func(ctx context.Context, h *OpHandle) (any, error) {
		if err := h.RecordLocks(ctx, []string{"node:shared:n1"}); err != nil {
			return nil, err
		}
		return nil, g.pass(ctx) // holds its locks, never reaches SetRunning
	})
	s := newStepper()
	s.gates[0] = newGate()
	e.runner.on("OP_STEPS", s.fn(2))
	waiting := e.submit(`{"OP_ID":"OP_LOCKED"}`)
	g.wait(t)
	failing := e.submit(`{"OP_ID":"OP_STEPS"}`, `{"OP_ID":"OP_NOOP"}`)
	s.gates[0].wait(t)
	killed := e.submit(`{"OP_ID":"OP_STEPS"}`)
	s.gates[0].wait(t)
	if ok, _, err := e.q.Cancel(ctxT(t), killed, true); !ok || err != nil {
		t.Fatal("kill", ok, err)
	}

	e.restart()
	e.runner.recoverFn = func(h *OpHandle) error {
		if h.JobID() == failing {
			return ecode.Errorf(ecode.State, "lock lost")
		}
		return nil
	}
	e.runner.on("OP_LOCKED", func(ctx context.Context, h *OpHandle) (any, error) {
		if h.Resumed() {
			return nil, fmt.Errorf("waiting op reported as resumed")
		}
		if err := h.SetRunning(ctx); err != nil {
			return nil, err
		}
		return "got it", nil
	})
	e.start()
	rec := e.runner.recoveries()
	slices.SortFunc(rec, func(a, b recoveredOp) int { return int(a.Job - b.Job) })
	if len(rec) != 2 || rec[0].Job != waiting || rec[0].Resumed || !slices.Equal(rec[0].Locks, []string{"node:shared:n1"}) || rec[1].Job != failing {
		t.Errorf("recoveries %+v", rec)
	}
	e.waitStatus(waiting, StatusSuccess)
	jsonEq(t, e.query(failing, "status", "opresult"),
		`["error",[["OpPrereqError",["lock lost","wrong_state"]],["OpExecError",["Preceding opcode failed"]]]]`)
	jsonEq(t, e.query(killed, "status", "opresult"), `["canceled",["Job canceled by request"]]`)
}

func TestRecoverBeforeAdmittingJobs(t *testing.T) {
	e := newEnv(t, func(o *Options) { o.MaxRunning = func() int { return 1 } })
	s := newStepper()
	s.gates[0] = newGate()
	e.runner.on("OP_STEPS", s.fn(1))
	running := e.submit(`{"OP_ID":"OP_STEPS"}`)
	s.gates[0].wait(t)
	// Queued behind it: at the next start it must not run before the
	// running op's locks are back.
	queued := e.submit(`{"OP_ID":"OP_NOOP"}`)
	e.close()
	e.st = openStore(t, e.path)
	e.runner = newRunner()
	e.opts.Store, e.opts.Runner = e.st, e.runner
	q, err := New(e.opts)
	if err != nil {
		t.Fatal(err)
	}
	release := make(chan struct{})
	inRecover := make(chan struct{})
	e.runner.recoverFn = func(h *OpHandle) error {
		close(inRecover)
		<-release
		return nil
	}
	e.runner.on("OP_STEPS", newStepper().fn(1))
	started := make(chan error, 1)
	go func() { started <- q.Start(ctxT(t)) }()
	recv(t, inRecover, "Recover was not called")
	if _, err := q.Submit(ctxT(t), []json.RawMessage{op(`{"OP_ID":"OP_NOOP"}`)}); err == nil {
		t.Error("a job was admitted during recovery")
	}
	if got := e.runner.startOrder(); len(got) != 0 {
		t.Errorf("jobs ran during recovery: %v", got)
	}
	close(release)
	if err := recv(t, started, "Start did not return"); err != nil {
		t.Fatal(err)
	}
	e.q = q
	e.waitStatus(running, StatusSuccess)
	e.waitStatus(queued, StatusSuccess)
	if got := e.runner.startOrder(); !slices.Equal(got, []int64{running, queued}) {
		t.Errorf("start order %v", got)
	}
}
