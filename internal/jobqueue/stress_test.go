package jobqueue

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"
)

// stressRunner mixes op kinds: plain, multi-step with logs, self-waking
// suspension, failure.
func stressRunner() *fakeRunner {
	r := newRunner()
	r.on("OP_STEPS", newStepper().fn(3))
	r.on("OP_PARK", func(ctx context.Context, h *OpHandle) (any, error) {
		if cur, _ := h.Cursor(); cur == 0 {
			if err := h.SetRunning(ctx); err != nil {
				return nil, err
			}
			if _, err := h.CommitStep(ctx, StepCommit{Next: 1}); err != nil {
				return nil, err
			}
			return nil, h.Suspend(ctx, time.Now().Add(2*time.Millisecond), "stress")
		}
		if err := h.SetRunning(ctx); err != nil {
			return nil, err
		}
		return "parked once", nil
	})
	r.on("OP_FAILX", func(ctx context.Context, h *OpHandle) (any, error) { return nil, errBoom })
	return r
}

// TestStressInvariants runs a random mix of jobs, cancels, priority
// changes, events, archiving and one restart, then checks that every job
// ended, that memory and store agree, and that the index is empty.
func TestStressInvariants(t *testing.T) {
	e := newEnv(t, func(o *Options) { o.MaxRunning = func() int { return 8 } })
	e.runner = stressRunner()
	e.q.Stop()
	e.start()
	ctx := ctxT(t)
	kinds := []string{"OP_NOOP", "OP_STEPS", "OP_PARK", "OP_FAILX"}

	var (
		mu  sync.Mutex
		ids []int64
	)
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 1))
			for range 10 {
				batch := make([][]json.RawMessage, 1+rng.IntN(4))
				for i := range batch {
					nops := 1 + rng.IntN(2)
					for k := range nops {
						s := fmt.Sprintf(`{"OP_ID":%q,"priority":%d`, kinds[rng.IntN(len(kinds))], rng.IntN(21)-10)
						if i > 0 && k == 0 && rng.IntN(2) == 0 {
							s += `,"depends":[[-1,[]]]`
						}
						batch[i] = append(batch[i], json.RawMessage(s+"}"))
					}
				}
				res, err := e.q.SubmitMany(ctx, batch)
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				for _, r := range res {
					if r.OK {
						ids = append(ids, r.JobID)
					}
				}
				if len(ids) == 0 {
					mu.Unlock()
					continue
				}
				pick := ids[rng.IntN(len(ids))]
				mu.Unlock()
				switch rng.IntN(4) {
				case 0:
					_, _, _ = e.q.Cancel(ctx, pick, rng.IntN(2) == 0)
				case 1:
					_, _, _ = e.q.ChangePriority(ctx, pick, rng.IntN(21)-10)
				case 2:
					e.q.Notify("stress")
				case 3:
					_, _ = e.q.Archive(ctx, pick)
				}
			}
		}()
	}
	wg.Wait()

	// Restart with work in flight.
	e.restart()
	e.runner = stressRunner()
	e.start()
	for _, id := range ids {
		v, err := e.q.findView(ctx, id)
		if err != nil || v == nil {
			t.Fatalf("job %d lost: %v", id, err)
		}
		if !v.archived {
			e.waitStatus(id, StatusSuccess, StatusError, StatusCanceled)
		}
	}

	q := e.q
	q.mu.Lock()
	nonFinal, active, reserved, ready, deps, events := q.nonFinal, q.active, q.reserved, q.ready.Len(), len(q.dependents), len(q.events)
	jobs := make([]*job, 0, len(q.jobs))
	for _, j := range q.jobs {
		jobs = append(jobs, j)
	}
	q.mu.Unlock()
	if nonFinal != 0 || reserved != 0 || ready != 0 || deps != 0 || events != 0 {
		t.Errorf("index not empty: nonFinal %d reserved %d ready %d dependents %d events %d", nonFinal, reserved, ready, deps, events)
	}
	if active != 0 {
		// A goroutine may still be returning after its final write.
		waitStats(t, q, func(s Stats) bool { return s.Executing == 0 })
	}
	for _, j := range jobs {
		mem := j.snapshot().rec
		disk := storedRecord(t, e.st, q.jobKey(j.id))
		if disk == nil || disk.status() != mem.status() || !mem.status().Finalized() {
			t.Errorf("job %d: memory %s, store %v", j.id, mem.status(), disk)
			continue
		}
		for i := range disk.Ops {
			if len(disk.Ops[i].Locks) != 0 || disk.Ops[i].Suspend != nil {
				t.Errorf("job %d op %d ended with locks %v suspend %v", j.id, i, disk.Ops[i].Locks, disk.Ops[i].Suspend)
			}
		}
	}
	n, _, err := q.AutoArchive(ctx, -1, 0)
	if err != nil || n != len(jobs) {
		t.Errorf("auto-archive: %d of %d, %v", n, len(jobs), err)
	}
}
