package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/corral/corral/internal/confdb"
	"github.com/corral/corral/internal/config"
	"github.com/corral/corral/internal/ecode"
	"github.com/corral/corral/internal/failpoint"
	"github.com/corral/corral/internal/jobqueue"
	"github.com/corral/corral/internal/locking"
	"github.com/corral/corral/internal/opcodes"
)

// Processor runs opcodes for the job queue.
type Processor struct {
	Cfg   *confdb.DB
	Locks *locking.Manager
	// RPC reaches the nodes for StepCtx.RPC.
	RPC   NodeRPC
	Units *Registry
	Log   *slog.Logger
	// Failpoints kill corrald at step-began, step-committed and
	// rpc-returned in crash tests; nil in production.
	Failpoints *failpoint.Set
	// Wake wakes the ops suspended on an event (the job queue's Notify);
	// set once the queue exists. Deliver events with Notify.
	Wake func(event string)

	mu        sync.Mutex
	recovered map[string]*locking.Held // "job/op" -> locks re-acquired at start-up
}

// NewProcessor wires a processor.
func NewProcessor(cfg *confdb.DB, locks *locking.Manager, rpc NodeRPC, units *Registry, log *slog.Logger) *Processor {
	return &Processor{Cfg: cfg, Locks: locks, RPC: rpc, Units: units, Log: log, recovered: map[string]*locking.Held{}}
}

// Ops is the opcode table the processor decodes against.
func (p *Processor) Ops() *opcodes.Table { return p.Units.Table() }

func opKey(h *jobqueue.OpHandle) string { return fmt.Sprintf("%d/%d", h.JobID(), h.OpIndex()) }

func owner(h *jobqueue.OpHandle) string {
	return fmt.Sprintf("job %d/op %d %s", h.JobID(), h.OpIndex(), h.OpID())
}

// recoverTimeout bounds re-acquiring an op's recorded locks at start-up:
// recorded locks never conflict, so waiting means a broken record, and the
// op then fails instead of the master never starting.
const recoverTimeout = 30 * time.Second

// Recover re-acquires the locks an op held when the master stopped.
func (p *Processor) Recover(ctx context.Context, h *jobqueue.OpHandle) error {
	reqs, err := DecodeLocks(h.RecordedLocks())
	if err != nil {
		return err
	}
	held := p.Locks.NewOwner(owner(h))
	rctx, cancel := context.WithTimeout(ctx, recoverTimeout)
	defer cancel()
	if err := acquireAll(rctx, p.Locks, held, h.Priority(), reqs); err != nil {
		p.Log.Error("cannot re-acquire the recorded locks of an op", "job", h.JobID(), "op", h.OpIndex(), "locks", h.RecordedLocks(), "err", err)
		return ecode.ExecErrorf("cannot re-acquire the locks this op held before the master restarted: %w", err)
	}
	p.mu.Lock()
	p.recovered[opKey(h)] = held
	p.mu.Unlock()
	return nil
}

// ErrCanceledByRequest is the failure a unit's Revert gets when its job was
// canceled after the op began (parked in a step, or with steps committed).
var ErrCanceledByRequest error = canceledError{}

type canceledError struct{}

func (canceledError) Error() string        { return "the job was canceled" }
func (canceledError) Is(target error) bool { return target == jobqueue.ErrCanceled }

// RunOp executes one opcode of a job.
func (p *Processor) RunOp(ctx context.Context, h *jobqueue.OpHandle) (any, error) {
	// Locks re-acquired at start-up belong to this op whatever happens
	// next: take them first so every return releases them.
	p.mu.Lock()
	held, resumed := p.recovered[opKey(h)]
	delete(p.recovered, opKey(h))
	p.mu.Unlock()
	if !resumed {
		held = p.Locks.NewOwner(owner(h))
	}
	// Locks go back only once the op's outcome is durable (and with it the
	// cleared lock record): see jobqueue.OpHandle.OnOutcome.
	h.OnOutcome(func() { held.Release() })

	op, err := p.Units.Table().Decode(h.Input())
	if err != nil {
		return nil, err
	}
	if b, ok := h.Began(); ok {
		// The queue fails such ops when it starts; this catches any other
		// way back into an unsafe step that began (a step that suspended).
		return nil, b.Err(op.ID)
	}
	lu, err := p.Units.newUnit(op)
	if err != nil {
		return nil, err
	}
	cursor, data := h.Cursor()
	// Names are checked against the uuids before the first step only: a
	// resumed op may have renamed or removed its object itself.
	if r, ok := lu.(NameResolver); ok && cursor == 0 {
		if err := r.ResolveNames(op); err != nil {
			return nil, err
		}
	}
	if len(data) > 0 {
		if err := json.Unmarshal(data, lu); err != nil {
			return nil, ecode.ExecErrorf("cannot restore the plan of %s: %w", op.ID, err)
		}
	}
	if !resumed {
		reqs := lu.Locks(op)
		if err := acquireAll(ctx, p.Locks, held, h.Priority(), reqs); err != nil {
			if errors.Is(err, context.Canceled) && h.Canceled() {
				return nil, jobqueue.ErrCanceled
			}
			return nil, err
		}
	}
	if h.Canceled() {
		// Canceled after it began (the queue runs such an op once more):
		// its unit undoes what the committed steps did, under its locks.
		p.revert(ctx, lu, h, op, cursor, ErrCanceledByRequest)
		return nil, ErrCanceledByRequest
	}
	if !resumed {
		// One write records the locks and marks the op running.
		if err := h.SetRunningWithLocks(ctx, EncodeLocks(held.Held())); err != nil {
			return nil, err
		}
	}
	if h.Resumed() {
		_ = h.Log(ctx, "message", fmt.Sprintf("resumed after a master restart at step %d", cursor))
	} else if resumed {
		if err := h.SetRunning(ctx); err != nil {
			return nil, err
		}
	}

	if cursor == 0 {
		if err := lu.Prereq(ctx, op); err != nil {
			return nil, err
		}
		if op.Bool("dry_run") {
			return lu.Result(), nil
		}
	}
	steps := lu.Steps()
	unsafe, _ := lu.(UnsafeSteps)
	for i := cursor; i < len(steps); i++ {
		if unsafe != nil {
			if err := p.beginUnsafe(ctx, h, unsafe, op, i, steps[i].Name); err != nil {
				if ctx.Err() != nil && !h.Canceled() {
					return nil, ctx.Err()
				}
				p.revert(ctx, lu, h, op, i, err)
				return nil, err
			}
		}
		p.Failpoints.Hit(failpoint.StepBegan)
		sc := &StepCtx{p: p, h: h, step: i, op: op, unsafe: unsafe != nil && unsafe.UnsafeToRepeat(op, i) != ""}
		if err := steps[i].Run(ctx, sc); err != nil {
			if ctx.Err() != nil && !h.Canceled() {
				// The master is stopping: keep everything as it is, the op
				// resumes at this step on the next start.
				return nil, ctx.Err()
			}
			if errors.Is(err, jobqueue.ErrSuspended) {
				// Parked (StepCtx.Suspend): no goroutine and no lock is
				// held while it waits; once woken, the op runs again
				// from this step.
				return nil, err
			}
			p.revert(ctx, lu, h, op, i, err)
			return nil, err
		}
		plan, err := json.Marshal(lu)
		if err != nil {
			return nil, ecode.ExecErrorf("cannot save the plan of %s: %w", op.ID, err)
		}
		c := jobqueue.StepCommit{Next: i + 1, Data: plan, Children: sc.children}
		if sc.tx != nil {
			c.Cmps, c.Ops = sc.tx.Cmps(), sc.tx.Ops()
			// Applied before the step (and, for the last one, the op's
			// success) is visible, so no client that sees the job done
			// reads the configuration from before it.
			c.Committed = func(rev int64) { p.Cfg.Apply(sc.tx, rev) }
		}
		var result any
		if i == len(steps)-1 {
			// The last step's commit also records the op's success, so a
			// finished op costs one write less.
			result = lu.Result()
			raw, err := json.Marshal(result)
			if err != nil {
				return nil, ecode.ExecErrorf("cannot encode the result of %s: %w", op.ID, err)
			}
			c.Final, c.Result = true, raw
		}
		if _, err := h.CommitStep(ctx, c); err != nil {
			if ctx.Err() != nil && !h.Canceled() {
				return nil, ctx.Err()
			}
			if errors.Is(err, jobqueue.ErrConflict) {
				err = ecode.Errorf(ecode.TempNoRes, "step %q of %s: the configuration changed concurrently; retry", steps[i].Name, op.ID)
			}
			// The step acted on nodes but its record did not commit (a
			// kill-cancel or a conflict): undo what it did, as for a failure.
			p.revert(ctx, lu, h, op, i, err)
			return nil, err
		}
		p.Failpoints.Hit(failpoint.StepCommitted)
		if c.Final {
			return result, nil
		}
		if r, ok := lu.(Releaser); ok {
			if levels := r.ReleaseAfter(i); len(levels) > 0 {
				// Record the smaller set first: another job may take the
				// released locks and record them at once, and the records
				// must never show one exclusive lock held twice.
				var keep []locking.Request
				for _, req := range held.Held() {
					if !slices.Contains(levels, req.Level) {
						keep = append(keep, req)
					}
				}
				if err := h.RecordLocks(ctx, EncodeLocks(keep)); err != nil {
					return nil, err
				}
				held.Release(levels...)
			}
		}
	}
	return lu.Result(), nil
}

// beginUnsafe records that step i, if its unit declares it unsafe to
// repeat, is about to run. Safe steps cost nothing here.
func (p *Processor) beginUnsafe(ctx context.Context, h *jobqueue.OpHandle, u UnsafeSteps, op *opcodes.Op, i int, name string) error {
	check := u.UnsafeToRepeat(op, i)
	if check == "" {
		return nil
	}
	if err := h.BeginUnsafe(ctx, jobqueue.BeganStep{Step: i, Name: name, Check: check}); err != nil {
		return fmt.Errorf("recording the start of step %q of %s: %w", name, op.ID, err)
	}
	return nil
}

// revert lets a unit undo a partly done change. The configuration side
// of the undo commits in one transaction with the op's outcome (cause,
// which the caller returns): committed apart, a crash between the two
// would leave the undo done and the op running, to resume at the failed
// step of a change that no longer exists.
func (p *Processor) revert(ctx context.Context, lu Unit, h *jobqueue.OpHandle, op *opcodes.Op, step int, cause error) {
	r, ok := lu.(Reverter)
	if !ok {
		return
	}
	bg := context.WithoutCancel(ctx)
	rs := &StepCtx{p: p, h: h, step: step, op: op, revert: true}
	r.Revert(bg, rs, cause)
	if rs.tx == nil || rs.tx.Empty() {
		return
	}
	tx := rs.tx
	err := h.CommitFailure(bg, cause, tx.Cmps(), tx.Ops(), func(rev int64) { p.Cfg.Apply(tx, rev) })
	if err != nil {
		// The queue still records the op's outcome; the undone node side
		// stays undone and cluster verify reports what is left.
		p.Log.Error("revert could not update the configuration", "job", h.JobID(), "err", err)
	}
}

func acquireAll(ctx context.Context, m *locking.Manager, held *locking.Held, prio int, reqs []locking.Request) error {
	if len(reqs) == 0 {
		return nil
	}
	return m.Acquire(ctx, held, prio, reqs...)
}

// EncodeLocks renders held locks for the job record: "level:mode:name,name".
func EncodeLocks(reqs []locking.Request) []string {
	out := make([]string, 0, len(reqs))
	for _, r := range reqs {
		out = append(out, fmt.Sprintf("%s:%s:%s", r.Level, r.Mode, strings.Join(r.Names, ",")))
	}
	return out
}

// DecodeLocks parses EncodeLocks's output.
func DecodeLocks(recs []string) ([]locking.Request, error) {
	var out []locking.Request
	for _, s := range recs {
		parts := strings.SplitN(s, ":", 3)
		if len(parts) != 3 {
			return nil, fmt.Errorf("bad lock record %q", s)
		}
		lv, err := locking.ParseLevel(parts[0])
		if err != nil {
			return nil, err
		}
		md, err := locking.ParseMode(parts[1])
		if err != nil {
			return nil, err
		}
		out = append(out, locking.Request{Level: lv, Mode: md, Names: strings.Split(parts[2], ",")})
	}
	return out, nil
}

// StepCtx is what a step works with.
type StepCtx struct {
	p        *Processor
	h        *jobqueue.OpHandle
	op       *opcodes.Op
	step     int
	seq      int
	tx       *confdb.Tx
	children [][]json.RawMessage
	revert   bool
	unsafe   bool // the step is declared unsafe to repeat: it may not suspend
}

// Cfg is the configuration.
func (s *StepCtx) Cfg() *confdb.DB { return s.p.Cfg }

// Tx returns the step's configuration transaction, committed with the step.
func (s *StepCtx) Tx() *confdb.Tx {
	if s.tx == nil {
		s.tx = s.p.Cfg.Begin()
	}
	return s.tx
}

// Op is the decoded opcode.
func (s *StepCtx) Op() *opcodes.Op { return s.op }

// JobID is the id of the job the op belongs to.
func (s *StepCtx) JobID() int64 { return s.h.JobID() }

// Step is the index of the step running (or, in a revert, of the step
// that failed).
func (s *StepCtx) Step() int { return s.step }

// Canceled reports whether the job was asked to stop, for steps that wait
// and may end early.
func (s *StepCtx) Canceled() bool { return s.h.Canceled() }

// Logf writes a message to the job log (durably).
func (s *StepCtx) Logf(ctx context.Context, format string, args ...any) {
	if err := s.h.Log(ctx, "message", fmt.Sprintf(format, args...)); err != nil {
		s.p.Log.Warn("job log write failed", "job", s.h.JobID(), "err", err)
	}
}

// LogEntry writes a typed log entry.
func (s *StepCtx) LogEntry(ctx context.Context, typ string, msg any) error {
	return s.h.Log(ctx, typ, msg)
}

// RPC calls a node with an operation id unique to this call within the job.
func (s *StepCtx) RPC(ctx context.Context, node *config.Node, method string, args, reply any) error {
	s.seq++
	kind := "step"
	if s.revert {
		kind = "revert"
	}
	opID := fmt.Sprintf("job/%d/op/%d/%s/%d/%d", s.h.JobID(), s.h.OpIndex(), kind, s.step, s.seq)
	if err := s.p.RPC.Call(ctx, node, method, opID, args, reply); err != nil {
		return err
	}
	s.p.Failpoints.Hit(failpoint.RPCReturned)
	return nil
}

// Submit adds child jobs, created in the step's transaction.
func (s *StepCtx) Submit(job []json.RawMessage) { s.children = append(s.children, job) }
