package jobqueue

import (
	"context"
	"time"
)

// A job write that fails (a full disk, a store without quorum) is tried
// again: the first retry after writeRetryFirst, then twice as long each
// time, never more than writeRetryMax apart, for as long as the queue runs.
// Nothing is published before its write succeeds, so queries keep showing
// the last durable state meanwhile. A queue that stops gives the job up;
// the next Start then finds it as a crash would have left it.
const (
	writeRetryFirst = 100 * time.Millisecond
	writeRetryMax   = 10 * time.Second
)

// writeRetryDelay is the pause before retry number attempt (from 1).
func writeRetryDelay(attempt int) time.Duration {
	d := writeRetryFirst
	for i := 1; i < attempt && d < writeRetryMax; i++ {
		d *= 2
	}
	return min(d, writeRetryMax)
}

// recordOutcome writes the outcome fn of op idx (what names it in the
// log), retrying until the store takes it. The op's locks are still held
// meanwhile: they go back only once the outcome is durable (see
// OpHandle.OnOutcome), and the job keeps its run slot. It returns
// outContinue once the outcome is durable, outAbandon if the queue stops
// first.
func (q *Queue) recordOutcome(j *job, idx int, what string, fn func(*jobRecord) error) outcome {
	for attempt := 1; ; attempt++ {
		err := q.update(context.Background(), j, fn)
		if err == nil {
			if attempt > 1 {
				q.log.Info("recorded an op outcome after failed writes", "job", j.id, "op", idx, "outcome", what, "attempts", attempt)
			}
			return outContinue
		}
		delay := writeRetryDelay(attempt)
		q.log.Error("cannot record an op outcome; the op keeps its locks and the write is retried",
			"job", j.id, "op", idx, "outcome", what, "attempt", attempt, "retry_in", delay, "err", err)
		t := time.NewTimer(delay)
		select {
		case <-t.C:
		case <-q.runCtx.Done():
			t.Stop()
			return outAbandon
		}
	}
}

// retryStalledLocked files a job whose write failed outside an op's
// outcome (starting an op, finishing a cancel, reading a dependency) to run
// again after a pause: the store still holds its previous state, so the
// job goes on from there as after a crash, without a restart. Caller holds
// q.mu.
func (q *Queue) retryStalledLocked(j *job) {
	j.stalls++
	j.state = stateStalled
	if q.stopping {
		return
	}
	delay := writeRetryDelay(j.stalls)
	q.log.Warn("a job write failed; the job runs again later", "job", j.id, "attempt", j.stalls, "retry_in", delay)
	j.retry = time.AfterFunc(delay, func() {
		q.mu.Lock()
		if j.state == stateStalled && !q.stopping {
			j.retry = nil
			q.pushReady(j)
		}
		q.mu.Unlock()
		q.schedule()
	})
}

// stopRetryLocked cancels a pending retry of j. Caller holds q.mu.
func (q *Queue) stopRetryLocked(j *job) {
	if j.retry != nil {
		j.retry.Stop()
		j.retry = nil
	}
}
