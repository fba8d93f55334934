package jobqueue

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/corral/corral/internal/ecode"
)

// outcome is why a job goroutine returned.
type outcome int

const (
	outContinue outcome = iota // internal: go on with the next op
	outDone                    // the job is finalized
	outAbandon                 // the queue is stopping; the job resumes at the next Start
	outParked                  // the op suspended itself
	outBlocked                 // an op must wait for a dependency
	outStalled                 // a store write failed; the job runs again after a pause
)

// runJob runs one job, op after op, in its own goroutine.
func (q *Queue) runJob(j *job) {
	defer q.wg.Done()
	out, dep := q.execJob(j)
	q.mu.Lock()
	q.active--
	if out != outStalled {
		j.stalls = 0
	}
	switch out {
	case outDone:
		j.state = stateDone
	case outParked:
		switch {
		case j.wakePending:
			j.wakePending = false
			q.pushReady(j)
		case j.susp != nil:
			j.state = stateParked
		default:
			q.pushReady(j)
		}
	case outBlocked:
		if q.blockOn(j, dep) {
			j.blockers = 1
			j.state = stateBlocked
		} else {
			q.pushReady(j)
		}
	case outStalled:
		q.retryStalledLocked(j)
	default:
		j.state = stateIdle
	}
	if j.snapshot().status.Finalized() {
		q.stopRetryLocked(j)
		j.state = stateDone
		if j.heapIdx >= 0 {
			q.ready.remove(j)
		}
	}
	q.mu.Unlock()
	q.schedule()
}

// execJob drives a job until it is finalized, parked, blocked or the queue
// stops. Every status change is written before the next action.
func (q *Queue) execJob(j *job) (outcome, int64) {
	bg := context.Background()
	for {
		if q.isStopping() {
			return outAbandon, 0
		}
		s := j.snapshot()
		if s.status.Finalized() {
			return outDone, 0
		}
		idx := s.rec.current()
		op := &s.rec.Ops[idx]
		switch op.Status {
		case StatusQueued:
			fn, waitFor, wait, err := q.checkDeps(bg, j, s.rec, idx)
			if err != nil {
				q.log.Error("cannot check job dependencies", "job", j.id, "err", err)
				return outStalled, 0
			}
			if wait {
				return outBlocked, waitFor
			}
			// As in Ganeti, the op is marked started before a dependency
			// failure finishes it, so its timestamps tell when that happened.
			start := q.startOp(j, idx)
			if fn == nil {
				// Waiting (for locks) is only published, not written: the
				// change reaches the store with the op's next write (running,
				// with its locks). A restart finds the op queued again, as
				// Ganeti re-queues waiting ops, and saving the write shortens
				// every job by one fsync.
				q.apply(j, start)
				continue
			}
			if err := q.update(bg, j, chain(start, fn)); err != nil {
				q.log.Error("cannot start job op", "job", j.id, "op", idx, "err", err)
				return outStalled, 0
			}
			continue
		case StatusCanceling:
			if !op.begun() {
				if err := q.update(bg, j, cancelRemaining(q.now(), idx)); err != nil {
					q.log.Error("cannot cancel job", "job", j.id, "err", err)
					return outStalled, 0
				}
				continue
			}
			// Begun: the runner undoes its work (runOp).
		}
		if out := q.runOp(j, idx, op.Status == StatusRunning); out != outContinue {
			return out, 0
		}
	}
}

// startOp moves op idx from queued to waiting and notes where its log
// starts.
func (q *Queue) startOp(j *job, idx int) func(r *jobRecord) error {
	now := q.now()
	return func(r *jobRecord) error {
		op := &r.Ops[idx]
		if op.Status != StatusQueued {
			return errNoChange // canceled meanwhile
		}
		ts := tsOf(now)
		op.Status = StatusWaiting
		op.Start = ts
		op.Result = nil
		op.LogFirst = j.snapshot().lastSerial + 1
		if r.Start == nil {
			r.Start = ts
		}
		return nil
	}
}

// chain runs update functions in order, stopping at the first error.
func chain(fns ...func(*jobRecord) error) func(*jobRecord) error {
	return func(r *jobRecord) error {
		for _, fn := range fns {
			if err := fn(r); err != nil {
				return err
			}
		}
		return nil
	}
}

// checkDeps evaluates the dependencies of op idx (Ganeti's rules, in
// order). It returns an update finishing the job when a dependency makes
// it fail or cancel, or the id of an unfinished dependency to wait for.
func (q *Queue) checkDeps(ctx context.Context, j *job, rec *jobRecord, idx int) (fn func(*jobRecord) error, waitFor int64, wait bool, err error) {
	now := q.now()
	fail := func(msg string) func(*jobRecord) error {
		return failFrom(now, idx, encodeError(ecode.New(ecode.OpExecError, ecode.Fault, msg)))
	}
	for _, d := range rec.Ops[idx].Depends {
		if d.JobID == j.id {
			return fail("Job can't depend on itself"), 0, false, nil
		}
		st, found, err := q.jobStatus(ctx, d.JobID)
		if err != nil {
			return nil, 0, false, err
		}
		switch {
		case !found:
			return fail(fmt.Sprintf("Dependency error: Job %d not found", d.JobID)), 0, false, nil
		case !st.Finalized():
			return nil, d.JobID, true, nil
		case st == StatusCanceled && !containsStatus(d.Statuses, StatusCanceled):
			return cancelRemaining(now, idx), 0, false, nil
		case len(d.Statuses) == 0 || containsStatus(d.Statuses, st):
			continue
		default:
			return fail(fmt.Sprintf("Dependency job %d finished with status '%s', not one of '%s' as required",
				d.JobID, st, statusList(d.Statuses))), 0, false, nil
		}
	}
	return nil, 0, false, nil
}

func containsStatus(list []Status, s Status) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// jobStatus finds a job's status in memory or, for archived jobs, in the
// store.
func (q *Queue) jobStatus(ctx context.Context, id int64) (Status, bool, error) {
	if j := q.lookup(id); j != nil {
		return j.snapshot().status, true, nil
	}
	v, err := q.archivedView(ctx, id)
	if err != nil || v == nil {
		return "", false, err
	}
	return v.status, true, nil
}

func (q *Queue) lookup(id int64) *job {
	q.mu.RLock()
	j := q.jobs[id]
	q.mu.RUnlock()
	return j
}

// runOp hands op idx to the runner and records the outcome.
func (q *Queue) runOp(j *job, idx int, resumed bool) outcome {
	ctx, cancel := context.WithCancel(q.runCtx)
	defer cancel()
	j.mu.Lock()
	j.opCancel = cancel
	j.mu.Unlock()
	// A cancel that came before opCancel was set is seen here; the loop
	// then finishes it without calling the runner, unless the op began
	// its work: the runner is then called to undo it (OpHandle.Canceled).
	if op := j.snapshot().rec.Ops[idx]; op.Status == StatusCanceling && !op.begun() {
		j.mu.Lock()
		j.opCancel = nil
		j.mu.Unlock()
		return outContinue
	}
	h := q.newHandle(j, idx, resumed)
	// Runs after the outcome below is written (deferred calls run last).
	defer h.runOutcome()
	res, err := q.callRunOp(ctx, h)
	j.mu.Lock()
	j.opCancel = nil
	j.mu.Unlock()

	if err == nil {
		raw, merr := json.Marshal(res)
		if merr != nil {
			err = ecode.ExecErrorf("cannot encode the result of %s: %v", j.opIDs[idx], merr)
		} else {
			return q.recordOutcome(j, idx, "success", q.succeed(idx, raw))
		}
	}
	if q.isStopping() {
		// The error is most likely the stop itself; the op keeps its last
		// committed state and resumes at the next Start.
		return outAbandon
	}
	cur := j.snapshot().rec.Ops[idx]
	switch {
	case cur.Status.Finalized():
		// Recorded by the runner with its revert (OpHandle.CommitFailure).
		return outContinue
	case errors.Is(err, ErrSuspended) && cur.Status == StatusWaiting && (cur.Suspend != nil || cur.Woken != ""):
		// A wake may already have cleared the suspension (an event that
		// came, or a job that had ended, before RunOp returned); the op
		// is parked all the same and files itself ready below.
		return outParked
	}
	return q.recordOutcome(j, idx, "failure", q.failureOutcome(j, cur, idx, err))
}

// failureOutcome is how the queue records op idx ending with err: canceled
// when a cancel is pending (unless a kill-cancel met another error) or the
// runner says so, failed otherwise.
func (q *Queue) failureOutcome(j *job, cur opRecord, idx int, err error) func(*jobRecord) error {
	switch {
	case cur.Status == StatusCanceling &&
		(!cur.Kill || errors.Is(err, ErrCanceled) || errors.Is(err, context.Canceled)):
		return cancelRemaining(q.now(), idx)
	case errors.Is(err, ErrCanceled):
		return cancelRemaining(q.now(), idx)
	}
	q.log.Info("job op failed", "job", j.id, "op", idx, "opid", j.opIDs[idx], "err", err)
	return failFrom(q.now(), idx, encodeError(err))
}

// callRunOp turns a runner panic into an op error instead of a crash of the
// master.
func (q *Queue) callRunOp(ctx context.Context, h *OpHandle) (res any, err error) {
	defer func() {
		if p := recover(); p != nil {
			q.log.Error("runner panicked", "job", h.JobID(), "op", h.OpIndex(), "panic", p)
			res, err = nil, ecode.ExecErrorf("internal error: %v", p)
		}
	}()
	return q.runner.RunOp(ctx, h)
}

// succeed records op idx's result; a cancel requested meanwhile applies to
// the ops after it.
func (q *Queue) succeed(idx int, result []byte) func(*jobRecord) error {
	now := q.now()
	return func(r *jobRecord) error {
		op := &r.Ops[idx]
		if op.Status.Finalized() {
			return errNoChange
		}
		ts := tsOf(now)
		finishOp(op, StatusSuccess, result, ts)
		canceled := false
		for i := idx + 1; i < len(r.Ops); i++ {
			if r.Ops[i].Status == StatusCanceling {
				finishOp(&r.Ops[i], StatusCanceled, canceledResult, ts)
				canceled = true
			}
		}
		if canceled || idx == len(r.Ops)-1 {
			r.End = ts
		}
		return nil
	}
}

// Suspensions. Callers of the *Locked/register helpers hold q.mu.

// registerSuspension arms the deadline timer and the event of a parked op.
func (q *Queue) registerSuspension(j *job, s *suspension) {
	if q.stopping {
		return
	}
	j.susp = s
	if s.Event != "" {
		set := q.events[s.Event]
		if set == nil {
			set = map[*job]struct{}{}
			q.events[s.Event] = set
		}
		set[j] = struct{}{}
	}
	if s.Until != nil {
		d := time.Until(s.Until.Time())
		j.timer = time.AfterFunc(max(d, 0), func() { q.wake(j, s, WokenByDeadline) })
	}
	q.wakeIfEndedLocked(j, s)
}

func (q *Queue) unregisterSuspension(j *job) {
	if j.timer != nil {
		j.timer.Stop()
		j.timer = nil
	}
	if j.susp != nil && j.susp.Event != "" {
		if set := q.events[j.susp.Event]; set != nil {
			delete(set, j)
			if len(set) == 0 {
				delete(q.events, j.susp.Event)
			}
		}
	}
	j.susp = nil
}

// park files a job loaded in the suspended state.
func (q *Queue) park(j *job) {
	rec := j.snapshot().rec
	s := rec.Ops[rec.current()].Suspend
	q.mu.Lock()
	j.state = stateParked
	q.registerSuspension(j, s)
	q.mu.Unlock()
}

// waking is a parked job and the suspension a wake ends.
type waking struct {
	j *job
	s *suspension
}

// Notify wakes the ops suspended on event.
func (q *Queue) Notify(event string) {
	q.mu.Lock()
	set := q.events[event]
	var ws []waking
	for j := range set {
		ws = append(ws, waking{j, j.susp})
	}
	q.mu.Unlock()
	for _, w := range ws {
		q.wake(w.j, w.s, WokenByEvent)
	}
}

// wake ends suspension s of job j: the suspension is cleared in the store
// (so a restart does not wait again for an event that already came) and
// what woke it recorded, then the job becomes ready.
func (q *Queue) wake(j *job, s *suspension, cause string) {
	q.mu.Lock()
	if q.stopping || j.susp != s {
		q.mu.Unlock()
		return
	}
	q.unregisterSuspension(j)
	switch j.state {
	case stateActive:
		// Its goroutine is still returning from RunOp; it files the job as
		// ready on its way out.
		j.wakePending = true
	case stateParked:
		j.state = stateWaking
	default:
		q.mu.Unlock()
		return
	}
	q.wg.Add(1)
	q.mu.Unlock()
	defer q.wg.Done()

	err := q.update(context.Background(), j, func(r *jobRecord) error {
		idx := r.current()
		if idx < 0 || r.Ops[idx].Suspend != s {
			return errNoChange
		}
		r.Ops[idx].Suspend = nil
		r.Ops[idx].Woken = cause
		return nil
	})
	if err != nil {
		q.log.Error("cannot clear an op's suspension", "job", j.id, "err", err)
	}
	q.mu.Lock()
	if j.state == stateWaking {
		q.pushReady(j)
	}
	q.mu.Unlock()
	q.schedule()
}
