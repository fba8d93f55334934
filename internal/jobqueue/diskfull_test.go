package jobqueue

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/corral/corral/internal/store"
)

// fullDisk is a store whose writes fail with ENOSPC while it is full, as
// bbolt's do when the file system has no room left; reads still work.
// Only writes that touch a key under onlyUnder are refused when it is set.
type fullDisk struct {
	store.Store
	full      atomic.Bool
	onlyUnder string
	refused   chan struct{} // one value per refused write
}

func newFullDisk(st store.Store) *fullDisk {
	return &fullDisk{Store: st, refused: make(chan struct{}, 10000)}
}

func (d *fullDisk) Txn(ctx context.Context, cmps []store.Cmp, then, els []store.Op) (store.TxnResult, error) {
	if d.full.Load() && d.touched(then, els) {
		d.refused <- struct{}{}
		return store.TxnResult{}, fmt.Errorf("txn: commit: write %s: %w", "config.db", syscall.ENOSPC)
	}
	return d.Store.Txn(ctx, cmps, then, els)
}

func (d *fullDisk) touched(branches ...[]store.Op) bool {
	for _, ops := range branches {
		for _, o := range ops {
			if o.Type != store.OpGet && o.Type != store.OpGetPrefix && strings.HasPrefix(o.Key, d.onlyUnder) {
				return true
			}
		}
	}
	return false
}

// newFullDiskEnv starts a queue on a store that can be made full.
func newFullDiskEnv(t *testing.T) (*env, *fullDisk) {
	t.Helper()
	e := &env{t: t, path: filepath.Join(t.TempDir(), "store.db"), runner: newRunner()}
	disk := newFullDisk(openStore(t, e.path))
	e.st = disk
	e.start()
	t.Cleanup(e.close)
	return e, disk
}

// watchRelease registers a lock release on h (OnOutcome) that sends on
// released what the store said of the op at that moment.
func watchRelease(st store.Store, h *OpHandle, released chan<- Status) {
	key := h.q.jobKey(h.JobID())
	h.OnOutcome(func() {
		s := Status("unreadable")
		if kv, err := st.Get(context.Background(), key); err == nil && kv != nil {
			if rec, err := decodeRecord(kv.Value); err == nil {
				s = rec.Ops[h.OpIndex()].Status
			}
		}
		released <- s
	})
}

// TestOutcomeWriteRetriedAfterDiskFull: the disk fills up while an op
// runs, so its step commit or its success fails and the write of its
// outcome fails too. Once the disk has room again the outcome is written
// without a restart; until then the op keeps its locks and queries show it
// running, never an outcome the store does not hold.
func TestOutcomeWriteRetriedAfterDiskFull(t *testing.T) {
	tests := []struct {
		name   string
		commit bool // the op commits a step after the disk filled up
		want   Status
		result string
	}{
		{"step commit fails", true, StatusError, "no space left on device"},
		{"success write fails", false, StatusSuccess, `"done"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e, disk := newFullDiskEnv(t)
			g := newGate()
			released := make(chan Status, 10)
			e.runner.on("OP_FULL", func(ctx context.Context, h *OpHandle) (any, error) {
				watchRelease(e.st, h, released)
				if err := h.SetRunningWithLocks(ctx, []string{"instance:exclusive:i1"}); err != nil {
					return nil, err
				}
				if _, err := h.CommitStep(ctx, StepCommit{Next: 1}); err != nil {
					return nil, err
				}
				if err := g.pass(ctx); err != nil {
					return nil, err
				}
				if tc.commit {
					if _, err := h.CommitStep(ctx, StepCommit{Next: 2, Final: true, Result: json.RawMessage(`"done"`)}); err != nil {
						return nil, err
					}
				}
				return "done", nil
			})
			id := e.submit(`{"OP_ID":"OP_FULL"}`)
			g.wait(t)
			disk.full.Store(true)
			g.open()
			// The first refused write is the op's own (step or outcome);
			// more show that the outcome is being retried.
			for range 3 {
				recv(t, disk.refused, "the outcome write was not retried while the disk was full")
			}
			if st := e.query(id, "status")[0]; st != string(StatusRunning) {
				t.Errorf("job shows %v while its outcome is not durable, want running", st)
			}
			select {
			case st := <-released:
				t.Errorf("locks released before the outcome was durable (the store said %s)", st)
			default:
			}
			disk.full.Store(false)
			e.waitStatus(id, tc.want)

			rec := storedRecord(t, e.st, e.q.jobKey(id))
			op0 := rec.Ops[0]
			if op0.Status != tc.want || rec.End == nil || op0.End == nil || op0.Locks != nil {
				t.Errorf("stored op %+v, job end %v; want %s with an end and no locks", op0, rec.End, tc.want)
			}
			if !strings.Contains(string(op0.Result), tc.result) {
				t.Errorf("stored result %s, want it to contain %q", op0.Result, tc.result)
			}
			if st := recv(t, released, "the op's locks were never released"); st != tc.want {
				t.Errorf("locks released with the store saying %s, want %s", st, tc.want)
			}
		})
	}
}

// TestStalledJobRunsAgainAfterDiskFull: a job whose own write fails before
// any runner holds it (here, the failure of a dependency) is run again
// once the store takes writes, without a restart.
func TestStalledJobRunsAgainAfterDiskFull(t *testing.T) {
	e, disk := newFullDiskEnv(t)
	g := newGate()
	e.runner.on("OP_FAIL", func(ctx context.Context, h *OpHandle) (any, error) {
		if err := g.pass(ctx); err != nil {
			return nil, err
		}
		return nil, errBoom
	})
	first := e.submit(`{"OP_ID":"OP_FAIL"}`)
	g.wait(t)
	dependent := e.submit(fmt.Sprintf(`{"OP_ID":"OP_NOOP","depends":[[%d,["success"]]]}`, first))
	disk.onlyUnder = e.q.jobKey(dependent)
	disk.full.Store(true)
	g.open()
	e.waitStatus(first, StatusError)
	for range 2 {
		recv(t, disk.refused, "the dependent job was not run again after its write failed")
	}
	disk.full.Store(false)
	e.waitStatus(dependent, StatusError)
	rec := storedRecord(t, e.st, e.q.jobKey(dependent))
	if rec.Ops[0].Status != StatusError || !strings.Contains(string(rec.Ops[0].Result), "Dependency job") {
		t.Errorf("stored dependent op %+v", rec.Ops[0])
	}
}
