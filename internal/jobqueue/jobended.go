package jobqueue

import (
	"context"
	"strconv"
	"strings"
)

// The job-ended event. When a job reaches a final status (success, error
// or canceled) the queue delivers JobEndedEvent(id) to the ops suspended
// on it, through the same wake path as Notify, once the final status is
// in the store. Unlike other events it is also a state, so it is never
// lost: an op that suspends on the event of a job that has already ended
// (before the suspension, or while the master was down) is woken at once,
// as if the event had just been delivered. An op can still be woken with
// the job not ended (a client may deliver the name through Notify), so the
// op checks the job's status when it runs again.

const (
	jobEventPrefix = "job/"
	jobEndedSuffix = "/ended"
)

// JobEndedEvent is the name of the event delivered when job id ends:
// "job/<id>/ended".
func JobEndedEvent(id int64) string {
	return jobEventPrefix + strconv.FormatInt(id, 10) + jobEndedSuffix
}

// endedJobOf returns the job id of a job-ended event name, written exactly
// as JobEndedEvent writes it; false for any other name.
func endedJobOf(event string) (int64, bool) {
	rest, ok := strings.CutPrefix(event, jobEventPrefix)
	if !ok {
		return 0, false
	}
	digits, ok := strings.CutSuffix(rest, jobEndedSuffix)
	if !ok {
		return 0, false
	}
	id, err := strconv.ParseInt(digits, 10, 64)
	if err != nil || id <= 0 || JobEndedEvent(id) != event {
		return 0, false
	}
	return id, true
}

// JobStatus is the status of job id, live or archived; found is false for
// a job the queue does not know.
func (h *OpHandle) JobStatus(ctx context.Context, id int64) (st Status, found bool, err error) {
	return h.q.jobStatus(ctx, id)
}

// ChildJobs are the ids of the child jobs that the op's committed steps
// submitted (StepCommit.Children), in the order they were submitted.
func (h *OpHandle) ChildJobs() []int64 {
	return append([]int64(nil), h.op().Children...)
}

// wakeJobEndedLocked starts waking the ops suspended on the end of job j,
// which just reached a final status that is in the store. The caller holds
// q.mu and (through publish) j's write mutex, so the wakes, which write the
// waiting jobs, run on their own goroutine.
func (q *Queue) wakeJobEndedLocked(j *job) {
	set := q.events[JobEndedEvent(j.id)]
	if len(set) == 0 || q.stopping {
		return
	}
	ws := make([]waking, 0, len(set))
	for w := range set {
		ws = append(ws, waking{w, w.susp})
	}
	q.wg.Add(1)
	go func() {
		defer q.wg.Done()
		for _, w := range ws {
			q.wake(w.j, w.s, WokenByEvent)
		}
	}()
}

// wakeIfEndedLocked wakes j at once when s waits for the end of a job
// that has already ended: the event was delivered before the suspension
// was registered (the job ended after the op last checked it, or while
// the master was down), and would otherwise never come again. A live job
// is checked here, under q.mu, which its end takes before it looks for
// waiters (onFinalized), so one of the two always sees the other. A job
// missing from the index is looked up in the archive (only ended jobs are
// archived); one that does not exist leaves the op waiting for its
// deadline. The caller holds q.mu.
func (q *Queue) wakeIfEndedLocked(j *job, s *suspension) {
	id, ok := endedJobOf(s.Event)
	if !ok || q.stopping {
		return
	}
	if other := q.jobs[id]; other != nil {
		if other.snapshot().status.Finalized() {
			q.wg.Add(1)
			go func() {
				defer q.wg.Done()
				q.wake(j, s, WokenByEvent)
			}()
		}
		return
	}
	q.wg.Add(1)
	go func() {
		defer q.wg.Done()
		v, err := q.archivedView(q.runCtx, id)
		switch {
		case err != nil:
			q.log.Error("cannot look for an archived job an op waits for", "job", j.id, "waits_for", id, "err", err)
		case v != nil:
			q.wake(j, s, WokenByEvent)
		}
	}()
}
