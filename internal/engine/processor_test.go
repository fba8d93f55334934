package engine

import (
	"context"
	"encoding/json"
	"log/slog"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/corral/corral/internal/jobqueue"
	"github.com/corral/corral/internal/locking"
	"github.com/corral/corral/internal/opcodes"
	"github.com/corral/corral/internal/store"
	"github.com/corral/corral/internal/store/boltstore"
)

// doubleTable has one opcode that no package of Corral implements: the
// engine runs whatever its registry holds.
func doubleTable() *opcodes.Table {
	return opcodes.NewTable([]opcodes.Def{{ID: "OP_TEST_DOUBLE", Params: []opcodes.Param{
		{Name: "value", Type: opcodes.TInt, Required: true},
		{Name: "lock", Type: opcodes.TNEString, Required: true},
	}}})
}

// doubleRuns counts what the units of one test did, across restarts.
type doubleRuns struct {
	prereqs, firsts atomic.Int32
	// waiting is closed when the second step starts waiting; proceed,
	// when closed, lets it finish.
	waiting, proceed chan struct{}
}

// doubleUnit plans twice its value in Prereq and returns the plan after a
// second step that waits until it may proceed (or the master stops).
type doubleUnit struct {
	Lock    string `json:"lock"`
	Planned int    `json:"planned"`
	runs    *doubleRuns
}

func (u *doubleUnit) Locks(op *opcodes.Op) []locking.Request {
	return []locking.Request{{Level: locking.LevelInstance, Mode: locking.Exclusive, Names: []string{op.Str("lock")}}}
}

func (u *doubleUnit) Prereq(ctx context.Context, op *opcodes.Op) error {
	u.runs.prereqs.Add(1)
	u.Lock, u.Planned = op.Str("lock"), 2*op.Int("value")
	return nil
}

func (u *doubleUnit) Steps() []Step {
	return []Step{
		{Name: "first", Run: func(ctx context.Context, s *StepCtx) error {
			u.runs.firsts.Add(1)
			return nil
		}},
		{Name: "wait", Run: func(ctx context.Context, s *StepCtx) error {
			select {
			case <-u.runs.waiting:
			default:
				close(u.runs.waiting)
			}
			select {
			case <-u.runs.proceed:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		}},
	}
}

func (u *doubleUnit) Result() any { return map[string]any{"lock": u.Lock, "planned": u.Planned} }

// startQueue runs a queue over st with an engine whose registry holds only
// OP_TEST_DOUBLE.
func startQueue(t *testing.T, st store.Store, runs *doubleRuns) *jobqueue.Queue {
	t.Helper()
	reg := NewRegistry(doubleTable())
	reg.Register(Op{ID: "OP_TEST_DOUBLE", New: func() Unit { return &doubleUnit{runs: runs} }})
	if err := reg.Check(); err != nil {
		t.Fatal(err)
	}
	p := NewProcessor(nil, locking.New(), nil, reg, slog.New(slog.DiscardHandler))
	q, err := jobqueue.New(jobqueue.Options{Store: st, Runner: p, Summary: reg.Table().Summary})
	if err != nil {
		t.Fatal(err)
	}
	if err := q.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	return q
}

// TestRegisteredUnitResumesWithItsPlan runs a unit from outside cmdlib,
// stops the queue in its second step, and checks that the next queue
// resumes it there: the first step and Prereq are not run again, and the
// plan Prereq made is restored.
func TestRegisteredUnitResumesWithItsPlan(t *testing.T) {
	st, err := boltstore.Open(filepath.Join(t.TempDir(), "s.db"), boltstore.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	runs := &doubleRuns{waiting: make(chan struct{}), proceed: make(chan struct{})}
	q := startQueue(t, st, runs)
	raw, _ := json.Marshal(map[string]any{"OP_ID": "OP_TEST_DOUBLE", "value": 21, "lock": "inst1"})
	id, err := q.Submit(context.Background(), []json.RawMessage{raw})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-runs.waiting:
	case <-time.After(20 * time.Second):
		t.Fatal("the second step never started")
	}
	q.Stop()

	close(runs.proceed)
	q = startQueue(t, st, runs)
	defer q.Stop()
	status, result := waitJob(t, q, id)
	if status != "success" {
		t.Fatalf("job %d ended %s: %v", id, status, result)
	}
	// In process, the queue answers results as the JSON it stored.
	raw, err = json.Marshal(result)
	if err != nil {
		t.Fatal(err)
	}
	if want := `[{"lock":"inst1","planned":42}]`; string(raw) != want {
		t.Fatalf("result %s, want %s", raw, want)
	}
	if n := runs.prereqs.Load(); n != 1 {
		t.Errorf("Prereq ran %d times, want once", n)
	}
	if n := runs.firsts.Load(); n != 1 {
		t.Errorf("the first step ran %d times, want once", n)
	}
}

func waitJob(t *testing.T, q *jobqueue.Queue, id int64) (string, []any) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for {
		rows, err := q.Query(ctx, []int64{id}, []string{"status", "opresult"})
		if err != nil {
			t.Fatal(err)
		}
		st, _ := rows[0][0].(string)
		if st == "success" || st == "error" || st == "canceled" {
			res, _ := rows[0][1].([]any)
			return st, res
		}
		if _, _, _, err := q.WaitForChange(ctx, id, []string{"status"}, []any{st}, -1, time.Second); err != nil {
			t.Fatal(err)
		}
	}
}
