package jobqueue

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/corral/corral/internal/store"
)

// OpHandle is the runner's view of one opcode of a job. Every method that
// changes something persists the change before returning.
type OpHandle struct {
	q       *Queue
	j       *job
	idx     int
	resumed bool

	mu        sync.Mutex
	onOutcome []func()
}

// OnOutcome registers fn to run once the op's outcome (success, error,
// cancel, suspension) is durable, or once the queue abandons the op because
// it is stopping. A runner releases its locks here: releasing them earlier
// would let another job take and record them while this op's record still
// says it holds them, and a crash in between would leave two jobs recorded
// as holding one exclusive lock.
func (h *OpHandle) OnOutcome(fn func()) {
	h.mu.Lock()
	h.onOutcome = append(h.onOutcome, fn)
	h.mu.Unlock()
}

func (h *OpHandle) runOutcome() {
	h.mu.Lock()
	fns := h.onOutcome
	h.onOutcome = nil
	h.mu.Unlock()
	for i := len(fns) - 1; i >= 0; i-- {
		fns[i]()
	}
}

// StepCommit is one step of a logical unit, committed atomically: the
// caller's compares and writes, the op's new step cursor and data, and the
// child jobs the step submits.
type StepCommit struct {
	Cmps     []store.Cmp
	Ops      []store.Op
	Next     int             // the step to run next
	Data     json.RawMessage // opaque to the queue (the unit's plan)
	Children [][]json.RawMessage
	// Final makes this the op's last write: the op succeeds with Result in
	// the same transaction, saving the separate write of the outcome. The
	// runner must then return a value that encodes to Result.
	Final  bool
	Result json.RawMessage
	// Committed, if set, runs after the transaction succeeded and before
	// the new op state is published, so that whoever sees the step (or the
	// op's success) also sees the effects the caller derives from it, such
	// as its in-memory copy of the configuration.
	Committed func(revision int64)
}

// StepResult reports a committed step: the store revision of its
// transaction and the ids given to its child jobs (also kept in the op's
// record: OpHandle.ChildJobs).
type StepResult struct {
	Revision int64
	ChildIDs []int64
}

func (q *Queue) newHandle(j *job, idx int, resumed bool) *OpHandle {
	return &OpHandle{q: q, j: j, idx: idx, resumed: resumed}
}

func (h *OpHandle) op() *opRecord { return &h.j.snapshot().rec.Ops[h.idx] }

// JobID is the job's id.
func (h *OpHandle) JobID() int64 { return h.j.id }

// OpIndex is the op's position in its job.
func (h *OpHandle) OpIndex() int { return h.idx }

// OpID is the op's OP_ID.
func (h *OpHandle) OpID() string { return h.j.opIDs[h.idx] }

// Input is the opcode exactly as submitted.
func (h *OpHandle) Input() json.RawMessage { return h.op().Input }

// Priority is the op's current priority.
func (h *OpHandle) Priority() int { return h.op().Priority }

// Resumed reports that the op was running when the master stopped: its
// locks were re-acquired by Recover and it must not call SetRunning again.
func (h *OpHandle) Resumed() bool { return h.resumed }

// Cursor is the step to run next and the data committed with the last step.
func (h *OpHandle) Cursor() (int, json.RawMessage) {
	op := h.op()
	return op.Cursor, op.StepData
}

// RecordedLocks are the locks last recorded with RecordLocks.
func (h *OpHandle) RecordedLocks() []string { return slices.Clone(h.op().Locks) }

// Canceled reports that a cancel of the job is pending.
func (h *OpHandle) Canceled() bool { return h.op().Status == StatusCanceling }

// update changes this op durably.
func (h *OpHandle) update(ctx context.Context, fn func(op *opRecord, r *jobRecord) error) error {
	return h.q.update(ctx, h.j, func(r *jobRecord) error {
		op := &r.Ops[h.idx]
		if op.Status.Finalized() {
			return fmt.Errorf("jobqueue: op %d of job %d is already %s", h.idx, h.j.id, op.Status)
		}
		return fn(op, r)
	})
}

// SetRunning moves the op from waiting to running once its locks are held.
func (h *OpHandle) SetRunning(ctx context.Context) error {
	return h.setRunning(ctx, nil, false)
}

// SetRunningWithLocks records the locks the op holds and moves it to
// running in one write: RecordLocks and SetRunning together.
func (h *OpHandle) SetRunningWithLocks(ctx context.Context, locks []string) error {
	return h.setRunning(ctx, slices.Clone(locks), true)
}

func (h *OpHandle) setRunning(ctx context.Context, locks []string, setLocks bool) error {
	now := h.q.now()
	return h.update(ctx, func(op *opRecord, _ *jobRecord) error {
		switch op.Status {
		case StatusCanceling:
			return ErrCanceled
		case StatusRunning:
			if !setLocks {
				return errNoChange
			}
		case StatusWaiting:
		default:
			return fmt.Errorf("jobqueue: op %d of job %d is %s, not waiting", h.idx, h.j.id, op.Status)
		}
		op.Status = StatusRunning
		if setLocks {
			op.Locks = locks
		}
		if op.Exec == nil {
			op.Exec = tsOf(now)
		}
		op.Suspend = nil
		return nil
	})
}

// RecordLocks stores the locks the op holds, for Recover after a restart.
func (h *OpHandle) RecordLocks(ctx context.Context, locks []string) error {
	locks = slices.Clone(locks)
	return h.update(ctx, func(op *opRecord, _ *jobRecord) error {
		op.Locks = locks
		return nil
	})
}

// Log appends a durable entry to the job log and wakes the job's
// subscribers. msg is any JSON value (usually a string).
func (h *OpHandle) Log(ctx context.Context, typ string, msg any) error {
	raw, err := json.Marshal(msg)
	if err != nil {
		return fmt.Errorf("jobqueue: encoding a log message: %w", err)
	}
	q, j := h.q, h.j
	j.wmu.Lock()
	defer j.wmu.Unlock()
	old := j.snapshot()
	e := logEntry{Serial: old.lastSerial + 1, Time: *tsOf(q.now()), Type: typ, Message: raw}
	if _, err := q.st.Txn(ctx, nil, []store.Op{store.Put(q.logKey(j.id, e.Serial), e.encode())}, nil); err != nil {
		return fmt.Errorf("jobqueue: writing a log entry of job %d: %w", j.id, err)
	}
	// A fresh slice each time: published snapshots never change.
	keep := old.tail[max(0, len(old.tail)-(logTailLen-1)):]
	tail := make([]logEntry, 0, len(keep)+1)
	tail = append(append(tail, keep...), e)
	j.snap.Store(&snapshot{rec: old.rec, status: old.status, lastSerial: e.Serial, archived: old.archived, tail: tail,
		summaries: old.summaries})
	j.notify()
	return nil
}

// BeginUnsafe durably records that step b.Step, the op's cursor, starts
// and must not be run again: if the op is run again before CommitStep moves
// the cursor past it, Began reports it. It costs one store write, so only
// steps that are unsafe to repeat call it. A pending cancel does not stop
// it: as for any step, the cancel is seen when the step commits.
func (h *OpHandle) BeginUnsafe(ctx context.Context, b BeganStep) error {
	return h.update(ctx, func(op *opRecord, _ *jobRecord) error {
		if op.Cursor != b.Step {
			return fmt.Errorf("jobqueue: op %d of job %d: step %d begins at cursor %d", h.idx, h.j.id, b.Step, op.Cursor)
		}
		op.Began = &b
		return nil
	})
}

// Began returns the unsafe step recorded by BeginUnsafe that has not
// committed since, if any.
func (h *OpHandle) Began() (BeganStep, bool) {
	op := h.op()
	if op.Began == nil || op.Began.Step != op.Cursor {
		return BeganStep{}, false
	}
	return *op.Began, true
}

// CommitStep commits one step in a single store transaction: c.Cmps must
// hold (else ErrConflict and nothing is written), then c.Ops, the op's new
// cursor and data, and the child jobs are written. A pending kill-cancel
// makes it return ErrCanceled before writing.
func (h *OpHandle) CommitStep(ctx context.Context, c StepCommit) (StepResult, error) {
	q, j := h.q, h.j
	var children []*jobRecord
	if len(c.Children) > 0 {
		var err error
		if children, err = q.prepareChildren(c.Children); err != nil {
			return StepResult{}, err
		}
	}
	j.wmu.Lock()
	defer j.wmu.Unlock()
	cur := j.snapshot().rec
	switch st := cur.Ops[h.idx].Status; {
	case st == StatusCanceling:
		return StepResult{}, ErrCanceled
	case st.Finalized():
		return StepResult{}, fmt.Errorf("jobqueue: op %d of job %d is already %s", h.idx, j.id, st)
	}
	var ids []int64
	if len(children) > 0 {
		first, err := q.allocIDs(ctx, len(children))
		if err != nil {
			return StepResult{}, err
		}
		ids = make([]int64, len(children))
		for i := range ids {
			ids[i] = first + int64(i)
		}
		now := tsOf(q.now())
		for i, rec := range children {
			rec.ID, rec.Received = ids[i], now
			for k := range rec.Ops {
				deps, err := resolveDepends(rec.Ops[k].Depends, ids, i)
				if err != nil {
					return StepResult{}, err
				}
				rec.Ops[k].Depends = deps
			}
		}
	}
	next := cur.clone()
	op := &next.Ops[h.idx]
	op.Cursor, op.StepData = c.Next, c.Data
	if len(ids) > 0 {
		// Clipped: the published record shares the array and never changes.
		op.Children = append(slices.Clip(op.Children), ids...)
	}
	// The step that began is now committed: it is no longer in doubt.
	op.Began = nil
	op.Woken = ""
	if c.Final {
		if err := q.succeed(h.idx, c.Result)(next); err != nil {
			return StepResult{}, err
		}
	}
	data, err := q.encodeNext(j, cur, next)
	if err != nil {
		return StepResult{}, err
	}
	ops := make([]store.Op, 0, len(c.Ops)+1+len(children))
	ops = append(ops, c.Ops...)
	ops = append(ops, store.Put(q.jobKey(j.id), data))
	for _, rec := range children {
		b, err := rec.encode()
		if err != nil {
			return StepResult{}, fmt.Errorf("jobqueue: encoding child job: %w", err)
		}
		ops = append(ops, store.Put(q.jobKey(rec.ID), b))
	}
	res, err := q.st.Txn(ctx, c.Cmps, ops, nil)
	if err != nil {
		return StepResult{}, fmt.Errorf("jobqueue: committing step %d of job %d: %w", c.Next, j.id, err)
	}
	if !res.Succeeded {
		return StepResult{}, ErrConflict
	}
	if c.Committed != nil {
		c.Committed(res.Revision)
	}
	q.publish(j, next)
	if len(children) > 0 {
		q.admit(children, false)
	}
	return StepResult{Revision: res.Revision, ChildIDs: ids}, nil
}

// CommitFailure ends the op as the queue would record cause (failed, or
// canceled when a cancel is pending) in one store transaction with the
// caller's compares and writes: a unit's revert commits its configuration
// changes with the op's outcome, so a crash leaves either both or neither,
// and a restarted master neither loses the revert nor resumes an op whose
// changes were already undone. cmps failing gives ErrConflict and writes
// nothing. committed, if set, runs after the transaction and before the
// outcome is published. The runner then returns cause, which the queue
// finds already recorded.
func (h *OpHandle) CommitFailure(ctx context.Context, cause error, cmps []store.Cmp, ops []store.Op, committed func(revision int64)) error {
	q, j := h.q, h.j
	j.wmu.Lock()
	defer j.wmu.Unlock()
	cur := j.snapshot().rec
	if st := cur.Ops[h.idx].Status; st.Finalized() {
		return fmt.Errorf("jobqueue: op %d of job %d is already %s", h.idx, j.id, st)
	}
	next := cur.clone()
	if err := q.failureOutcome(j, cur.Ops[h.idx], h.idx, cause)(next); err != nil {
		return err
	}
	data, err := q.encodeNext(j, cur, next)
	if err != nil {
		return err
	}
	all := append(slices.Clip(ops), store.Put(q.jobKey(j.id), data))
	res, err := q.st.Txn(ctx, cmps, all, nil)
	if err != nil {
		return fmt.Errorf("jobqueue: recording the failure of op %d of job %d: %w", h.idx, j.id, err)
	}
	if !res.Succeeded {
		return ErrConflict
	}
	if committed != nil {
		committed(res.Revision)
	}
	q.publish(j, next)
	return nil
}

// What ended an op's suspension (OpHandle.Woken).
const (
	WokenByEvent    = "event"
	WokenByDeadline = "deadline"
	// WokenByCancel: the job was canceled while the op was parked; the
	// runner is to undo the op's work, not to go on.
	WokenByCancel = "cancel"
)

// Woken says what ended the op's last suspension since its last step
// commit: WokenByEvent, WokenByDeadline, or "" when it has not been
// suspended since. A woken op runs its step again from the start; the
// step learns here why.
func (h *OpHandle) Woken() string { return h.op().Woken }

// Suspend parks the op until the deadline (if not zero) or until
// Notify(event) (if event is not empty), whichever comes first. It persists
// the op as waiting with no locks and returns ErrSuspended, which RunOp
// must return; the runner releases its locks. The op is run again later
// (not Resumed, at its committed cursor).
func (h *OpHandle) Suspend(ctx context.Context, until time.Time, event string) error {
	if until.IsZero() && event == "" {
		return fmt.Errorf("jobqueue: Suspend needs a deadline or an event")
	}
	s := &suspension{Event: event}
	if !until.IsZero() {
		s.Until = tsOf(until)
	}
	q := h.q
	err := h.update(ctx, func(op *opRecord, _ *jobRecord) error {
		if op.Status == StatusCanceling {
			return ErrCanceled
		}
		op.Status = StatusWaiting
		op.Locks = nil
		op.Suspend = s
		op.Woken = ""
		// Registered before the write so that no Notify can slip between
		// the write and the registration; a wake waits for this write (it
		// needs the job's write mutex) before it clears the suspension.
		q.mu.Lock()
		q.registerSuspension(h.j, s)
		q.mu.Unlock()
		return nil
	})
	if err != nil {
		q.mu.Lock()
		if h.j.susp == s {
			q.unregisterSuspension(h.j)
		}
		q.mu.Unlock()
		return err
	}
	return ErrSuspended
}
