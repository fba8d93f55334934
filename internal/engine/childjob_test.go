package engine

import (
	"context"
	"encoding/json"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/corral/corral/internal/ecode"
	"github.com/corral/corral/internal/jobqueue"
	"github.com/corral/corral/internal/locking"
	"github.com/corral/corral/internal/opcodes"
	"github.com/corral/corral/internal/store"
	"github.com/corral/corral/internal/store/boltstore"
)

// releaseChild is the event a held child job waits for.
const releaseChild = "test/release-child"

// childGates lets a test hold units at chosen points.
type childGates struct {
	// parentAtGate receives when a parent with "gate" set reaches its
	// gate step; it passes once openGate is closed.
	parentAtGate chan struct{}
	openGate     chan struct{}
	// childBlocked receives when a child with "block" set runs its step,
	// which then blocks until the queue stops.
	childBlocked chan struct{}
}

func newChildGates() *childGates {
	return &childGates{parentAtGate: make(chan struct{}, 1), openGate: make(chan struct{}), childBlocked: make(chan struct{}, 1)}
}

// parentUnit submits one child job in its first step and waits for it to
// end in its last, with WaitForJob.
type parentUnit struct {
	Until  time.Time       `json:"until"`
	Child  int64           `json:"child"`
	Status jobqueue.Status `json:"status"`
	Woken  string          `json:"woken"`
	gates  *childGates
}

func (u *parentUnit) Locks(*opcodes.Op) []locking.Request { return nil }

func (u *parentUnit) Prereq(_ context.Context, op *opcodes.Op) error {
	if ms := op.Int("deadline_ms"); ms > 0 {
		u.Until = time.Now().Add(time.Duration(ms) * time.Millisecond)
	}
	return nil
}

func (u *parentUnit) Steps() []Step {
	return []Step{
		{Name: "submit", Run: func(_ context.Context, s *StepCtx) error {
			child, err := json.Marshal(map[string]any{"OP_ID": "OP_TEST_CHILD",
				"fail": s.Op().Bool("child_fail"), "hold": s.Op().Bool("child_hold"), "block": s.Op().Bool("child_block")})
			if err != nil {
				return err
			}
			s.Submit([]json.RawMessage{child})
			return nil
		}},
		{Name: "gate", Run: func(ctx context.Context, s *StepCtx) error {
			if !s.Op().Bool("gate") {
				return nil
			}
			u.gates.parentAtGate <- struct{}{}
			select {
			case <-u.gates.openGate:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		}},
		{Name: "wait", Run: func(ctx context.Context, s *StepCtx) error {
			ids := s.ChildJobs()
			if len(ids) != 1 {
				return ecode.ExecErrorf("the op has %d child jobs, want 1", len(ids))
			}
			st, err := s.WaitForJob(ctx, ids[0], u.Until)
			if err != nil {
				return err
			}
			u.Child, u.Status, u.Woken = ids[0], st, s.Woken()
			return nil
		}},
	}
}

func (u *parentUnit) Result() any {
	return map[string]any{"child": u.Child, "status": u.Status, "woken": u.Woken}
}

// childUnit ends in one step: held, it first waits for releaseChild;
// blocked, it waits for the queue to stop in a step declared unsafe to
// repeat (so the next start fails it); with fail, it fails.
type childUnit struct{ gates *childGates }

func (u *childUnit) Locks(*opcodes.Op) []locking.Request       { return nil }
func (u *childUnit) Prereq(context.Context, *opcodes.Op) error { return nil }
func (u *childUnit) Result() any                               { return "child done" }
func (u *childUnit) UnsafeToRepeat(op *opcodes.Op, _ int) string {
	if op.Bool("block") {
		return "nothing: a test step"
	}
	return ""
}

func (u *childUnit) Steps() []Step {
	return []Step{{Name: "work", Run: func(ctx context.Context, s *StepCtx) error {
		if s.Op().Bool("hold") && s.Woken() == "" {
			return s.Suspend(ctx, time.Time{}, releaseChild)
		}
		if s.Op().Bool("block") {
			u.gates.childBlocked <- struct{}{}
			<-ctx.Done()
			return ctx.Err()
		}
		if s.Op().Bool("fail") {
			return ecode.ExecErrorf("the child failed on purpose")
		}
		return nil
	}}}
}

func childTable() *opcodes.Table {
	return opcodes.NewTable([]opcodes.Def{
		{ID: "OP_TEST_PARENT", Params: []opcodes.Param{
			{Name: "child_fail", Type: opcodes.TBool, Default: false},
			{Name: "child_hold", Type: opcodes.TBool, Default: false},
			{Name: "child_block", Type: opcodes.TBool, Default: false},
			{Name: "gate", Type: opcodes.TBool, Default: false},
			{Name: "deadline_ms", Type: opcodes.TInt, Default: float64(0)},
		}},
		{ID: "OP_TEST_CHILD", Params: []opcodes.Param{
			{Name: "fail", Type: opcodes.TBool, Default: false},
			{Name: "hold", Type: opcodes.TBool, Default: false},
			{Name: "block", Type: opcodes.TBool, Default: false},
		}},
	})
}

func startChildQueue(t *testing.T, st store.Store, g *childGates) (*jobqueue.Queue, *Processor) {
	t.Helper()
	reg := NewRegistry(childTable())
	reg.Register(
		Op{ID: "OP_TEST_PARENT", New: func() Unit { return &parentUnit{gates: g} }},
		Op{ID: "OP_TEST_CHILD", New: func() Unit { return &childUnit{gates: g} }},
	)
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

func openTestStore(t *testing.T) store.Store {
	t.Helper()
	st, err := boltstore.Open(filepath.Join(t.TempDir(), "s.db"), boltstore.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// parentResult waits for a parent job to succeed and returns its result.
func parentResult(t *testing.T, q *jobqueue.Queue, id int64) (child int64, status, woken string) {
	t.Helper()
	st, res := waitJob(t, q, id)
	raw, _ := json.Marshal(res)
	var out []struct {
		Child  int64
		Status string
		Woken  string
	}
	if st != "success" || json.Unmarshal(raw, &out) != nil || len(out) != 1 {
		t.Fatalf("parent job %d ended %s %s", id, st, raw)
	}
	return out[0].Child, out[0].Status, out[0].Woken
}

func recvWithin(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(20 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
	}
}

// TestStepWaitsForChildJob parks a parent on its child, which is itself
// parked, then lets the child end, successfully or not: the job-ended
// event wakes the parent, which reads the child's final status.
func TestStepWaitsForChildJob(t *testing.T) {
	for _, tc := range []struct {
		name string
		fail bool
		want string
	}{{"success", false, "success"}, {"failure", true, "error"}} {
		t.Run(tc.name, func(t *testing.T) {
			q, p := startChildQueue(t, openTestStore(t), newChildGates())
			defer q.Stop()
			parent := submitOp(t, q, map[string]any{"OP_ID": "OP_TEST_PARENT", "child_hold": true, "child_fail": tc.fail})
			// Both parked: the child on its release, the parent on the child.
			waitSuspended(t, q, 2)
			if err := p.Notify(releaseChild); err != nil {
				t.Fatal(err)
			}
			child, status, woken := parentResult(t, q, parent)
			if status != tc.want || woken != WokenByEvent {
				t.Fatalf("parent saw child %d %s, woken by %q; want %s, woken by the event", child, status, woken, tc.want)
			}
			if st, _ := waitJob(t, q, child); st != tc.want {
				t.Fatalf("child %d is %s, want %s", child, st, tc.want)
			}
		})
	}
}

// TestStepWaitsForChildThatAlreadyEnded lets the child end before the
// parent reaches its waiting step: the parent reads the final status and
// never suspends.
func TestStepWaitsForChildThatAlreadyEnded(t *testing.T) {
	g := newChildGates()
	q, _ := startChildQueue(t, openTestStore(t), g)
	defer q.Stop()
	parent := submitOp(t, q, map[string]any{"OP_ID": "OP_TEST_PARENT", "gate": true, "child_fail": true})
	recvWithin(t, g.parentAtGate, "the parent's gate step")
	// The child is the job after its parent.
	if st, _ := waitJob(t, q, parent+1); st != "error" {
		t.Fatalf("child %d is %s, want error", parent+1, st)
	}
	close(g.openGate)
	child, status, woken := parentResult(t, q, parent)
	if child != parent+1 || status != "error" || woken != "" {
		t.Fatalf("parent saw child %d %s, woken by %q; want child %d error, never suspended", child, status, woken, parent+1)
	}
}

// TestStepWaitsForChildThatEndedDuringRestart stops the queue with the
// parent parked on a child that is in a step unsafe to repeat. The next
// start fails that child before it files the parked parent, so the
// job-ended event goes out with no one registered for it: the parent must
// still wake, at start.
func TestStepWaitsForChildThatEndedDuringRestart(t *testing.T) {
	st := openTestStore(t)
	g := newChildGates()
	q, _ := startChildQueue(t, st, g)
	parent := submitOp(t, q, map[string]any{"OP_ID": "OP_TEST_PARENT", "child_block": true})
	recvWithin(t, g.childBlocked, "the child's blocking step")
	deadline := time.Now().Add(20 * time.Second)
	for q.Stats().Suspended != 1 {
		if time.Now().After(deadline) {
			t.Fatalf("the parent never suspended: %+v", q.Stats())
		}
		time.Sleep(5 * time.Millisecond)
	}
	q.Stop()

	q, _ = startChildQueue(t, st, g)
	defer q.Stop()
	child, status, woken := parentResult(t, q, parent)
	if child != parent+1 || status != "error" || woken != WokenByEvent {
		t.Fatalf("parent saw child %d %s, woken by %q; want child %d error, woken by the event", child, status, woken, parent+1)
	}
}

// TestWaitForJobDeadline gives the parent a deadline its held child never
// meets: the parent fails with ErrJobWaitTimedOut's message instead of
// suspending again.
func TestWaitForJobDeadline(t *testing.T) {
	q, _ := startChildQueue(t, openTestStore(t), newChildGates())
	defer q.Stop()
	parent := submitOp(t, q, map[string]any{"OP_ID": "OP_TEST_PARENT", "child_hold": true, "deadline_ms": 300})
	st, res := waitJob(t, q, parent)
	raw, _ := json.Marshal(res)
	if st != "error" || !strings.Contains(string(raw), "has not ended by") {
		t.Fatalf("parent ended %s %s, want an error saying the child has not ended", st, raw)
	}
}
