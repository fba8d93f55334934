package jobqueue

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/corral/corral/internal/ecode"
	"github.com/corral/corral/internal/store"
)

// archiveBatch bounds the jobs archived per transaction: each takes a put
// and a delete.
const archiveBatch = (store.MaxOpsPerTxn - store.GuardReserve) / 2

// Cancel cancels a job with Ganeti's semantics: a queued job is canceled at
// once; a waiting one is canceled (it stops waiting for locks, or its
// suspension ends); a running one cannot be canceled unless kill is set,
// and is then canceled at its next step boundary (CommitStep returns
// ErrCanceled). An unknown job gives an ecode JobLost error.
func (q *Queue) Cancel(ctx context.Context, id int64, kill bool) (bool, string, error) {
	j := q.lookup(id)
	if j == nil {
		v, err := q.archivedView(ctx, id)
		if err != nil {
			return false, "", err
		}
		if v == nil {
			return false, "", jobLost(id)
		}
		return false, fmt.Sprintf("Job %d is finished", id), nil
	}
	j.wmu.Lock()
	defer j.wmu.Unlock()
	now := q.now()
	switch st := j.snapshot().status; st {
	case StatusCanceled, StatusSuccess, StatusError:
		return false, fmt.Sprintf("Job %d is finished", id), nil
	case StatusCanceling:
		return true, fmt.Sprintf("Job %d will be canceled", id), nil
	case StatusQueued:
		if err := q.updateLocked(ctx, j, cancelRemaining(now, 0)); err != nil {
			return false, "", err
		}
		return true, fmt.Sprintf("Dequeued job %d", id), nil
	case StatusWaiting:
		// A job that no goroutine runs (ready for a slot, or parked) is taken
		// out of scheduling and finished here; one whose op is in the runner
		// is marked and its op context cancelled.
		if q.claim(j) {
			if cur := j.snapshot().rec.current(); cur >= 0 && j.snapshot().rec.Ops[cur].begun() {
				// Its op did part of its work (steps committed, or it
				// parked in one): it runs once more, canceling, so that
				// its unit undoes that work before it ends canceled.
				if err := q.updateLocked(ctx, j, cancelBegun(cur)); err != nil {
					q.unclaim(j)
					return false, "", err
				}
				q.unclaim(j)
				return true, fmt.Sprintf("Job %d will be canceled", id), nil
			}
			if err := q.updateLocked(ctx, j, cancelRemaining(now, 0)); err != nil {
				q.unclaim(j)
				return false, "", err
			}
			return true, fmt.Sprintf("Job %d will be canceled", id), nil
		}
		if err := q.updateLocked(ctx, j, markCanceling(false)); err != nil {
			return false, "", err
		}
		j.mu.Lock()
		if j.opCancel != nil {
			j.opCancel()
		}
		j.mu.Unlock()
		return true, fmt.Sprintf("Job %d will be canceled", id), nil
	default: // running
		if !kill {
			return false, "Job no longer waiting, can't cancel", nil
		}
		if err := q.updateLocked(ctx, j, markCanceling(true)); err != nil {
			return false, "", err
		}
		return true, fmt.Sprintf("Job %d will be canceled", id), nil
	}
}

// cancelBegun marks the unfinished ops canceling and ends the suspension
// of op cur, which begun its work: the runner then sees the cancel
// (OpHandle.Canceled, Woken WokenByCancel) and undoes it.
func cancelBegun(cur int) func(r *jobRecord) error {
	return func(r *jobRecord) error {
		if err := markCanceling(false)(r); err != nil {
			return err
		}
		if op := &r.Ops[cur]; op.Suspend != nil {
			op.Suspend, op.Woken = nil, WokenByCancel
		}
		return nil
	}
}

// markCanceling marks every unfinished op as canceling; kill flags a
// running op so it ends at its next step boundary.
func markCanceling(kill bool) func(r *jobRecord) error {
	return func(r *jobRecord) error {
		for i := range r.Ops {
			op := &r.Ops[i]
			if op.Status.Finalized() {
				continue
			}
			op.Kill = kill && op.Status == StatusRunning
			op.Status = StatusCanceling
		}
		return nil
	}
}

// claim takes a job that no goroutine runs out of scheduling.
func (q *Queue) claim(j *job) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	switch j.state {
	case stateReady:
		q.ready.remove(j)
	case stateParked:
		q.unregisterSuspension(j)
	case stateStalled:
		q.stopRetryLocked(j)
	case stateIdle:
	default:
		return false
	}
	j.state = stateClaimed
	return true
}

// unclaim gives a claimed job back to the scheduler after a failed write.
func (q *Queue) unclaim(j *job) {
	q.mu.Lock()
	if j.state == stateClaimed {
		q.pushReady(j)
	}
	q.mu.Unlock()
	q.schedule()
}

// ChangePriority sets the priority of a job's pending (queued or waiting)
// ops, with Ganeti's answers.
func (q *Queue) ChangePriority(ctx context.Context, id int64, prio int) (bool, string, error) {
	if prio < PrioHighest || prio > PrioLowest {
		return false, "", ecode.Errorf(ecode.Inval, "Invalid priority %d, allowed are %d..%d", prio, PrioHighest, PrioLowest)
	}
	j := q.lookup(id)
	if j == nil {
		v, err := q.archivedView(ctx, id)
		if err != nil {
			return false, "", err
		}
		if v == nil {
			return false, "", jobLost(id)
		}
		return false, fmt.Sprintf("Job %d is finished", id), nil
	}
	j.wmu.Lock()
	defer j.wmu.Unlock()
	switch st := j.snapshot().status; {
	case st.Finalized():
		return false, fmt.Sprintf("Job %d is finished", id), nil
	case st == StatusCanceling:
		return false, fmt.Sprintf("Job %d is cancelling", id), nil
	}
	changed := false
	err := q.updateLocked(ctx, j, func(r *jobRecord) error {
		for i := range r.Ops {
			op := &r.Ops[i]
			if op.Status == StatusQueued || op.Status == StatusWaiting {
				op.Priority = prio
				changed = true
			}
		}
		if !changed {
			return errNoChange
		}
		return nil
	})
	if err != nil {
		return false, "", err
	}
	if !changed {
		return false, fmt.Sprintf("Job %d had no pending opcodes", id), nil
	}
	return true, fmt.Sprintf("Priorities of pending opcodes for job %d have been changed to %d", id, prio), nil
}

// Archive moves a finalized job to the archive. It reports false for a job
// that is not finalized, unknown or already archived.
func (q *Queue) Archive(ctx context.Context, id int64) (bool, error) {
	j := q.lookup(id)
	if j == nil || !j.snapshot().status.Finalized() {
		return false, nil
	}
	n, err := q.archive(ctx, []*job{j})
	return n == 1, err
}

// AutoArchive archives finalized jobs whose end (else start, else
// received) time is older than age; age < 0 archives every finalized job.
// It stops after timeout (<= 0: no limit) and reports how many jobs it
// archived and how many it left unchecked.
func (q *Queue) AutoArchive(ctx context.Context, age, timeout time.Duration) (archived, remaining int, err error) {
	var deadline time.Time
	if timeout > 0 {
		deadline = time.Now().Add(timeout)
	}
	cutoff := q.now().Add(-age)
	q.mu.RLock()
	js := make([]*job, 0, len(q.jobs))
	for _, j := range q.jobs {
		js = append(js, j)
	}
	q.mu.RUnlock()
	slices.SortFunc(js, func(a, b *job) int { return cmp.Compare(a.id, b.id) })

	var batch []*job
	flush := func() error {
		n, err := q.archive(ctx, batch)
		archived += n
		batch = batch[:0]
		return err
	}
	for i, j := range js {
		if !deadline.IsZero() && time.Now().After(deadline) {
			remaining = len(js) - i
			break
		}
		s := j.snapshot()
		if !s.status.Finalized() {
			continue
		}
		if age >= 0 {
			ts := s.rec.End
			if ts == nil {
				ts = s.rec.Start
			}
			if ts == nil {
				ts = s.rec.Received
			}
			if ts == nil || !ts.Time().Before(cutoff) {
				continue
			}
		}
		batch = append(batch, j)
		if len(batch) == archiveBatch {
			if err := flush(); err != nil {
				return archived, remaining, err
			}
		}
	}
	if err := flush(); err != nil {
		return archived, remaining, err
	}
	return archived, remaining, nil
}

// archive moves finalized jobs to the archive in one transaction. Logs
// stay where they are.
func (q *Queue) archive(ctx context.Context, js []*job) (int, error) {
	if len(js) == 0 {
		return 0, nil
	}
	slices.SortFunc(js, func(a, b *job) int { return cmp.Compare(a.id, b.id) })
	// Write mutexes are taken in id order; no other path holds two.
	for _, j := range js {
		j.wmu.Lock()
	}
	defer func() {
		for _, j := range js {
			j.wmu.Unlock()
		}
	}()
	var (
		take  []*job
		recs  []*jobRecord // what each taken job is archived as
		cmps  []store.Cmp
		ops   []store.Op
		bytes int
	)
	for _, j := range js {
		s := j.snapshot()
		if s.archived || !s.status.Finalized() {
			continue
		}
		rec := q.scrubAll(s.rec)
		data, err := rec.encode()
		if err != nil {
			return 0, fmt.Errorf("jobqueue: encoding job %d: %w", j.id, err)
		}
		if len(take) > 0 && bytes+len(data)+txnSlack > store.MaxTxnBytes {
			break // the rest waits for the next round
		}
		take = append(take, j)
		recs = append(recs, rec)
		cmps = append(cmps, store.Exists(q.jobKey(j.id)))
		ops = append(ops, store.Put(q.archiveKey(j.id), data), store.Delete(q.jobKey(j.id)))
		bytes += len(data) + 2*len(q.jobKey(j.id))
	}
	if len(take) == 0 {
		return 0, nil
	}
	res, err := q.st.Txn(ctx, cmps, ops, nil)
	if err != nil {
		return 0, fmt.Errorf("jobqueue: archiving jobs: %w", err)
	}
	if !res.Succeeded {
		return 0, fmt.Errorf("jobqueue: archiving jobs: a job record vanished")
	}
	q.mu.Lock()
	for _, j := range take {
		delete(q.jobs, j.id)
	}
	q.mu.Unlock()
	for i, j := range take {
		old := j.snapshot()
		j.snap.Store(&snapshot{rec: recs[i], status: old.status, lastSerial: old.lastSerial, archived: true,
			summaries: q.opSummaries(j, recs[i], old.rec, old.summaries)})
		j.notify()
	}
	return len(take), nil
}
