package engine

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/corral/corral/internal/jobqueue"
	"github.com/corral/corral/internal/locking"
	"github.com/corral/corral/internal/opcodes"
	"github.com/corral/corral/internal/store"
	"github.com/corral/corral/internal/store/boltstore"
)

// waitUnit takes an exclusive lock, commits a first step, then suspends
// until its event or deadline and returns what woke it.
type waitUnit struct {
	WokenBy string `json:"woken_by"`
}

func (u *waitUnit) Locks(op *opcodes.Op) []locking.Request {
	return []locking.Request{{Level: locking.LevelInstance, Mode: locking.Exclusive, Names: []string{"shared-name"}}}
}

func (u *waitUnit) Prereq(context.Context, *opcodes.Op) error { return nil }

func (u *waitUnit) Steps() []Step {
	return []Step{
		{Name: "before", Run: func(context.Context, *StepCtx) error { return nil }},
		{Name: "wait", Run: func(ctx context.Context, s *StepCtx) error {
			if w := s.Woken(); w != "" {
				u.WokenBy = w
				return nil
			}
			var until time.Time
			if ms := s.Op().Int("deadline_ms"); ms > 0 {
				until = time.Now().Add(time.Duration(ms) * time.Millisecond)
			}
			return s.Suspend(ctx, until, s.Op().Str("event"))
		}},
	}
}

func (u *waitUnit) Result() any { return u.WokenBy }

// waitReverts counts reverts of waitUnit: a suspension is no failure and
// must undo nothing.
var waitReverts atomic.Int32

func (u *waitUnit) Revert(context.Context, *StepCtx, error) { waitReverts.Add(1) }

func waitTable() *opcodes.Table {
	return opcodes.NewTable([]opcodes.Def{{ID: "OP_TEST_WAIT", Params: []opcodes.Param{
		{Name: "event", Type: opcodes.TString, Default: ""},
		{Name: "deadline_ms", Type: opcodes.TInt, Default: float64(0)},
	}}})
}

func startWaitQueue(t *testing.T, st store.Store) (*jobqueue.Queue, *Processor) {
	t.Helper()
	reg := NewRegistry(waitTable())
	reg.Register(Op{ID: "OP_TEST_WAIT", New: func() Unit { return &waitUnit{} }})
	if err := reg.Check(); err != nil {
		t.Fatal(err)
	}
	p := NewProcessor(nil, locking.New(), nil, reg, slog.New(slog.DiscardHandler))
	q, err := jobqueue.New(jobqueue.Options{Store: st, Runner: p, Summary: reg.Table().Summary})
	if err != nil {
		t.Fatal(err)
	}
	p.Wake = q.Notify
	if err := q.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	return q, p
}

func submitOp(t *testing.T, q *jobqueue.Queue, op map[string]any) int64 {
	t.Helper()
	raw, _ := json.Marshal(op)
	id, err := q.Submit(context.Background(), []json.RawMessage{raw})
	if err != nil {
		t.Fatal(err)
	}
	return id
}

func waitSuspended(t *testing.T, q *jobqueue.Queue, n int) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for s := q.Stats(); s.Suspended != n || s.Executing != 0; s = q.Stats() {
		if time.Now().After(deadline) {
			t.Fatalf("never %d suspended ops: %+v", n, s)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestStepSuspendsUntilEventOrDeadline parks two ops that take the same
// exclusive lock (so a suspended op holds none), restarts the queue, and
// wakes one by its event and the other by its deadline.
func TestStepSuspendsUntilEventOrDeadline(t *testing.T) {
	st, err := boltstore.Open(filepath.Join(t.TempDir(), "s.db"), boltstore.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	waitReverts.Store(0) // other tests revert waitUnits on purpose
	q, _ := startWaitQueue(t, st)
	onEvent := submitOp(t, q, map[string]any{"OP_ID": "OP_TEST_WAIT", "event": "agent/42/called-back"})
	onDeadline := submitOp(t, q, map[string]any{"OP_ID": "OP_TEST_WAIT", "event": "never", "deadline_ms": 1500})
	waitSuspended(t, q, 2)
	q.Stop()

	q, p := startWaitQueue(t, st)
	defer q.Stop()
	waitSuspended(t, q, 2)
	if err := p.Notify("no-one-waits-for-this"); err != nil {
		t.Fatal(err)
	}
	if err := p.Notify("bad name"); err == nil || !strings.Contains(err.Error(), "printable") {
		t.Fatalf("Notify with a space = %v", err)
	}
	if err := p.Notify("agent/42/called-back"); err != nil {
		t.Fatal(err)
	}
	for id, want := range map[int64]string{onEvent: `["event"]`, onDeadline: `["deadline"]`} {
		status, result := waitJob(t, q, id)
		raw, _ := json.Marshal(result)
		if status != "success" || string(raw) != want {
			t.Errorf("job %d: %s %s, want success %s", id, status, raw, want)
		}
	}
	if n := waitReverts.Load(); n != 0 {
		t.Errorf("suspensions reverted %d times", n)
	}
}

// unsafeWaitUnit declares its one step unsafe to repeat and tries to
// suspend in it.
type unsafeWaitUnit struct{ waitUnit }

func (u *unsafeWaitUnit) Steps() []Step { return u.waitUnit.Steps()[1:] }

func (u *unsafeWaitUnit) UnsafeToRepeat(*opcodes.Op, int) string { return "nothing" }

func TestUnsafeStepCannotSuspend(t *testing.T) {
	st, err := boltstore.Open(filepath.Join(t.TempDir(), "s.db"), boltstore.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	reg := NewRegistry(waitTable())
	reg.Register(Op{ID: "OP_TEST_WAIT", New: func() Unit { return &unsafeWaitUnit{} }})
	p := NewProcessor(nil, locking.New(), nil, reg, slog.New(slog.DiscardHandler))
	q, err := jobqueue.New(jobqueue.Options{Store: st, Runner: p})
	if err != nil {
		t.Fatal(err)
	}
	p.Wake = q.Notify
	if err := q.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer q.Stop()
	id := submitOp(t, q, map[string]any{"OP_ID": "OP_TEST_WAIT", "event": "ev"})
	status, result := waitJob(t, q, id)
	raw, _ := json.Marshal(result)
	if status != "error" || !strings.Contains(string(raw), "unsafe to repeat and cannot suspend") {
		t.Fatalf("job ended %s %s", status, raw)
	}
}

// TestSuspendedOpsHoldNoGoroutine parks many ops and checks that the
// process did not keep a goroutine for each: a suspended op is a record, a
// timer and an entry in the table of events.
func TestSuspendedOpsHoldNoGoroutine(t *testing.T) {
	st, err := boltstore.Open(filepath.Join(t.TempDir(), "s.db"), boltstore.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	q, p := startWaitQueue(t, st)
	defer q.Stop()
	const parked = 300
	before := runtime.NumGoroutine()
	for i := 0; i < parked; i++ {
		submitOp(t, q, map[string]any{"OP_ID": "OP_TEST_WAIT", "event": "wake-all", "deadline_ms": 3600_000})
	}
	waitSuspended(t, q, parked)
	grew := runtime.NumGoroutine() - before
	if grew >= parked/10 {
		t.Fatalf("%d parked ops left %d more goroutines", parked, grew)
	}
	t.Logf("%d parked ops: %d goroutines more than before", parked, grew)
	if err := p.Notify("wake-all"); err != nil {
		t.Fatal(err)
	}
	waitSuspended(t, q, 0)
}

// cancelWaitUnit is waitUnit whose Revert reports what it was given.
type cancelWaitUnit struct {
	waitUnit
	reverted chan error
}

func (u *cancelWaitUnit) Revert(_ context.Context, _ *StepCtx, failed error) { u.reverted <- failed }

// TestCancelOfParkedOpReverts: a job canceled while its op is parked in a
// step (after a committed one) runs its unit's Revert before it ends
// canceled, so whatever the first step reserved is given back.
func TestCancelOfParkedOpReverts(t *testing.T) {
	st, err := boltstore.Open(filepath.Join(t.TempDir(), "s.db"), boltstore.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	reverted := make(chan error, 4)
	reg := NewRegistry(waitTable())
	reg.Register(Op{ID: "OP_TEST_WAIT", New: func() Unit { return &cancelWaitUnit{reverted: reverted} }})
	p := NewProcessor(nil, locking.New(), nil, reg, slog.New(slog.DiscardHandler))
	q, err := jobqueue.New(jobqueue.Options{Store: st, Runner: p})
	if err != nil {
		t.Fatal(err)
	}
	p.Wake = q.Notify
	if err := q.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer q.Stop()
	id := submitOp(t, q, map[string]any{"OP_ID": "OP_TEST_WAIT", "event": "never"})
	waitSuspended(t, q, 1)
	if ok, msg, err := q.Cancel(context.Background(), id, false); !ok || err != nil {
		t.Fatalf("cancel: %v %q %v", ok, msg, err)
	}
	if status, _ := waitJob(t, q, id); status != "canceled" {
		t.Fatalf("job ended %s, want canceled", status)
	}
	select {
	case err := <-reverted:
		if !errors.Is(err, jobqueue.ErrCanceled) || err.Error() != "the job was canceled" {
			t.Errorf("Revert got %v", err)
		}
	default:
		t.Fatal("the canceled parked op was not reverted")
	}
	if len(reverted) != 0 {
		t.Error("reverted more than once")
	}
}
