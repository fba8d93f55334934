package engine

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/corral/corral/internal/ecode"
	"github.com/corral/corral/internal/jobqueue"
)

// JobEndedEvent is the event the job queue delivers when job id reaches a
// final status (success, error or canceled), once that status is durable:
// "job/<id>/ended". A step may suspend on it with Suspend, but WaitForJob
// does the checks that makes safe.
func JobEndedEvent(id int64) string { return jobqueue.JobEndedEvent(id) }

// ErrJobWaitTimedOut is wrapped by WaitForJob's error when the deadline
// passed before the job ended.
var ErrJobWaitTimedOut = errors.New("the job did not end before the deadline")

// ChildJobs are the ids of the child jobs that this op's committed steps
// submitted (Submit), in the order they were submitted. A step's own
// submissions get their ids when it commits, so a unit waits for a child
// in a step after the one that submitted it.
func (s *StepCtx) ChildJobs() []int64 { return s.h.ChildJobs() }

// WaitForJob returns the final status of job id (a child from ChildJobs,
// or any other job) once it has ended. Until then it suspends the op on
// JobEndedEvent(id) and until the deadline (zero: no deadline), and
// returns the error of Suspend, which the step returns as it is; the step
// runs again once the job ended, and calls WaitForJob again, which then
// returns the status. When the deadline comes first, it returns an error
// wrapping ErrJobWaitTimedOut. The deadline must be fixed in the unit's
// plan, not computed in the step, or each run would push it further.
//
// The job's status is read before suspending, and the queue wakes at once
// an op that suspends on the end of a job that has already ended, also at
// start-up for a parked op whose job ended while the master was down: the
// end of a job is never missed. An unknown job is an error.
func (s *StepCtx) WaitForJob(ctx context.Context, id int64, until time.Time) (jobqueue.Status, error) {
	st, found, err := s.h.JobStatus(ctx, id)
	switch {
	case err != nil:
		return "", fmt.Errorf("step %d of %s: reading the status of job %d: %w", s.step, s.op.ID, id, err)
	case !found:
		return "", ecode.Errorf(ecode.NoEnt, "step %d of %s waits for job %d, which does not exist", s.step, s.op.ID, id)
	case st.Finalized():
		return st, nil
	case s.Woken() == WokenByDeadline || (!until.IsZero() && !time.Now().Before(until)):
		return "", &ecode.Error{Kind: ecode.OpExecError, Class: ecode.State, Err: ErrJobWaitTimedOut,
			Msg: fmt.Sprintf("step %d of %s: job %d has not ended by %s (it is %s)", s.step, s.op.ID, id, until.Format(time.RFC3339), st)}
	}
	return "", s.Suspend(ctx, until, JobEndedEvent(id))
}
