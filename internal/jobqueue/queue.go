// Package jobqueue is Corral's durable job queue: jobs of one or more
// opcodes with Ganeti's statuses, priorities, dependencies, cancel and
// archive, persisted in the store so that a restarted (or newly elected)
// master resumes running opcodes from their last committed step instead of
// failing them.
//
// The queue knows nothing of opcode semantics or locks: it hands each
// opcode to an OpRunner (the logical-unit layer) together with an OpHandle
// through which the runner records its locks, logs, commits its steps and
// may park the opcode until a deadline or an event.
//
// Durability rule: every change of a job is written to the store (the
// transaction has returned) before anyone can observe it, acknowledge it or
// act on it. Writers of one job are serialised by the job's write mutex;
// readers see immutable snapshots and never wait for the disk.
package jobqueue

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/corral/corral/internal/ecode"
	"github.com/corral/corral/internal/jobfilter"
	"github.com/corral/corral/internal/store"
)

// Defaults of the cluster parameters the queue reads live.
const (
	DefaultMaxRunning = 20
	DefaultQueueSize  = 5000
	DefaultPrefix     = "/queue/"

	// idBlockSize ids are reserved with one store write and then handed
	// out from memory; a crash skips the rest of a block.
	idBlockSize = 1000
)

var (
	// ErrConflict is returned by CommitStep when a compare of the step failed;
	// nothing was written.
	ErrConflict = errors.New("jobqueue: step compare failed, nothing written")
	// ErrCanceled is returned by OpHandle methods once the job was asked to
	// cancel; a runner returns it (or a wrap of it) to finish as canceled.
	ErrCanceled = errors.New("jobqueue: job canceled")
	// ErrSuspended is returned by OpHandle.Suspend; the runner returns it from
	// RunOp to park the opcode.
	ErrSuspended = errors.New("jobqueue: op suspended")

	errNotStarted = errors.New("jobqueue: queue not started")
	errStopped    = errors.New("jobqueue: queue stopped")
	// errNoChange makes an update function skip the write.
	errNoChange = errors.New("no change")
)

// OpRunner executes opcodes; the logical-unit layer implements it.
type OpRunner interface {
	// Recover is called at Start for each op that was running (or waiting
	// with recorded locks) when the master stopped, with h.RecordedLocks();
	// it must re-acquire those locks before returning.
	Recover(ctx context.Context, h *OpHandle) error
	// RunOp executes op h.OpIndex() of a job, starting at h.Cursor(). The op
	// is "waiting" for a fresh (or woken) op: RunOp acquires locks, then calls
	// h.SetRunning. It is "running" when resumed after a restart
	// (h.Resumed()). It returns the op result or an error (an *ecode.Error
	// keeps its class); ErrSuspended (from h.Suspend) parks the op.
	RunOp(ctx context.Context, h *OpHandle) (any, error)
}

// Options configure a Queue.
type Options struct {
	Store  store.Store
	Prefix string // key prefix, default "/queue/"
	Runner OpRunner
	// Summary renders an op for the "summary" field, e.g.
	// "INSTANCE_CREATE(inst1)". Default: OP_ID without "OP_".
	Summary func(opID string, input json.RawMessage) string
	// Validate is called at submission for each op; an error refuses the job.
	Validate func(opID string, input json.RawMessage) error
	// Scrub returns an op's input without the values the op needs only
	// while it runs (secret parameters), or the input itself if it has
	// none. The write that records an op's end (success, error, cancel)
	// stores its scrubbed input, so no finished job keeps a secret in the
	// store, its archive or a backup. Default: inputs are kept as they are.
	Scrub func(input json.RawMessage) json.RawMessage
	// MaxRunning is the cluster's max_running_jobs, read at each scheduling
	// round. Default (also for values < 1) 20.
	MaxRunning func() int
	// QueueSize is the cluster's job_queue_size: submissions beyond that many
	// non-finalized jobs are refused with JobQueueFull. Default (also for
	// values < 1) 5000.
	QueueSize func() int
	Now       func() time.Time
	Logger    *slog.Logger
	// Finalized, when set, is called each time a job reaches a final
	// status (not for jobs already final when the queue starts), with its
	// first op's OP_ID and the time from its submission to its end; it
	// feeds metrics. It runs under the job's write lock, before the final
	// status is visible: it must be quick and must not call the queue.
	Finalized func(firstOp string, status Status, took time.Duration)
}

// SubmitResult is the outcome of one job of SubmitMany.
type SubmitResult struct {
	OK    bool
	JobID int64
	Err   error
}

// Stats counts jobs for metrics.
type Stats struct {
	ByStatus  map[Status]int // non-archived jobs by job status
	Executing int            // jobs with an op in the runner now
	Ready     int            // jobs eligible and waiting for a run slot
	Blocked   int            // queued jobs waiting for dependencies
	Suspended int            // jobs parked by OpHandle.Suspend
}

// Queue is the job queue. Create it with New, then Start it.
type Queue struct {
	st      store.Store
	runner  OpRunner
	summary func(string, json.RawMessage) string
	valid   func(string, json.RawMessage) error
	scrub   func(json.RawMessage) json.RawMessage
	maxRun  func() int
	qsize   func() int
	now     func() time.Time
	log     *slog.Logger
	prefix  string
	final   func(string, Status, time.Duration)

	idMu    sync.Mutex
	idNext  int64 // next id to hand out
	idLimit int64 // first id not reserved in the store
	idRev   int64 // mod revision of the idblock key (0: absent)

	drained    atomic.Bool
	started    atomic.Bool
	startMu    sync.Mutex // serialises Start and Stop
	startTried bool       // guarded by startMu
	runCtx     context.Context
	stopRun    context.CancelFunc
	wg         sync.WaitGroup
	stopOnce   sync.Once

	// mu guards the queue index. Lock order: job.wmu, then job.mu, then
	// q.mu; q.mu is never held during store I/O or a runner call.
	mu         sync.RWMutex
	jobs       map[int64]*job
	ready      jobHeap
	dependents map[int64][]*job
	events     map[string]map[*job]struct{}
	active     int
	nonFinal   int
	reserved   int
	stopping   bool
	// rules are the job filter rules in evaluation order (filters.go);
	// replaced, never edited in place. filterMu serialises their writes.
	rules    []*jobfilter.Rule
	rulesGen uint64 // counts rule list changes, for the verdicts cached on jobs
	filterMu sync.Mutex
}

// New checks the options and makes a queue; Start loads and runs it.
func New(opts Options) (*Queue, error) {
	if opts.Store == nil {
		return nil, errorf("Options.Store is required")
	}
	if opts.Runner == nil {
		return nil, errorf("Options.Runner is required")
	}
	q := &Queue{
		st:         opts.Store,
		runner:     opts.Runner,
		summary:    opts.Summary,
		valid:      opts.Validate,
		scrub:      opts.Scrub,
		maxRun:     opts.MaxRunning,
		qsize:      opts.QueueSize,
		now:        opts.Now,
		log:        opts.Logger,
		prefix:     opts.Prefix,
		final:      opts.Finalized,
		jobs:       map[int64]*job{},
		dependents: map[int64][]*job{},
		events:     map[string]map[*job]struct{}{},
	}
	if q.prefix == "" {
		q.prefix = DefaultPrefix
	}
	if q.summary == nil {
		q.summary = defaultSummary
	}
	if q.maxRun == nil {
		q.maxRun = func() int { return DefaultMaxRunning }
	}
	if q.qsize == nil {
		q.qsize = func() int { return DefaultQueueSize }
	}
	if q.now == nil {
		q.now = time.Now
	}
	if q.log == nil {
		q.log = slog.New(slog.DiscardHandler)
	}
	q.runCtx, q.stopRun = context.WithCancel(context.Background())
	return q, nil
}

// Store keys.
func (q *Queue) jobKey(id int64) string     { return fmt.Sprintf("%sjobs/%020d", q.prefix, id) }
func (q *Queue) archiveKey(id int64) string { return fmt.Sprintf("%sarchive/%020d", q.prefix, id) }
func (q *Queue) logPrefix(id int64) string  { return fmt.Sprintf("%slog/%020d/", q.prefix, id) }
func (q *Queue) logKey(id, serial int64) string {
	return fmt.Sprintf("%slog/%020d/%010d", q.prefix, id, serial)
}
func (q *Queue) idKey() string    { return q.prefix + "idblock" }
func (q *Queue) drainKey() string { return q.prefix + "drain" }

// Start loads the queue from the store, lets the runner re-acquire the
// locks of every op that was running (or waiting with recorded locks),
// resumes those ops, and only then admits queued and new jobs.
func (q *Queue) Start(ctx context.Context) error {
	q.startMu.Lock()
	defer q.startMu.Unlock()
	if q.startTried {
		// A failed Start leaves jobs loaded and locks recovered: the master
		// must give up this Queue, not retry.
		return errorf("Start was already called")
	}
	q.startTried = true
	q.mu.RLock()
	stopping := q.stopping
	q.mu.RUnlock()
	if stopping {
		return errStopped
	}
	loaded, err := q.load(ctx)
	if err != nil {
		return err
	}
	if err := q.loadFilters(ctx); err != nil {
		return err
	}

	var recovered, ready, parked, pending []*job
	for _, j := range loaded {
		rec := j.snapshot().rec
		if rec.status().Finalized() {
			continue
		}
		idx := rec.current()
		op := &rec.Ops[idx]
		if b := op.Began; b != nil && b.Step == op.Cursor {
			// A step unsafe to repeat was cut off: running it again could
			// do it twice, and a pending cancel would hide that it may
			// have acted. The op fails before anything takes its locks.
			if err := q.failInterrupted(ctx, j, idx, *b); err != nil {
				return err
			}
			continue
		}
		switch op.Status {
		case StatusCanceling:
			switch {
			case op.begun() && len(op.Locks) > 0:
				// It did part of its work: the runner undoes it, under the
				// locks it held.
				recovered = append(recovered, j)
			case op.begun():
				ready = append(ready, j)
			default:
				// Nothing holds the op's locks any more; finish the cancel now.
				if err := q.update(ctx, j, cancelRemaining(q.now(), idx)); err != nil {
					return fmt.Errorf("jobqueue: finishing the cancel of job %d: %w", j.id, err)
				}
			}
		case StatusRunning:
			recovered = append(recovered, j)
		case StatusWaiting:
			switch {
			case len(op.Locks) > 0:
				recovered = append(recovered, j)
			case op.Suspend != nil:
				parked = append(parked, j)
			default:
				ready = append(ready, j)
			}
		default:
			pending = append(pending, j)
		}
	}

	var resume []*job
	for _, j := range recovered {
		rec := j.snapshot().rec
		idx := rec.current()
		h := q.newHandle(j, idx, rec.Ops[idx].Status == StatusRunning)
		err := q.runRecover(ctx, h)
		if err == nil {
			resume = append(resume, j)
			continue
		}
		if ctx.Err() != nil {
			return fmt.Errorf("jobqueue: recovering job %d: %w", j.id, err)
		}
		q.log.Error("cannot recover the locks of a job; failing its op", "job", j.id, "op", idx, "err", err)
		if err := q.update(ctx, j, failFrom(q.now(), idx, encodeError(err))); err != nil {
			return fmt.Errorf("jobqueue: failing job %d after its recovery failed: %w", j.id, err)
		}
	}

	q.mu.Lock()
	for _, j := range resume {
		j.state = stateActive
		q.active++
		q.wg.Add(1)
		go q.runJob(j)
	}
	for _, j := range ready {
		q.pushReady(j)
	}
	for _, j := range pending {
		q.enqueue(j)
	}
	q.mu.Unlock()
	for _, j := range parked {
		q.park(j)
	}
	q.started.Store(true)
	q.schedule()
	q.log.Info("job queue started", "jobs", len(loaded), "resumed", len(resume), "parked", len(parked))
	return nil
}

// failInterrupted fails op idx of j, whose unsafe step b began and never
// committed, with b's error; the error also goes to the job log so that
// a client following the job sees why it ended. Nothing is undone (see
// BeganStep.Err).
func (q *Queue) failInterrupted(ctx context.Context, j *job, idx int, b BeganStep) error {
	err := b.Err(j.opIDs[idx])
	q.log.Error("an op was interrupted in a step that is unsafe to repeat; failing it", "job", j.id, "op", idx, "step", b.Step, "name", b.Name)
	h := q.newHandle(j, idx, false)
	if lerr := h.Log(ctx, "message", err.Error()); lerr != nil {
		return fmt.Errorf("jobqueue: logging the interruption of job %d: %w", j.id, lerr)
	}
	if uerr := q.update(ctx, j, failFrom(q.now(), idx, encodeError(err))); uerr != nil {
		return fmt.Errorf("jobqueue: failing job %d after an interrupted unsafe step: %w", j.id, uerr)
	}
	return nil
}

func (q *Queue) runRecover(ctx context.Context, h *OpHandle) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = ecode.ExecErrorf("recover panicked: %v", p)
		}
	}()
	return q.runner.Recover(ctx, h)
}

// load reads the drain flag, the id allocator and every non-archived job.
func (q *Queue) load(ctx context.Context) ([]*job, error) {
	kv, err := q.st.Get(ctx, q.drainKey())
	if err != nil {
		return nil, fmt.Errorf("jobqueue: reading the drain flag: %w", err)
	}
	q.drained.Store(kv != nil)

	next := int64(1)
	kv, err = q.st.Get(ctx, q.idKey())
	if err != nil {
		return nil, fmt.Errorf("jobqueue: reading the id block: %w", err)
	}
	if kv != nil {
		n, err := strconv.ParseInt(string(kv.Value), 10, 64)
		if err != nil || n < 1 {
			return nil, fmt.Errorf("jobqueue: corrupt id block %q", kv.Value)
		}
		next, q.idRev = n, kv.ModRevision
	}

	kvs, _, err := q.st.Range(ctx, q.prefix+"jobs/", store.RangeOptions{})
	if err != nil {
		return nil, fmt.Errorf("jobqueue: loading jobs: %w", err)
	}
	loaded := make([]*job, 0, len(kvs))
	nonFinal := 0
	for i := range kvs {
		rec, err := decodeRecord(kvs[i].Value)
		if err == nil && q.jobKey(rec.ID) != kvs[i].Key {
			err = fmt.Errorf("record id %d does not match its key", rec.ID)
		}
		if err != nil {
			// A damaged record must not stop the master; it stays in the
			// store for inspection and is invisible to the queue.
			q.log.Error("skipping unreadable job record", "key", kvs[i].Key, "err", err)
			continue
		}
		serial, err := q.lastSerial(ctx, rec.ID)
		if err != nil {
			return nil, err
		}
		loaded = append(loaded, q.newJob(rec, serial))
		if !rec.status().Finalized() {
			nonFinal++
		}
		next = max(next, rec.ID+1)
	}
	slices.SortFunc(loaded, func(a, b *job) int { return cmp.Compare(a.id, b.id) })
	q.mu.Lock()
	for _, j := range loaded {
		q.jobs[j.id] = j
	}
	q.nonFinal += nonFinal
	q.mu.Unlock()
	q.idMu.Lock()
	q.idNext, q.idLimit = next, next
	q.idMu.Unlock()
	return loaded, nil
}

// lastSerial finds a job's last log serial from the log keys alone.
func (q *Queue) lastSerial(ctx context.Context, id int64) (int64, error) {
	kvs, _, err := q.st.Range(ctx, q.logPrefix(id), store.RangeOptions{KeysOnly: true})
	if err != nil {
		return 0, fmt.Errorf("jobqueue: loading the log of job %d: %w", id, err)
	}
	if len(kvs) == 0 {
		return 0, nil
	}
	last := kvs[len(kvs)-1].Key
	n, err := strconv.ParseInt(last[strings.LastIndexByte(last, '/')+1:], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("jobqueue: bad log key %q", last)
	}
	return n, nil
}

// Stop stops scheduling and cancels the context of every running op, then
// waits for the job goroutines to return. Ops interrupted this way keep
// their status and last committed step in the store and resume at the next
// Start. Stop does not close the store.
func (q *Queue) Stop() {
	q.stopOnce.Do(func() {
		q.startMu.Lock()
		q.mu.Lock()
		q.stopping = true
		for _, j := range q.jobs {
			if j.timer != nil {
				j.timer.Stop()
				j.timer = nil
			}
			q.stopRetryLocked(j)
		}
		q.mu.Unlock()
		q.started.Store(false)
		q.stopRun()
		q.startMu.Unlock()
		q.wg.Wait()
		q.log.Info("job queue stopped")
	})
}

func (q *Queue) isStopping() bool { return q.runCtx.Err() != nil }

// SetDrained sets or clears the drain flag: a drained queue refuses Submit
// and SubmitMany (SubmitToDrained still works).
func (q *Queue) SetDrained(ctx context.Context, drained bool) error {
	op := store.Delete(q.drainKey())
	if drained {
		op = store.Put(q.drainKey(), []byte("1"))
	}
	if _, err := q.st.Txn(ctx, nil, []store.Op{op}, nil); err != nil {
		return fmt.Errorf("jobqueue: setting the drain flag: %w", err)
	}
	q.drained.Store(drained)
	return nil
}

// Drained reports the drain flag.
func (q *Queue) Drained() bool { return q.drained.Load() }

// Stats counts the non-archived jobs.
func (q *Queue) Stats() Stats {
	s := Stats{ByStatus: map[Status]int{}}
	q.mu.RLock()
	defer q.mu.RUnlock()
	for _, j := range q.jobs {
		s.ByStatus[j.snapshot().status]++
		switch j.state {
		case stateBlocked:
			s.Blocked++
		case stateParked:
			s.Suspended++
		}
	}
	s.Executing = q.active
	s.Ready = q.ready.Len()
	return s
}

// encodeError renders an op error as Ganeti does in opresult.
func encodeError(err error) json.RawMessage {
	b, merr := json.Marshal(ecode.Wrap(err).Encode())
	if merr != nil {
		b, _ = json.Marshal(ecode.ExecErrorf("unencodable error").Encode())
	}
	return b
}

// canceledResult is Ganeti's result text for ops canceled by request.
var canceledResult = json.RawMessage(`"Job canceled by request"`)
