package jobqueue

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/corral/corral/internal/ecode"
)

func TestSubmitRunQueryFields(t *testing.T) {
	fixed := time.Unix(1700000000, 123456000)
	e := newEnv(t, func(o *Options) {
		o.Now = func() time.Time { return fixed }
		o.Summary = func(opID string, in json.RawMessage) string { return strings.TrimPrefix(opID, "OP_") + "(x)" }
	})
	in0 := `{ "OP_ID": "OP_NOOP",  "result": {"a": [1, 2]}, "comment": "first" }`
	in1 := `{"OP_ID":"OP_NOOP","result":"two","priority":-10}`
	id := e.submit(in0, in1)
	if id < 1 {
		t.Fatalf("job id %d", id)
	}
	if st := e.waitStatus(id, StatusSuccess, StatusError); st != StatusSuccess {
		t.Fatalf("status %s", st)
	}
	row := e.query(id, Fields()...)
	get := func(f string) any { return row[slices.Index(Fields(), f)] }
	if get("id") != id || get("status") != "success" || get("archived") != false {
		t.Errorf("id/status/archived = %v %v %v", get("id"), get("status"), get("archived"))
	}
	ops := get("ops").([]any)
	if string(ops[0].(json.RawMessage)) != in0 || string(ops[1].(json.RawMessage)) != in1 {
		t.Errorf("ops not kept byte for byte: %s / %s", ops[0], ops[1])
	}
	jsonEq(t, get("opresult"), `[{"a":[1,2]},"two"]`)
	jsonEq(t, get("opstatus"), `["success","success"]`)
	jsonEq(t, get("oppriority"), `[0,-10]`)
	jsonEq(t, get("summary"), `["NOOP(x)","NOOP(x)"]`)
	jsonEq(t, get("priority"), `0`) // no pending op left: the default
	ts := `[1700000000,123456]`
	for _, f := range []string{"received_ts", "start_ts", "end_ts"} {
		jsonEq(t, get(f), ts)
	}
	for _, f := range []string{"opstart", "opexec", "opend"} {
		jsonEq(t, get(f), "["+ts+","+ts+"]")
	}
	jsonEq(t, get("oplog"), `[[],[]]`)

	// The stored record keeps the input verbatim too, and survives a reload.
	rec := storedRecord(t, e.st, e.q.jobKey(id))
	if string(rec.Ops[0].Input) != in0 {
		t.Errorf("stored input %s", rec.Ops[0].Input)
	}

	if _, err := e.q.Query(ctxT(t), []int64{id}, []string{"status", "bogus"}); ecode.ClassOf(err) != ecode.Inval {
		t.Errorf("unknown field: %v", err)
	}
	rows, err := e.q.Query(ctxT(t), []int64{id + 1000}, []string{"id"})
	if err != nil || len(rows) != 1 || rows[0] != nil {
		t.Errorf("unknown job row = %v, %v", rows, err)
	}
}

func TestOpErrorEncoding(t *testing.T) {
	e := newEnv(t, nil)
	e.runner.on("OP_PREREQ", func(ctx context.Context, h *OpHandle) (any, error) {
		return nil, ecode.Errorf(ecode.NoEnt, "Instance 'x' not known")
	})
	e.runner.on("OP_PLAIN", func(ctx context.Context, h *OpHandle) (any, error) {
		if err := h.SetRunning(ctx); err != nil {
			return nil, err
		}
		return nil, fmt.Errorf("wrapped: %w", errBoom)
	})
	e.runner.on("OP_PANIC", func(ctx context.Context, h *OpHandle) (any, error) { panic("kaboom") })
	e.runner.on("OP_BADRESULT", func(ctx context.Context, h *OpHandle) (any, error) { return func() {}, nil })

	tests := []struct {
		ops        []string
		wantResult string
		wantStatus string
	}{
		{[]string{`{"OP_ID":"OP_NOOP"}`, `{"OP_ID":"OP_PREREQ"}`, `{"OP_ID":"OP_NOOP"}`},
			`[null,["OpPrereqError",["Instance 'x' not known","unknown_entity"]],["OpExecError",["Preceding opcode failed"]]]`,
			`["success","error","error"]`},
		{[]string{`{"OP_ID":"OP_PLAIN"}`}, `[["OpExecError",["wrapped: boom"]]]`, `["error"]`},
		{[]string{`{"OP_ID":"OP_PANIC"}`}, `[["OpExecError",["internal error: kaboom"]]]`, `["error"]`},
		{[]string{`{"OP_ID":"OP_UNKNOWN"}`}, `[["OpExecError",["no test handler for OP_UNKNOWN"]]]`, `["error"]`},
	}
	for _, tc := range tests {
		id := e.submit(tc.ops...)
		e.waitStatus(id, StatusError)
		row := e.query(id, "opresult", "opstatus")
		jsonEq(t, row[0], tc.wantResult)
		jsonEq(t, row[1], tc.wantStatus)
	}
	id := e.submit(`{"OP_ID":"OP_BADRESULT"}`)
	e.waitStatus(id, StatusError)
	res := e.query(id, "opresult")[0].([]any)
	if b, _ := json.Marshal(res[0]); !strings.Contains(string(b), "cannot encode the result") {
		t.Errorf("unencodable result: %s", b)
	}
}

func TestJobStatusAndPriority(t *testing.T) {
	tests := []struct {
		ops  []Status
		prio []int
		want Status
		jp   int
	}{
		{[]Status{StatusQueued, StatusQueued}, []int{0, -5}, StatusQueued, -5},
		{[]Status{StatusSuccess, StatusQueued}, []int{-10, 3}, StatusQueued, 3},
		{[]Status{StatusSuccess, StatusWaiting}, []int{0, 0}, StatusWaiting, 0},
		{[]Status{StatusSuccess, StatusRunning, StatusQueued}, []int{-20, 5, 2}, StatusRunning, 2},
		{[]Status{StatusSuccess, StatusSuccess}, []int{1, 2}, StatusSuccess, 0},
		{[]Status{StatusSuccess, StatusError, StatusError}, []int{0, 0, 0}, StatusError, 0},
		{[]Status{StatusCanceling, StatusCanceling}, []int{4, 4}, StatusCanceling, 4},
		{[]Status{StatusRunning, StatusCanceled}, []int{0, 0}, StatusCanceled, 0},
		{[]Status{StatusCanceled, StatusCanceled}, []int{0, 0}, StatusCanceled, 0},
	}
	for _, tc := range tests {
		r := &jobRecord{}
		for i, s := range tc.ops {
			r.Ops = append(r.Ops, opRecord{Status: s, Priority: tc.prio[i]})
		}
		if got := r.status(); got != tc.want {
			t.Errorf("%v: status %s, want %s", tc.ops, got, tc.want)
		}
		if got := r.priority(); got != tc.jp {
			t.Errorf("%v: priority %d, want %d", tc.ops, got, tc.jp)
		}
	}
	order := []Status{StatusQueued, StatusWaiting, StatusCanceling, StatusRunning, StatusCanceled, StatusSuccess, StatusError}
	for i, s := range order {
		if s.rank() != i || s.Finalized() != (i > 3) {
			t.Errorf("%s: rank %d finalized %v", s, s.rank(), s.Finalized())
		}
	}
}

func TestPriorityOrderAndFIFO(t *testing.T) {
	e := newEnv(t, func(o *Options) { o.MaxRunning = func() int { return 1 } })
	g := newGate()
	e.runner.on("OP_BLOCK", func(ctx context.Context, h *OpHandle) (any, error) {
		return nil, g.pass(ctx)
	})
	blocker := e.submit(`{"OP_ID":"OP_BLOCK"}`)
	g.wait(t)
	low := e.submit(`{"OP_ID":"OP_NOOP","priority":10}`)
	norm1 := e.submit(`{"OP_ID":"OP_NOOP"}`)
	high := e.submit(`{"OP_ID":"OP_NOOP","priority":-10}`)
	norm2 := e.submit(`{"OP_ID":"OP_NOOP","priority":0}`)
	raised := e.submit(`{"OP_ID":"OP_NOOP","priority":19}`)
	ok, msg, err := e.q.ChangePriority(ctxT(t), raised, -20)
	if err != nil || !ok || msg != fmt.Sprintf("Priorities of pending opcodes for job %d have been changed to -20", raised) {
		t.Fatalf("change priority: %v %q %v", ok, msg, err)
	}
	if got := e.query(raised, "priority", "oppriority"); got[0] != -20 {
		t.Errorf("priority after change: %v", got)
	}
	if st := e.q.Stats(); st.ByStatus[StatusQueued] != 5 || st.Executing != 1 || st.Ready != 5 {
		t.Errorf("stats %+v", st)
	}
	g.open()
	for _, id := range []int64{blocker, low, norm1, high, norm2, raised} {
		e.waitStatus(id, StatusSuccess)
	}
	want := []int64{blocker, raised, high, norm1, norm2, low}
	if got := e.runner.startOrder(); !slices.Equal(got, want) {
		t.Errorf("run order %v, want %v", got, want)
	}
	ok, msg, err = e.q.ChangePriority(ctxT(t), low, 0)
	if ok || msg != fmt.Sprintf("Job %d is finished", low) || err != nil {
		t.Errorf("change finished: %v %q %v", ok, msg, err)
	}
	if _, _, err := e.q.ChangePriority(ctxT(t), low, 99); ecode.ClassOf(err) != ecode.Inval {
		t.Errorf("bad priority: %v", err)
	}
	if _, _, err := e.q.ChangePriority(ctxT(t), 99999, 0); !isKind(err, ecode.JobLost) {
		t.Errorf("unknown job: %v", err)
	}
}

func isKind(err error, k ecode.Kind) bool {
	e, ok := ecode.As(err)
	return ok && e.Kind == k
}

func TestMaxRunningIsLive(t *testing.T) {
	var mu sync.Mutex
	limit := 1
	e := newEnv(t, func(o *Options) {
		o.MaxRunning = func() int { mu.Lock(); defer mu.Unlock(); return limit }
	})
	g := newGate()
	e.runner.on("OP_BLOCK", func(ctx context.Context, h *OpHandle) (any, error) { return nil, g.pass(ctx) })
	a := e.submit(`{"OP_ID":"OP_BLOCK"}`)
	b := e.submit(`{"OP_ID":"OP_BLOCK"}`)
	g.wait(t)
	if st := e.q.Stats(); st.Executing != 1 || st.Ready != 1 {
		t.Fatalf("with limit 1: %+v", st)
	}
	mu.Lock()
	limit = 2
	mu.Unlock()
	c := e.submit(`{"OP_ID":"OP_NOOP"}`) // any scheduling round reads the new limit
	g.wait(t)
	g.open()
	for _, id := range []int64{a, b, c} {
		e.waitStatus(id, StatusSuccess)
	}
}

func TestSubmitValidation(t *testing.T) {
	e := newEnv(t, func(o *Options) {
		o.Validate = func(opID string, _ json.RawMessage) error {
			if opID == "OP_NOPE" {
				return &ecode.Error{Kind: ecode.OpCodeUnknown, Class: ecode.Inval, Msg: "Unknown opcode OP_NOPE"}
			}
			return nil
		}
	})
	bad := [][]string{
		{},
		{`[1]`},
		{`{"priority": 1}`},
		{`{"OP_ID": 5}`},
		{`{"OP_ID":"OP_NOOP","priority":"high"}`},
		{`{"OP_ID":"OP_NOOP","priority":20}`},
		{`{"OP_ID":"OP_NOOP","depends":[[1,["running"]]]}`},
		{`{"OP_ID":"OP_NOOP","depends":[[-1,[]]]}`},
		{`{"OP_ID":"OP_NOPE"}`},
		{`{"OP_ID":"OP_NOOP"} trailing`},
	}
	for _, ops := range bad {
		raws := make([]json.RawMessage, len(ops))
		for i, s := range ops {
			raws[i] = op(s)
		}
		if id, err := e.q.Submit(ctxT(t), raws); err == nil {
			t.Errorf("%v accepted as job %d", ops, id)
		} else if ecode.ClassOf(err) != ecode.Inval {
			t.Errorf("%v: error %v has class %s", ops, err, ecode.ClassOf(err))
		}
	}
	_, err := e.q.Submit(ctxT(t), []json.RawMessage{op(`{"OP_ID":"OP_NOOP","depends":[[-1,[]]]}`)})
	if err == nil || err.Error() != "Unable to resolve relative job ID -1" {
		t.Errorf("relative id in a single submit: %v", err)
	}
	_, err = e.q.Submit(ctxT(t), []json.RawMessage{op(`{"OP_ID":"OP_NOPE"}`)})
	if !isKind(err, ecode.OpCodeUnknown) {
		t.Errorf("validate error not passed through: %v", err)
	}
}

func TestDrainAndQueueSize(t *testing.T) {
	e := newEnv(t, func(o *Options) {
		o.QueueSize = func() int { return 3 }
		o.MaxRunning = func() int { return 1 }
	})
	ctx := ctxT(t)
	noop := []json.RawMessage{op(`{"OP_ID":"OP_NOOP"}`)}
	if err := e.q.SetDrained(ctx, true); err != nil {
		t.Fatal(err)
	}
	if !e.q.Drained() {
		t.Fatal("not drained")
	}
	_, err := e.q.Submit(ctx, noop)
	if !isKind(err, ecode.JobQueueDrainErr) || ecode.HTTPStatus(err) != http.StatusServiceUnavailable {
		t.Errorf("drained submit: %v", err)
	}
	if _, err := e.q.SubmitMany(ctx, [][]json.RawMessage{noop}); !isKind(err, ecode.JobQueueDrainErr) {
		t.Errorf("drained submit many: %v", err)
	}
	id, err := e.q.SubmitToDrained(ctx, noop)
	if err != nil {
		t.Fatalf("submit to drained: %v", err)
	}
	e.waitStatus(id, StatusSuccess)

	// The flag is durable.
	e.restart()
	e.start()
	if !e.q.Drained() {
		t.Fatal("drain flag lost across restart")
	}
	if err := e.q.SetDrained(ctx, false); err != nil {
		t.Fatal(err)
	}

	g := newGate()
	e.runner.on("OP_BLOCK", func(ctx context.Context, h *OpHandle) (any, error) { return nil, g.pass(ctx) })
	block := []json.RawMessage{op(`{"OP_ID":"OP_BLOCK"}`)}
	res, err := e.q.SubmitMany(ctx, [][]json.RawMessage{block, noop, noop, noop, noop})
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range res {
		if i < 3 != r.OK {
			t.Errorf("job %d of the batch: %+v", i, r)
		}
		if i >= 3 && (!isKind(r.Err, ecode.JobQueueFull) || ecode.HTTPStatus(r.Err) != http.StatusServiceUnavailable) {
			t.Errorf("job %d: want JobQueueFull, got %v", i, r.Err)
		}
	}
	if _, err := e.q.Submit(ctx, noop); !isKind(err, ecode.JobQueueFull) {
		t.Errorf("full queue: %v", err)
	}
	g.wait(t)
	g.open()
	for _, r := range res[:3] {
		e.waitStatus(r.JobID, StatusSuccess)
	}
	if _, err := e.q.Submit(ctx, noop); err != nil {
		t.Errorf("room again after jobs finished: %v", err)
	}
}

func TestSubmitManyChunksAndConsecutiveIDs(t *testing.T) {
	e := newEnv(t, func(o *Options) { o.MaxRunning = func() int { return 50 } })
	n := 300 // more than one transaction's worth
	jobs := make([][]json.RawMessage, n)
	for i := range jobs {
		if i == 0 {
			jobs[i] = []json.RawMessage{op(`{"OP_ID":"OP_NOOP","result":0}`)}
			continue
		}
		jobs[i] = []json.RawMessage{op(fmt.Sprintf(`{"OP_ID":"OP_NOOP","result":%d,"depends":[[-1,["success"]]]}`, i))}
	}
	res, err := e.q.SubmitMany(ctxT(t), jobs)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range res {
		if !r.OK || r.Err != nil || r.JobID != res[0].JobID+int64(i) {
			t.Fatalf("job %d: %+v (first id %d)", i, r, res[0].JobID)
		}
	}
	last := res[n-1].JobID
	e.waitStatus(last, StatusSuccess)
	// Each job depended on the previous one, so they ran in order.
	order := e.runner.startOrder()
	if len(order) != n || !slices.IsSorted(order) {
		t.Errorf("chain ran out of order: %v", order)
	}
	row := e.query(last, "ops")
	if !strings.Contains(string(row[0].([]any)[0].(json.RawMessage)), `[[-1,["success"]]]`) {
		t.Errorf("input changed: %s", row[0])
	}
}

func TestLogsSplitPerOp(t *testing.T) {
	e := newEnv(t, nil)
	e.runner.on("OP_LOG", func(ctx context.Context, h *OpHandle) (any, error) {
		if err := h.SetRunning(ctx); err != nil {
			return nil, err
		}
		for i := range h.OpIndex() + 1 {
			if err := h.Log(ctx, "message", fmt.Sprintf("op %d line %d", h.OpIndex(), i)); err != nil {
				return nil, err
			}
		}
		return nil, h.Log(ctx, "remote-import", map[string]any{"x": h.OpIndex()})
	})
	id := e.submit(`{"OP_ID":"OP_LOG"}`, `{"OP_ID":"OP_NOOP"}`, `{"OP_ID":"OP_LOG"}`)
	e.waitStatus(id, StatusSuccess)
	logs := e.query(id, "oplog")[0].([]any)
	if len(logs) != 3 {
		t.Fatalf("oplog has %d lists", len(logs))
	}
	serials := func(l any) []int64 {
		var out []int64
		for _, e := range l.([]any) {
			out = append(out, e.([]any)[0].(int64))
		}
		return out
	}
	if got := serials(logs[0]); !slices.Equal(got, []int64{1, 2}) {
		t.Errorf("op 0 serials %v", got)
	}
	if got := serials(logs[1]); len(got) != 0 {
		t.Errorf("op 1 serials %v", got)
	}
	if got := serials(logs[2]); !slices.Equal(got, []int64{3, 4, 5, 6}) {
		t.Errorf("op 2 serials %v", got)
	}
	entry := logs[2].([]any)[3].([]any)
	if entry[2] != "remote-import" {
		t.Errorf("entry type %v", entry[2])
	}
	jsonEq(t, entry[3], `{"x":2}`)
	jsonEq(t, logs[0].([]any)[0].([]any)[3], `"op 0 line 0"`)
}

func TestStopRefusesAndStartTwice(t *testing.T) {
	e := newEnv(t, nil)
	if err := e.q.Start(ctxT(t)); err == nil {
		t.Error("second Start accepted")
	}
	q := e.q
	q.Stop()
	q.Stop() // idempotent
	if _, err := q.Submit(ctxT(t), []json.RawMessage{op(`{"OP_ID":"OP_NOOP"}`)}); !errors.Is(err, errStopped) {
		t.Errorf("submit after stop: %v", err)
	}
	if err := q.Start(ctxT(t)); err == nil {
		t.Error("Start after Stop accepted")
	}
	q2, err := New(Options{Store: e.st, Runner: e.runner})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := q2.Submit(ctxT(t), []json.RawMessage{op(`{"OP_ID":"OP_NOOP"}`)}); !errors.Is(err, errNotStarted) {
		t.Errorf("submit before start: %v", err)
	}
	if _, err := New(Options{Runner: e.runner}); err == nil {
		t.Error("New without a store")
	}
	if _, err := New(Options{Store: e.st}); err == nil {
		t.Error("New without a runner")
	}
}
