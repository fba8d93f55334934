package jobqueue

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/corral/corral/internal/ecode"
)

func TestDependencies(t *testing.T) {
	e := newEnv(t, func(o *Options) { o.MaxRunning = func() int { return 1 } })
	e.runner.on("OP_FAIL", func(ctx context.Context, h *OpHandle) (any, error) {
		return nil, ecode.ExecErrorf("failed on purpose")
	})
	g := newGate()
	e.runner.on("OP_BLOCK", func(ctx context.Context, h *OpHandle) (any, error) { return nil, g.pass(ctx) })

	ok := e.submit(`{"OP_ID":"OP_NOOP"}`)
	failed := e.submit(`{"OP_ID":"OP_FAIL"}`)
	e.waitStatus(failed, StatusError)
	// A job canceled while queued: hold the only run slot meanwhile.
	blocker := e.submit(`{"OP_ID":"OP_BLOCK"}`)
	g.wait(t)
	canceled := e.submit(`{"OP_ID":"OP_NOOP"}`)
	if okc, msg, err := e.q.Cancel(ctxT(t), canceled, false); !okc || err != nil || msg != fmt.Sprintf("Dequeued job %d", canceled) {
		t.Fatalf("cancel: %v %q %v", okc, msg, err)
	}
	// A dependency on a still running job keeps the dependent queued.
	waiter := e.submit(fmt.Sprintf(`{"OP_ID":"OP_NOOP","depends":[[%d,[]]]}`, blocker))
	if st := e.q.Stats(); st.Blocked != 1 {
		t.Errorf("blocked = %d, want 1", st.Blocked)
	}
	g.open()
	e.waitStatus(blocker, StatusSuccess)
	e.waitStatus(waiter, StatusSuccess)

	archivedOK := e.submit(`{"OP_ID":"OP_NOOP"}`)
	e.waitStatus(archivedOK, StatusSuccess)
	if a, err := e.q.Archive(ctxT(t), archivedOK); !a || err != nil {
		t.Fatalf("archive: %v %v", a, err)
	}

	dep := func(id int64, statuses string) string {
		return fmt.Sprintf(`{"OP_ID":"OP_NOOP","depends":[[%d,%s]]}`, id, statuses)
	}
	tests := []struct {
		name   string
		input  string
		status Status
		result string
	}{
		{"success wanted", dep(ok, `["success"]`), StatusSuccess, `[null]`},
		{"any final", dep(failed, `[]`), StatusSuccess, `[null]`},
		{"wrong status", dep(failed, `["success", "canceled"]`), StatusError, fmt.Sprintf(
			`[["OpExecError",["Dependency job %d finished with status 'error', not one of 'success, canceled' as required"]]]`, failed)},
		{"canceled not accepted", dep(canceled, `["success","error"]`), StatusCanceled, `["Job canceled by request"]`},
		{"canceled accepted", dep(canceled, `["canceled"]`), StatusSuccess, `[null]`},
		{"unknown job", dep(987654, `[]`), StatusError, `[["OpExecError",["Dependency error: Job 987654 not found"]]]`},
		{"archived job", dep(archivedOK, `["success"]`), StatusSuccess, `[null]`},
	}
	for _, tc := range tests {
		id := e.submit(tc.input)
		if st := e.waitStatus(id, StatusSuccess, StatusError, StatusCanceled); st != tc.status {
			t.Errorf("%s: status %s, want %s", tc.name, st, tc.status)
		}
		jsonEq(t, e.query(id, "opresult")[0], tc.result)
		if ts := e.query(id, "start_ts", "end_ts", "opstart"); ts[0] == nil || ts[1] == nil || ts[2].([]any)[0] == nil {
			t.Errorf("%s: timestamps %v", tc.name, ts)
		}
	}

	// Self-dependency: ids are consecutive here, so the next id is known.
	last := e.submit(`{"OP_ID":"OP_NOOP"}`)
	self := e.submit(fmt.Sprintf(`{"OP_ID":"OP_NOOP","depends":[[%d,[]]]}`, last+1))
	if self != last+1 {
		t.Fatalf("ids not consecutive: %d then %d", last, self)
	}
	e.waitStatus(self, StatusError)
	jsonEq(t, e.query(self, "opresult")[0], `[["OpExecError",["Job can't depend on itself"]]]`)

	// A failed dependency in the second op fails it and leaves the first done.
	two := e.submit(`{"OP_ID":"OP_NOOP"}`, dep(failed, `["success"]`))
	e.waitStatus(two, StatusError)
	jsonEq(t, e.query(two, "opstatus")[0], `["success","error"]`)
}

func TestRelativeDependsInSubmitMany(t *testing.T) {
	e := newEnv(t, nil)
	e.runner.on("OP_FAIL", func(ctx context.Context, h *OpHandle) (any, error) { return nil, errBoom })
	jobs := [][]json.RawMessage{
		{op(`{"OP_ID":"OP_FAIL"}`)},
		{op(`{"OP_ID":"OP_NOOP","depends":[[-1,["error"]]]}`)},
		{op(`{"OP_ID":"bad"`)}, // refused, but keeps its position
		{op(`{"OP_ID":"OP_NOOP","depends":[[-3,["success"]],[-2,["success"]]]}`)},
		{op(`{"OP_ID":"OP_NOOP","depends":[[-5,[]]]}`)},
	}
	res, err := e.q.SubmitMany(ctxT(t), jobs)
	if err != nil {
		t.Fatal(err)
	}
	if !res[0].OK || !res[1].OK || res[2].OK || !res[3].OK || res[4].OK {
		t.Fatalf("results %+v", res)
	}
	if res[4].Err == nil || res[4].Err.Error() != "Unable to resolve relative job ID -5" {
		t.Errorf("out of range relative id: %v", res[4].Err)
	}
	if res[1].JobID != res[0].JobID+1 || res[3].JobID != res[0].JobID+3 {
		t.Errorf("ids %d %d %d", res[0].JobID, res[1].JobID, res[3].JobID)
	}
	e.waitStatus(res[1].JobID, StatusSuccess)
	e.waitStatus(res[3].JobID, StatusError)
	jsonEq(t, e.query(res[3].JobID, "opresult")[0], fmt.Sprintf(
		`[["OpExecError",["Dependency job %d finished with status 'error', not one of 'success' as required"]]]`, res[0].JobID))
}

func TestCancelStates(t *testing.T) {
	e := newEnv(t, func(o *Options) { o.MaxRunning = func() int { return 2 } })
	ctx := ctxT(t)

	// Unknown.
	if _, _, err := e.q.Cancel(ctx, 4242, false); !isKind(err, ecode.JobLost) || ecode.ClassOf(err) != ecode.NoEnt {
		t.Errorf("unknown job: %v", err)
	}

	// Waiting for locks: the op context is cancelled and the job ends canceled.
	lockWait := newGate()
	e.runner.on("OP_LOCKWAIT", func(ctx context.Context, h *OpHandle) (any, error) {
		if err := h.RecordLocks(ctx, []string{"instance:exclusive:web1"}); err != nil {
			return nil, err
		}
		lockWait.reached <- struct{}{}
		<-ctx.Done()
		if !h.Canceled() {
			return nil, fmt.Errorf("ctx ended but the handle says not canceled")
		}
		return nil, ctx.Err()
	})
	w := e.submit(`{"OP_ID":"OP_LOCKWAIT"}`, `{"OP_ID":"OP_NOOP"}`)
	lockWait.wait(t)
	okc, msg, err := e.q.Cancel(ctx, w, false)
	if !okc || err != nil || msg != fmt.Sprintf("Job %d will be canceled", w) {
		t.Errorf("cancel waiting: %v %q %v", okc, msg, err)
	}
	e.waitStatus(w, StatusCanceled)
	jsonEq(t, e.query(w, "opstatus", "opresult"), `[["canceled","canceled"],["Job canceled by request","Job canceled by request"]]`)
	if rec := storedRecord(t, e.st, e.q.jobKey(w)); len(rec.Ops[0].Locks) != 0 || rec.End == nil {
		t.Errorf("stored after cancel: locks %v end %v", rec.Ops[0].Locks, rec.End)
	}

	// Running: refused without kill; with kill it ends at the next step.
	s := newStepper()
	s.gates[1] = newGate()
	e.runner.on("OP_STEPS", s.fn(3))
	r := e.submit(`{"OP_ID":"OP_STEPS"}`)
	s.gates[1].wait(t)
	okc, msg, err = e.q.Cancel(ctx, r, false)
	if okc || err != nil || msg != "Job no longer waiting, can't cancel" {
		t.Errorf("cancel running: %v %q %v", okc, msg, err)
	}
	okc, msg, err = e.q.Cancel(ctx, r, true)
	if !okc || err != nil {
		t.Errorf("kill running: %v %q %v", okc, msg, err)
	}
	if st := e.query(r, "status")[0]; st != "canceling" {
		t.Errorf("status after kill request: %v", st)
	}
	if okc, _, _ := e.q.Cancel(ctx, r, true); !okc {
		t.Error("second cancel of a canceling job refused")
	}
	s.gates[1].open()
	e.waitStatus(r, StatusCanceled)
	if s.get(s.commits, 0) != 1 || s.get(s.commits, 1) != 0 || s.get(s.runs, 2) != 0 {
		t.Errorf("commits %v runs %v", s.commits, s.runs)
	}
	if rec := storedRecord(t, e.st, e.q.jobKey(r)); rec.Ops[0].Cursor != 1 || rec.Ops[0].Status != StatusCanceled {
		t.Errorf("stored cursor %d status %s", rec.Ops[0].Cursor, rec.Ops[0].Status)
	}

	// Finalized and archived.
	okc, msg, err = e.q.Cancel(ctx, r, false)
	if okc || err != nil || msg != fmt.Sprintf("Job %d is finished", r) {
		t.Errorf("cancel finished: %v %q %v", okc, msg, err)
	}
	if a, err := e.q.Archive(ctx, r); !a || err != nil {
		t.Fatal("archive", a, err)
	}
	okc, msg, err = e.q.Cancel(ctx, r, false)
	if okc || err != nil || msg != fmt.Sprintf("Job %d is finished", r) {
		t.Errorf("cancel archived: %v %q %v", okc, msg, err)
	}
}

func TestCancelSuspendedAndReady(t *testing.T) {
	e := newEnv(t, func(o *Options) { o.MaxRunning = func() int { return 1 } })
	ctx := ctxT(t)
	var runs, undone atomic.Int32
	e.runner.on("OP_PARK", func(ctx context.Context, h *OpHandle) (any, error) {
		runs.Add(1)
		if h.Canceled() {
			// Run once more to undo what it began.
			undone.Add(1)
			return nil, ErrCanceled
		}
		return nil, h.Suspend(ctx, time.Time{}, "ev-"+fmt.Sprint(h.JobID()))
	})
	g := newGate()
	e.runner.on("OP_BLOCK", func(ctx context.Context, h *OpHandle) (any, error) { return nil, g.pass(ctx) })

	// Parked: it began its work, so the runner is called once more,
	// canceling, to undo it; then the job ends canceled.
	p := e.submit(`{"OP_ID":"OP_PARK"}`)
	waitParked(t, e.q, 1)
	okc, msg, err := e.q.Cancel(ctx, p, false)
	if !okc || err != nil {
		t.Fatalf("cancel parked: %v %q %v", okc, msg, err)
	}
	e.waitStatus(p, StatusCanceled)
	if n := undone.Load(); n != 1 {
		t.Errorf("the canceled parked op was undone %d times, want 1", n)
	}
	e.q.Notify(fmt.Sprint("ev-", p)) // no effect any more

	// Ready for a slot (woken while another job holds the only slot).
	p2 := e.submit(`{"OP_ID":"OP_PARK"}`)
	waitParked(t, e.q, 1)
	b := e.submit(`{"OP_ID":"OP_BLOCK"}`)
	g.wait(t)
	e.q.Notify(fmt.Sprint("ev-", p2))
	waitReady(t, e.q, 1)
	if okc, _, err := e.q.Cancel(ctx, p2, false); !okc || err != nil {
		t.Fatalf("cancel ready: %v %v", okc, err)
	}
	g.open()
	e.waitStatus(b, StatusSuccess)
	e.waitStatus(p2, StatusCanceled)
	// Each park op ran to park and once more to undo.
	if n, u := runs.Load(), undone.Load(); n != 4 || u != 2 {
		t.Errorf("park ops ran %d times (%d undoing), want 4 (2)", n, u)
	}
	// b's goroutine may still be on its way out after the final write.
	waitStats(t, e.q, func(s Stats) bool { return s.Executing == 0 })
	if st := e.q.Stats(); st.Suspended != 0 || st.Ready != 0 {
		t.Errorf("stats after: %+v", st)
	}
}

// waitParked and waitReady wait for a scheduler state that has no job
// notification of its own; they re-check on every change of any job and
// otherwise yield.
func waitParked(t *testing.T, q *Queue, n int) {
	t.Helper()
	waitStats(t, q, func(s Stats) bool { return s.Suspended == n && s.Executing == 0 })
}

func waitReady(t *testing.T, q *Queue, n int) {
	t.Helper()
	waitStats(t, q, func(s Stats) bool { return s.Ready == n })
}

func waitStats(t *testing.T, q *Queue, ok func(Stats) bool) {
	t.Helper()
	deadline := time.Now().Add(testTimeout)
	for !ok(q.Stats()) {
		if time.Now().After(deadline) {
			t.Fatalf("stats never matched: %+v", q.Stats())
		}
		time.Sleep(time.Millisecond)
	}
}

func TestArchiveAndAutoArchive(t *testing.T) {
	var mu sync.Mutex
	now := time.Unix(1800000000, 0)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	e := newEnv(t, func(o *Options) { o.Now = clock })
	ctx := ctxT(t)
	g := newGate()
	e.runner.on("OP_BLOCK", func(ctx context.Context, h *OpHandle) (any, error) { return nil, g.pass(ctx) })
	e.runner.on("OP_LOG", func(ctx context.Context, h *OpHandle) (any, error) {
		return "logged", h.Log(ctx, "message", "kept after archiving")
	})

	running := e.submit(`{"OP_ID":"OP_BLOCK"}`)
	g.wait(t)
	if a, err := e.q.Archive(ctx, running); a || err != nil {
		t.Errorf("archived a running job: %v %v", a, err)
	}
	old := e.submit(`{"OP_ID":"OP_LOG"}`)
	e.waitStatus(old, StatusSuccess)
	advance(2 * time.Hour)
	recent := e.submit(`{"OP_ID":"OP_NOOP"}`)
	e.waitStatus(recent, StatusSuccess)
	advance(30 * time.Minute)

	n, rem, err := e.q.AutoArchive(ctx, time.Hour, time.Minute)
	if n != 1 || rem != 0 || err != nil {
		t.Fatalf("auto-archive by age: %d %d %v", n, rem, err)
	}
	if e.q.lookup(old) != nil || e.q.lookup(recent) == nil {
		t.Error("wrong job archived")
	}
	if storedRecord(t, e.st, e.q.jobKey(old)) != nil || storedRecord(t, e.st, e.q.archiveKey(old)) == nil {
		t.Error("archived job not moved in the store")
	}
	row := e.query(old, "id", "status", "archived", "opresult", "oplog")
	jsonEq(t, row, fmt.Sprintf(`[%d,"success",true,["logged"],[[[1,[1800000000,0],"message","kept after archiving"]]]]`, old))
	all, err := e.q.Query(ctx, nil, []string{"id"})
	if err != nil {
		t.Fatal(err)
	}
	jsonEq(t, all, fmt.Sprintf(`[[%d],[%d]]`, running, recent))
	info, logs, changed, err := e.q.WaitForChange(ctx, old, []string{"status"}, []any{"success"}, -1, time.Hour)
	if err != nil || !changed || len(logs) != 1 || info[0] != "success" {
		t.Errorf("wait on archived: %v %v %v %v", info, logs, changed, err)
	}
	if a, err := e.q.Archive(ctx, old); a || err != nil {
		t.Errorf("archived twice: %v %v", a, err)
	}

	n, rem, err = e.q.AutoArchive(ctx, -1, time.Minute)
	if n != 1 || rem != 0 || err != nil {
		t.Fatalf("auto-archive all: %d %d %v", n, rem, err)
	}
	g.open()
	e.waitStatus(running, StatusSuccess)
	if a, err := e.q.Archive(ctx, running); !a || err != nil {
		t.Errorf("archive: %v %v", a, err)
	}
	if st := e.q.Stats(); len(st.ByStatus) != 0 {
		t.Errorf("jobs left: %+v", st)
	}

	// Archived jobs are not loaded at start but stay readable.
	e.restart()
	e.start()
	if len(e.q.jobs) != 0 {
		t.Errorf("archived jobs loaded: %d", len(e.q.jobs))
	}
	if got := e.query(recent, "archived", "status"); got[0] != true || got[1] != "success" {
		t.Errorf("archived job after restart: %v", got)
	}
}

func TestAutoArchiveTimeoutLeavesRemaining(t *testing.T) {
	e := newEnv(t, nil)
	var ids []int64
	for range 5 {
		ids = append(ids, e.submit(`{"OP_ID":"OP_NOOP"}`))
	}
	for _, id := range ids {
		e.waitStatus(id, StatusSuccess)
	}
	n, rem, err := e.q.AutoArchive(ctxT(t), -1, time.Nanosecond)
	if err != nil || n+rem != 5 || rem == 0 {
		t.Errorf("with an expired timeout: archived %d remaining %d err %v", n, rem, err)
	}
}
