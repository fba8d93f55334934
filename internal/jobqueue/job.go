package jobqueue

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/corral/corral/internal/jobfilter"
	"github.com/corral/corral/internal/store"
)

// jobState is where a job sits in the queue index (guarded by q.mu).
type jobState int

const (
	stateIdle    jobState = iota // not scheduled (being set up)
	stateStalled                 // a write failed; runs again when its retry timer fires
	stateBlocked                 // queued, waiting for dependencies to finalize
	stateReady                   // in the ready heap, waiting for a run slot
	stateActive                  // a goroutine runs it
	stateParked                  // suspended, no goroutine
	stateWaking                  // woken from parked, clearing its suspension
	stateClaimed                 // taken out of scheduling by a cancel
	stateDone                    // finalized
)

// logTailLen is how many recent log entries a live job keeps in memory, so
// that waiters get new entries from the producer instead of the store.
const logTailLen = 32

// snapshot is an immutable view of a job: readers load it without locks.
type snapshot struct {
	rec        *jobRecord
	status     Status
	lastSerial int64
	archived   bool
	// tail holds the last log entries (serials up to lastSerial, in order);
	// dropped once the job is finalized.
	tail []logEntry
	// summaries are the ops' "summary" field, made when an op's input
	// is first seen or changes (its secrets are scrubbed), so that queries
	// never parse the stored inputs.
	summaries []string
}

// job is the in-memory state of one non-archived job.
type job struct {
	id    int64
	opIDs []string // immutable

	// wmu serialises the durable changes of this job; it is held across the
	// store write so that writes land in the order they were made.
	wmu  sync.Mutex
	snap atomic.Pointer[snapshot]

	mu       sync.Mutex // guards subs and opCancel
	subs     map[*Subscription]struct{}
	opCancel context.CancelFunc // cancels the ctx of the running RunOp

	// Index fields, guarded by q.mu.
	state       jobState
	heapIdx     int
	heapPrio    int
	blockers    int
	susp        *suspension // registered suspension (pointer into the record)
	timer       *time.Timer
	wakePending bool            // woken while its goroutine was still returning
	stalls      int             // failed runs in a row (outStalled), for the retry pause
	retry       *time.Timer     // runs a stalled job again
	facts       *jobfilter.Job  // what the filter rules look at, made when first needed
	rejecting   bool            // a REJECT rule's cancel of this job is under way
	verdict     *jobfilter.Rule // the rule deciding this job, as of rule list verdictGen
	verdictGen  uint64
}

func (q *Queue) newJob(rec *jobRecord, lastSerial int64) *job {
	j := &job{id: rec.ID, opIDs: make([]string, len(rec.Ops)), heapIdx: -1}
	for i := range rec.Ops {
		j.opIDs[i] = opIDOf(rec.Ops[i].Input)
	}
	sums := make([]string, len(rec.Ops))
	for i := range rec.Ops {
		sums[i] = q.summary(j.opIDs[i], rec.Ops[i].Input)
	}
	j.snap.Store(&snapshot{rec: rec, status: rec.status(), lastSerial: lastSerial, summaries: sums})
	return j
}

// opSummaries returns the summaries of rec's ops: prev's, which were made
// for prevRec, unless an op's input is no longer the one they were made
// from. Inputs are never edited in place, only replaced.
func (q *Queue) opSummaries(j *job, rec, prevRec *jobRecord, prev []string) []string {
	var out []string
	for i := range rec.Ops {
		if sameBytes(rec.Ops[i].Input, prevRec.Ops[i].Input) {
			continue
		}
		if out == nil {
			out = slices.Clone(prev)
		}
		out[i] = q.summary(j.opIDs[i], rec.Ops[i].Input)
	}
	if out == nil {
		return prev
	}
	return out
}

// sameBytes reports whether a and b are the same slice (not merely equal
// contents).
func sameBytes(a, b []byte) bool {
	return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0])
}

func (j *job) snapshot() *snapshot { return j.snap.Load() }

// update changes a job durably: fn edits a copy of the current record (it
// returns errNoChange to skip the write); the copy is written, then
// published, then subscribers are woken.
func (q *Queue) update(ctx context.Context, j *job, fn func(r *jobRecord) error) error {
	j.wmu.Lock()
	defer j.wmu.Unlock()
	return q.updateLocked(ctx, j, fn)
}

// updateLocked is update with j.wmu already held.
func (q *Queue) updateLocked(ctx context.Context, j *job, fn func(r *jobRecord) error) error {
	cur := j.snapshot().rec
	next := cur.clone()
	if err := fn(next); err != nil {
		if errors.Is(err, errNoChange) {
			return nil
		}
		return err
	}
	data, err := q.encodeNext(j, cur, next)
	if err != nil {
		return err
	}
	// The key must still exist: a job is never rewritten after archiving.
	res, err := q.st.Txn(ctx, []store.Cmp{store.Exists(q.jobKey(j.id))},
		[]store.Op{store.Put(q.jobKey(j.id), data)}, nil)
	if err != nil {
		return fmt.Errorf("jobqueue: writing job %d: %w", j.id, err)
	}
	if !res.Succeeded {
		return fmt.Errorf("jobqueue: job %d vanished from the store", j.id)
	}
	q.publish(j, next)
	return nil
}

// encodeNext encodes next, the record that replaces cur, as every write of
// a running job's record does: the ops next finishes and cur did not lose
// their secret parameters in that same write (scrubEnded).
func (q *Queue) encodeNext(j *job, cur, next *jobRecord) ([]byte, error) {
	q.scrubEnded(cur, next)
	data, err := next.encode()
	if err != nil {
		return nil, fmt.Errorf("jobqueue: encoding job %d: %w", j.id, err)
	}
	return data, nil
}

// scrubEnded drops the secret parameters of every op that next finishes
// and cur did not: they go with the write that records the end, so the
// stored record never holds them past it. An op that has not ended keeps
// them, since it may resume after a crash.
func (q *Queue) scrubEnded(cur, next *jobRecord) {
	if q.scrub == nil {
		return
	}
	for i := range next.Ops {
		if next.Ops[i].Status.Finalized() && !cur.Ops[i].Status.Finalized() {
			next.Ops[i].Input = q.scrub(next.Ops[i].Input)
		}
	}
}

// scrubAll drops the secret parameters of every op of a finished job
// (records that ended before Options.Scrub was set may still hold them).
func (q *Queue) scrubAll(rec *jobRecord) *jobRecord {
	if q.scrub == nil {
		return rec
	}
	var out *jobRecord
	for i := range rec.Ops {
		in := q.scrub(rec.Ops[i].Input)
		if bytes.Equal(in, rec.Ops[i].Input) {
			continue
		}
		if out == nil {
			out = rec.clone()
		}
		out.Ops[i].Input = in
	}
	if out == nil {
		return rec
	}
	return out
}

// apply publishes a change without writing it; the next write of the job
// persists it. Only for changes a crash may lose.
func (q *Queue) apply(j *job, fn func(r *jobRecord) error) {
	j.wmu.Lock()
	defer j.wmu.Unlock()
	next := j.snapshot().rec.clone()
	if fn(next) != nil {
		return
	}
	q.publish(j, next)
}

// publish makes a persisted record visible. Caller holds j.wmu.
func (q *Queue) publish(j *job, rec *jobRecord) {
	old := j.snapshot()
	ns := &snapshot{rec: rec, status: rec.status(), lastSerial: old.lastSerial, archived: old.archived, tail: old.tail,
		summaries: q.opSummaries(j, rec, old.rec, old.summaries)}
	if ns.status.Finalized() {
		ns.tail = nil
	}
	if !old.status.Finalized() && ns.status.Finalized() {
		// Reported before the status shows, so whoever sees the job final
		// also finds it counted.
		q.reportFinal(j, ns)
	}
	j.snap.Store(ns)
	// The index is updated before anyone is told, so that whoever learns
	// of a final status also finds the queue room and dependents released.
	if !old.status.Finalized() && ns.status.Finalized() {
		q.onFinalized(j)
	} else if ns.rec.priority() != old.rec.priority() {
		q.mu.Lock()
		q.reprioritize(j)
		q.mu.Unlock()
	}
	j.notify()
}

// reportFinal tells Options.Finalized about a job that just finished.
func (q *Queue) reportFinal(j *job, s *snapshot) {
	if q.final == nil {
		return
	}
	var took time.Duration
	if r := s.rec; r.Received != nil && r.End != nil {
		took = max(r.End.Time().Sub(r.Received.Time()), 0)
	}
	op := ""
	if len(j.opIDs) > 0 {
		op = j.opIDs[0]
	}
	q.final(op, s.status, took)
}

// notify wakes the job's subscribers; each channel holds at most one
// pending notification, so a slow reader sees changes coalesced.
func (j *job) notify() {
	j.mu.Lock()
	for s := range j.subs {
		select {
		case s.ch <- struct{}{}:
		default:
		}
	}
	j.mu.Unlock()
}

// onFinalized updates the index when a job reaches a final status: its
// dependents may become eligible, the ops suspended on its end wake, and
// its run slot bookkeeping ends.
func (q *Queue) onFinalized(j *job) {
	q.mu.Lock()
	q.nonFinal--
	if j.heapIdx >= 0 {
		q.ready.remove(j)
	}
	q.unregisterSuspension(j)
	q.stopRetryLocked(j)
	j.facts, j.verdict, j.verdictGen = nil, nil, 0 // the filter rules look at live jobs only
	for _, d := range q.dependents[j.id] {
		d.blockers--
		if d.blockers <= 0 && d.state == stateBlocked {
			q.pushReady(d)
		}
	}
	delete(q.dependents, j.id)
	q.wakeJobEndedLocked(j)
	if j.state != stateActive {
		j.state = stateDone
	}
	q.mu.Unlock()
	q.schedule()
}

// Mutations used by several paths. Each returns an update function.

// cancelRemaining marks every unfinished op from idx on as canceled.
func cancelRemaining(now time.Time, idx int) func(r *jobRecord) error {
	return func(r *jobRecord) error {
		if r.status().Finalized() {
			return errNoChange
		}
		ts := tsOf(now)
		for i := idx; i < len(r.Ops); i++ {
			if !r.Ops[i].Status.Finalized() {
				finishOp(&r.Ops[i], StatusCanceled, canceledResult, ts)
			}
		}
		r.End = ts
		return nil
	}
}

// failFrom marks op idx as failed with result and the ops after it as
// failed because of it, as Ganeti does.
func failFrom(now time.Time, idx int, result []byte) func(r *jobRecord) error {
	return func(r *jobRecord) error {
		if r.Ops[idx].Status.Finalized() {
			return errNoChange
		}
		ts := tsOf(now)
		finishOp(&r.Ops[idx], StatusError, result, ts)
		failRest(r, idx+1, ts)
		r.End = ts
		return nil
	}
}

// failRest marks the unfinished ops from idx on as failed because a
// preceding op failed.
func failRest(r *jobRecord, idx int, ts *Timestamp) {
	prec := encodeError(precedingFailed)
	for i := idx; i < len(r.Ops); i++ {
		if !r.Ops[i].Status.Finalized() {
			finishOp(&r.Ops[i], StatusError, prec, ts)
		}
	}
}

func finishOp(op *opRecord, st Status, result []byte, ts *Timestamp) {
	op.Status = st
	op.Result = result
	op.End = ts
	op.Locks = nil
	op.Suspend = nil
	op.Woken = ""
	op.Kill = false
}

var precedingFailed = errors.New("Preceding opcode failed")

// Index helpers; callers hold q.mu.

// enqueue files a queued job as blocked (on unfinished dependencies) or
// ready.
func (q *Queue) enqueue(j *job) {
	rec := j.snapshot().rec
	j.blockers = 0
	for i := range rec.Ops {
		if rec.Ops[i].Status.Finalized() {
			continue
		}
		for _, d := range rec.Ops[i].Depends {
			if q.blockOn(j, d.JobID) {
				j.blockers++
			}
		}
	}
	if j.blockers > 0 {
		j.state = stateBlocked
		return
	}
	q.pushReady(j)
}

// blockOn registers j as a dependent of dep if dep is a live, unfinished
// job. Unknown and archived jobs do not block: the dependency check at the
// op's start reports them.
func (q *Queue) blockOn(j *job, dep int64) bool {
	if dep == j.id {
		return false
	}
	d, ok := q.jobs[dep]
	if !ok || d.snapshot().status.Finalized() {
		return false
	}
	q.dependents[dep] = append(q.dependents[dep], j)
	return true
}

func (q *Queue) pushReady(j *job) {
	j.state = stateReady
	j.heapPrio = j.snapshot().rec.priority()
	q.ready.push(j)
}

func (q *Queue) reprioritize(j *job) {
	if j.heapIdx >= 0 {
		j.heapPrio = j.snapshot().rec.priority()
		q.ready.fix(j)
	}
}

// schedule starts ready jobs while fewer than MaxRunning run.
func (q *Queue) schedule() {
	if !q.started.Load() {
		return
	}
	limit := q.maxRun()
	if limit < 1 {
		limit = DefaultMaxRunning // an unset parameter, not "run nothing"
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.stopping {
		return
	}
	if len(q.rules) == 0 {
		for q.active < limit && q.ready.Len() > 0 {
			q.startLocked(q.ready.pop())
		}
		return
	}
	// With filter rules, ready jobs are considered in order and those the
	// rules hold stay in the heap.
	fr := q.newFilterRound()
	var held []*job
	for q.active < limit && q.ready.Len() > 0 {
		j := q.ready.pop()
		if !q.admits(fr, j) {
			held = append(held, j)
			continue
		}
		q.startLocked(j)
	}
	for _, j := range held {
		q.ready.push(j)
	}
}

// startLocked starts a goroutine running j, taken from the ready heap.
func (q *Queue) startLocked(j *job) {
	j.state = stateActive
	q.active++
	q.wg.Add(1)
	go q.runJob(j)
}

// jobHeap orders ready jobs by priority, then id (FIFO).
type jobHeap struct{ items []*job }

func (h *jobHeap) Len() int { return len(h.items) }

func (h *jobHeap) less(a, b int) bool {
	x, y := h.items[a], h.items[b]
	if x.heapPrio != y.heapPrio {
		return x.heapPrio < y.heapPrio
	}
	return x.id < y.id
}

func (h *jobHeap) swap(a, b int) {
	h.items[a], h.items[b] = h.items[b], h.items[a]
	h.items[a].heapIdx = a
	h.items[b].heapIdx = b
}

func (h *jobHeap) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if !h.less(i, p) {
			return
		}
		h.swap(i, p)
		i = p
	}
}

func (h *jobHeap) down(i int) bool {
	start, n := i, len(h.items)
	for {
		l := 2*i + 1
		if l >= n {
			break
		}
		m := l
		if r := l + 1; r < n && h.less(r, l) {
			m = r
		}
		if !h.less(m, i) {
			break
		}
		h.swap(i, m)
		i = m
	}
	return i > start
}

func (h *jobHeap) push(j *job) {
	j.heapIdx = len(h.items)
	h.items = append(h.items, j)
	h.up(j.heapIdx)
}

func (h *jobHeap) pop() *job {
	j := h.items[0]
	h.remove(j)
	return j
}

func (h *jobHeap) remove(j *job) {
	i, last := j.heapIdx, len(h.items)-1
	if i != last {
		h.swap(i, last)
	}
	h.items[last] = nil
	h.items = h.items[:last]
	j.heapIdx = -1
	if i != last {
		h.fix(h.items[i])
	}
}

func (h *jobHeap) fix(j *job) {
	if !h.down(j.heapIdx) {
		h.up(j.heapIdx)
	}
}
