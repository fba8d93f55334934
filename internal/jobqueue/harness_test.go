package jobqueue

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/corral/corral/internal/store"
	"github.com/corral/corral/internal/store/boltstore"
)

// testTimeout bounds every wait in the tests; they never sleep to
// synchronise.
const testTimeout = 20 * time.Second

// opFunc is what the fake runner does for one OP_ID.
type opFunc func(ctx context.Context, h *OpHandle) (any, error)

// fakeRunner is a test double of the logical-unit layer: it dispatches on
// OP_ID to functions the test installs and records what it was asked.
type fakeRunner struct {
	mu        sync.Mutex
	ops       map[string]opFunc
	started   []int64 // job ids, in the order their first RunOp began
	recovered []recoveredOp
	recoverFn func(h *OpHandle) error
}

type recoveredOp struct {
	Job     int64
	Op      int
	Locks   []string
	Resumed bool
}

func newRunner() *fakeRunner {
	r := &fakeRunner{ops: map[string]opFunc{}}
	r.on("OP_NOOP", func(ctx context.Context, h *OpHandle) (any, error) {
		if err := h.SetRunning(ctx); err != nil {
			return nil, err
		}
		var in struct {
			Result any `json:"result"`
		}
		_ = json.Unmarshal(h.Input(), &in)
		return in.Result, nil
	})
	return r
}

func (r *fakeRunner) on(opID string, f opFunc) {
	r.mu.Lock()
	r.ops[opID] = f
	r.mu.Unlock()
}

func (r *fakeRunner) Recover(ctx context.Context, h *OpHandle) error {
	r.mu.Lock()
	r.recovered = append(r.recovered, recoveredOp{h.JobID(), h.OpIndex(), h.RecordedLocks(), h.Resumed()})
	fn := r.recoverFn
	r.mu.Unlock()
	if fn != nil {
		return fn(h)
	}
	return nil
}

func (r *fakeRunner) RunOp(ctx context.Context, h *OpHandle) (any, error) {
	r.mu.Lock()
	if h.OpIndex() == 0 && !slices.Contains(r.started, h.JobID()) {
		r.started = append(r.started, h.JobID())
	}
	f := r.ops[h.OpID()]
	r.mu.Unlock()
	if f == nil {
		return nil, fmt.Errorf("no test handler for %s", h.OpID())
	}
	return f(ctx, h)
}

func (r *fakeRunner) startOrder() []int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.started)
}

func (r *fakeRunner) recoveries() []recoveredOp {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.recovered)
}

// gate lets a test hold an op at a point and release it.
type gate struct {
	reached chan struct{}
	release chan struct{}
}

func newGate() *gate { return &gate{reached: make(chan struct{}, 100), release: make(chan struct{})} }

// pass signals that the op reached the gate and waits for the release (or
// ctx).
func (g *gate) pass(ctx context.Context) error {
	g.reached <- struct{}{}
	select {
	case <-g.release:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (g *gate) wait(t *testing.T) {
	t.Helper()
	recv(t, g.reached, "op never reached the gate")
}

// recv waits for a value on ch, failing the test after testTimeout.
func recv[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(testTimeout):
		t.Fatal(what)
	}
	var zero T
	return zero
}

func (g *gate) open() { close(g.release) }

func openStore(t testing.TB, path string) *boltstore.Store {
	t.Helper()
	st, err := boltstore.Open(path, boltstore.Options{NoSync: true})
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	return st
}

type env struct {
	t      *testing.T
	path   string
	st     store.Store
	runner *fakeRunner
	q      *Queue
	opts   Options
}

// newEnv starts a queue on a fresh store; tweak adjusts the options.
func newEnv(t *testing.T, tweak func(*Options)) *env {
	t.Helper()
	e := &env{t: t, path: filepath.Join(t.TempDir(), "store.db"), runner: newRunner()}
	e.st = openStore(t, e.path)
	e.opts = Options{Store: e.st, Runner: e.runner}
	if tweak != nil {
		tweak(&e.opts)
	}
	e.start()
	t.Cleanup(e.close)
	return e
}

func (e *env) start() {
	e.t.Helper()
	e.opts.Store, e.opts.Runner = e.st, e.runner
	q, err := New(e.opts)
	if err != nil {
		e.t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	if err := q.Start(ctx); err != nil {
		e.t.Fatalf("start: %v", err)
	}
	e.q = q
}

func (e *env) close() {
	if e.q != nil {
		e.q.Stop()
		e.q = nil
	}
	if e.st != nil {
		_ = e.st.Close()
		e.st = nil
	}
}

// restart stops the queue, reopens the store file and starts a new queue
// with a fresh runner.
func (e *env) restart() {
	e.t.Helper()
	e.close()
	e.st = openStore(e.t, e.path)
	e.runner = newRunner()
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	t.Cleanup(cancel)
	return ctx
}

func op(s string) json.RawMessage { return json.RawMessage(s) }

func (e *env) submit(ops ...string) int64 {
	e.t.Helper()
	raws := make([]json.RawMessage, len(ops))
	for i, s := range ops {
		raws[i] = op(s)
	}
	id, err := e.q.Submit(ctxT(e.t), raws)
	if err != nil {
		e.t.Fatalf("submit: %v", err)
	}
	return id
}

// waitStatus waits (with WaitForChange, no polling) until the job status is
// one of want.
func (e *env) waitStatus(id int64, want ...Status) Status {
	e.t.Helper()
	ctx := ctxT(e.t)
	var prev []any
	for {
		info, _, _, err := e.q.WaitForChange(ctx, id, []string{"status"}, prev, 1<<62, 5*time.Second)
		if err != nil {
			e.t.Fatalf("wait for job %d: %v", id, err)
		}
		st := Status(info[0].(string))
		if slices.Contains(want, st) {
			return st
		}
		if st.Finalized() {
			e.t.Fatalf("job %d ended %s, want %v (opresult %v)", id, st, want, e.query(id, "opresult"))
		}
		prev = info
	}
}

func (e *env) query(id int64, fields ...string) []any {
	e.t.Helper()
	rows, err := e.q.Query(ctxT(e.t), []int64{id}, fields)
	if err != nil {
		e.t.Fatalf("query: %v", err)
	}
	return rows[0]
}

// jsonEq compares after a JSON round trip of both sides.
func jsonEq(t *testing.T, got any, want string) {
	t.Helper()
	g, err := json.Marshal(got)
	if err != nil {
		t.Fatal(err)
	}
	var gv, wv any
	if err := json.Unmarshal(g, &gv); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(want), &wv); err != nil {
		t.Fatalf("bad want %s: %v", want, err)
	}
	gb, _ := json.Marshal(gv)
	wb, _ := json.Marshal(wv)
	if string(gb) != string(wb) {
		t.Errorf("got %s\nwant %s", gb, wb)
	}
}

// storedRecord reads a job record straight from the store.
func storedRecord(t *testing.T, st store.Store, key string) *jobRecord {
	t.Helper()
	kv, err := st.Get(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	if kv == nil {
		return nil
	}
	rec, err := decodeRecord(kv.Value)
	if err != nil {
		t.Fatal(err)
	}
	return rec
}

// stepOp runs n steps; before committing step i it passes gates[i] if
// set. Each step's run is counted in runs, each commit in commits.
type stepper struct {
	mu      sync.Mutex
	runs    map[int]int
	commits map[int]int
	gates   map[int]*gate
	locks   []string
}

func newStepper() *stepper {
	return &stepper{runs: map[int]int{}, commits: map[int]int{}, gates: map[int]*gate{}}
}

func (s *stepper) count(m map[int]int, i int) {
	s.mu.Lock()
	m[i]++
	s.mu.Unlock()
}

func (s *stepper) get(m map[int]int, i int) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return m[i]
}

func (s *stepper) fn(n int) opFunc {
	return func(ctx context.Context, h *OpHandle) (any, error) {
		if !h.Resumed() {
			if len(s.locks) > 0 {
				if err := h.RecordLocks(ctx, s.locks); err != nil {
					return nil, err
				}
			}
			if err := h.SetRunning(ctx); err != nil {
				return nil, err
			}
		}
		cur, _ := h.Cursor()
		for i := cur; i < n; i++ {
			s.count(s.runs, i)
			if err := h.Log(ctx, "message", fmt.Sprintf("step %d", i)); err != nil {
				return nil, err
			}
			s.mu.Lock()
			g := s.gates[i]
			s.mu.Unlock()
			if g != nil {
				if err := g.pass(ctx); err != nil {
					return nil, err
				}
			}
			data, _ := json.Marshal(map[string]int{"done": i + 1})
			if _, err := h.CommitStep(ctx, StepCommit{Next: i + 1, Data: data}); err != nil {
				return nil, err
			}
			s.count(s.commits, i)
		}
		return fmt.Sprintf("%d steps", n), nil
	}
}

var errBoom = errors.New("boom")
