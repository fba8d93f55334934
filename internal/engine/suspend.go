package engine

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/corral/corral/internal/ecode"
	"github.com/corral/corral/internal/jobqueue"
)

// What ended a step's suspension (StepCtx.Woken).
const (
	WokenByEvent    = jobqueue.WokenByEvent
	WokenByDeadline = jobqueue.WokenByDeadline
)

// MaxEventName bounds the name of an event, which a parked op keeps in its
// job record.
const MaxEventName = 256

// CheckEventName refuses an event name a step could not wait for: empty,
// longer than MaxEventName, or with a character outside printable ASCII
// other than space.
func CheckEventName(name string) error {
	if name == "" || len(name) > MaxEventName {
		return ecode.Errorf(ecode.Inval, "an event name has 1 to %d characters, not %d", MaxEventName, len(name))
	}
	for i := 0; i < len(name); i++ {
		if c := name[i]; c <= ' ' || c > '~' {
			return ecode.Errorf(ecode.Inval, "event name %q: only printable ASCII characters other than space are allowed", name)
		}
	}
	return nil
}

// Suspend parks the op until event is delivered (Processor.Notify) or
// until the deadline, whichever comes first; a zero deadline waits for the
// event only, an empty event for the deadline only. The step returns
// Suspend's error: the op then waits with no goroutine and no lock held,
// and its suspension survives a master restart (a deadline that passed
// meanwhile wakes it at start). Once woken, the op takes its locks again
// and runs this step again from its beginning, as after a restart: the
// step reads Woken to learn why, and must check again whatever it waited
// for. A step before the first commit runs Prereq again too.
//
// An event is a wake-up, not a message: one delivered while no op waits
// for it is lost. Callers deliver it once the state it announces is
// durable, and a step checks that state before it suspends. The end of a
// job (JobEndedEvent) is the exception: the queue wakes at once an op
// that suspends on the end of a job that has already ended; WaitForJob
// waits for one.
//
// A step with configuration writes or child jobs not yet committed cannot
// suspend (they would be lost): it commits them first, as its own step.
// Nor can a step declared unsafe to repeat, or a revert.
func (s *StepCtx) Suspend(ctx context.Context, until time.Time, event string) error {
	if event != "" {
		if err := CheckEventName(event); err != nil {
			return err
		}
	}
	switch {
	case s.revert:
		return ecode.ExecErrorf("the revert of step %d of %s cannot suspend", s.step, s.op.ID)
	case s.unsafe:
		return ecode.ExecErrorf("step %d of %s is unsafe to repeat and cannot suspend", s.step, s.op.ID)
	case (s.tx != nil && !s.tx.Empty()) || len(s.children) > 0:
		return ecode.ExecErrorf("step %d of %s cannot suspend with uncommitted changes; commit them in a step of their own first", s.step, s.op.ID)
	}
	err := s.h.Suspend(ctx, until, event)
	if err != nil && !errors.Is(err, jobqueue.ErrSuspended) {
		return fmt.Errorf("suspending step %d of %s: %w", s.step, s.op.ID, err)
	}
	return err
}

// Woken says what ended the op's last suspension, WokenByEvent or
// WokenByDeadline, or "" when the step has not been suspended since the
// op's last step commit.
func (s *StepCtx) Woken() string { return s.h.Woken() }

// Notify delivers an event: every op suspended on it wakes. It is the one
// path for events, whether they come from in-process callers or over LUXI
// (NotifyEvent).
func (p *Processor) Notify(event string) error {
	if err := CheckEventName(event); err != nil {
		return err
	}
	if p.Wake == nil {
		return ecode.Errorf(ecode.State, "the job queue is not running")
	}
	p.Wake(event)
	return nil
}
