package jobqueue

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/corral/corral/internal/ecode"
	"github.com/corral/corral/internal/store"
)

// txnSlack leaves room under store.MaxTxnBytes for keys and compares when
// jobs are packed into one transaction.
const txnSlack = 4096

// Submit adds a job of the given opcodes and returns its id once the job
// is durable. A drained queue refuses it (JobQueueDrainError), as does a
// full one (JobQueueFull).
func (q *Queue) Submit(ctx context.Context, ops []json.RawMessage) (int64, error) {
	return q.submitOne(ctx, ops, false)
}

// SubmitToDrained is Submit ignoring the drain flag.
func (q *Queue) SubmitToDrained(ctx context.Context, ops []json.RawMessage) (int64, error) {
	return q.submitOne(ctx, ops, true)
}

func (q *Queue) submitOne(ctx context.Context, ops []json.RawMessage, toDrained bool) (int64, error) {
	res, err := q.submit(ctx, [][]json.RawMessage{ops}, toDrained)
	if err != nil {
		return 0, err
	}
	if res[0].Err != nil {
		return 0, res[0].Err
	}
	return res[0].JobID, nil
}

// SubmitMany adds several jobs with consecutive ids where possible. A
// negative job id in an op's depends is relative: -1 is the previous job
// of this submission. Each job succeeds or fails on its own; the error
// return is for the whole call (queue drained, store failure).
func (q *Queue) SubmitMany(ctx context.Context, jobs [][]json.RawMessage) ([]SubmitResult, error) {
	return q.submit(ctx, jobs, false)
}

func (q *Queue) submit(ctx context.Context, jobs [][]json.RawMessage, toDrained bool) ([]SubmitResult, error) {
	if !q.started.Load() {
		if q.isStopping() {
			return nil, errStopped
		}
		return nil, errNotStarted
	}
	if !toDrained && q.drained.Load() {
		return nil, ecode.New(ecode.JobQueueDrainErr, ecode.TempNoRes, "Job queue is drained, refusing job")
	}
	results := make([]SubmitResult, len(jobs))
	if len(jobs) == 0 {
		return results, nil
	}
	recs := make([]*jobRecord, len(jobs))
	for i, ops := range jobs {
		recs[i], results[i].Err = q.prepare(ops)
	}

	// Reserve room in the queue before writing, so that concurrent
	// submissions cannot overshoot job_queue_size together.
	limit := q.qsize()
	if limit < 1 {
		limit = DefaultQueueSize // an unset parameter, not "accept nothing"
	}
	q.mu.Lock()
	avail := limit - q.nonFinal - q.reserved
	reserved := 0
	for i, rec := range recs {
		if rec == nil {
			continue
		}
		if avail <= 0 {
			recs[i] = nil
			results[i].Err = ecode.New(ecode.JobQueueFull, ecode.TempNoRes,
				fmt.Sprintf("Job queue is full (%d pending jobs, limit %d)", q.nonFinal+q.reserved, limit))
			continue
		}
		avail--
		reserved++
	}
	q.reserved += reserved
	q.mu.Unlock()
	release := func(n int) {
		if n > 0 {
			q.mu.Lock()
			q.reserved -= n
			q.mu.Unlock()
		}
	}
	if reserved == 0 {
		return results, nil
	}

	// Every position gets an id, so that relative dependencies are plain
	// offsets even when a job of the submission was refused.
	first, err := q.allocIDs(ctx, len(jobs))
	if err != nil {
		release(reserved)
		return nil, err
	}
	ids := make([]int64, len(jobs))
	for i := range ids {
		ids[i] = first + int64(i)
	}
	now := tsOf(q.now())
	for i, rec := range recs {
		if rec == nil {
			continue
		}
		rec.ID, rec.Received = ids[i], now
		for k := range rec.Ops {
			deps, err := resolveDepends(rec.Ops[k].Depends, ids, i)
			if err != nil {
				recs[i], results[i].Err = nil, err
				release(1)
				reserved--
				break
			}
			rec.Ops[k].Depends = deps
		}
	}

	// Write in transactions that fit the store's limits; each job is one
	// put, so each is atomic, and a job is acknowledged only after its
	// transaction returned.
	var (
		batch []*jobRecord
		bops  []store.Op
		bcmps []store.Cmp
		bytes int
	)
	flush := func() {
		if len(batch) == 0 {
			return
		}
		res, err := q.st.Txn(ctx, bcmps, bops, nil)
		if err == nil && !res.Succeeded {
			err = fmt.Errorf("jobqueue: job id already in use (ids %d..%d)", batch[0].ID, batch[len(batch)-1].ID)
		}
		if err != nil {
			err = fmt.Errorf("jobqueue: writing jobs: %w", err)
			for _, rec := range batch {
				results[rec.ID-first].Err = err
			}
			release(len(batch))
		} else {
			q.admit(batch, true)
			for _, rec := range batch {
				results[rec.ID-first] = SubmitResult{OK: true, JobID: rec.ID}
			}
		}
		batch, bops, bcmps, bytes = nil, nil, nil, 0
	}
	for i, rec := range recs {
		if rec == nil {
			continue
		}
		data, err := rec.encode()
		key := q.jobKey(rec.ID)
		size := 2*len(key) + len(data)
		if err == nil && size > store.MaxTxnBytes-txnSlack {
			err = ecode.Errorf(ecode.Inval, "job of %d bytes exceeds the limit of %d", len(data), store.MaxTxnBytes-txnSlack)
		}
		if err != nil {
			results[i].Err = err
			release(1)
			continue
		}
		if len(batch) == store.MaxOpsPerTxn-store.GuardReserve || bytes+size > store.MaxTxnBytes-txnSlack {
			flush()
		}
		batch = append(batch, rec)
		bops = append(bops, store.Put(key, data))
		bcmps = append(bcmps, store.Missing(key))
		bytes += size
	}
	flush()
	q.schedule()
	return results, nil
}

// prepare parses and validates the ops of one submitted job.
func (q *Queue) prepare(ops []json.RawMessage) (*jobRecord, error) {
	if len(ops) == 0 {
		return nil, ecode.Errorf(ecode.Inval, "a job needs at least one opcode")
	}
	rec := &jobRecord{Ops: make([]opRecord, len(ops))}
	for i, raw := range ops {
		p, err := ParseOp(raw)
		if err != nil {
			return nil, err
		}
		if q.valid != nil {
			if err := q.valid(p.OpID, raw); err != nil {
				return nil, err
			}
		}
		rec.Ops[i] = opRecord{
			Input:    append(json.RawMessage(nil), raw...),
			Status:   StatusQueued,
			Priority: p.Priority,
			Depends:  p.Depends,
		}
	}
	return rec, nil
}

// prepareChildren checks the jobs a step submits; any invalid one refuses
// the step.
func (q *Queue) prepareChildren(jobs [][]json.RawMessage) ([]*jobRecord, error) {
	recs := make([]*jobRecord, len(jobs))
	for i, ops := range jobs {
		rec, err := q.prepare(ops)
		if err != nil {
			e := ecode.Wrap(err)
			return nil, &ecode.Error{Kind: e.Kind, Class: e.Class, Msg: fmt.Sprintf("child job %d: %s", i, e.Msg), Err: err}
		}
		recs[i] = rec
	}
	return recs, nil
}

// admit puts durable new jobs into the index. fromReserved says their
// queue room was reserved by submit.
func (q *Queue) admit(recs []*jobRecord, fromReserved bool) {
	js := make([]*job, len(recs))
	for i, rec := range recs {
		js[i] = q.newJob(rec, 0)
	}
	q.mu.Lock()
	for _, j := range js {
		q.jobs[j.id] = j
		q.nonFinal++
		if fromReserved {
			q.reserved--
		}
		q.enqueue(j)
	}
	q.mu.Unlock()
	q.schedule()
}

// allocIDs hands out n consecutive job ids. Ids are reserved in the store
// in blocks with a compare-and-swap, so an id is never given twice, even
// across restarts or by two masters; a crash only leaves a gap.
func (q *Queue) allocIDs(ctx context.Context, n int) (int64, error) {
	q.idMu.Lock()
	defer q.idMu.Unlock()
	key := q.idKey()
	for attempt := 0; q.idLimit-q.idNext < int64(n); attempt++ {
		if attempt == 5 {
			return 0, fmt.Errorf("jobqueue: id block keeps changing under us")
		}
		newLimit := q.idLimit + max(idBlockSize, int64(n)-(q.idLimit-q.idNext))
		c := store.ModRevisionIs(key, q.idRev)
		if q.idRev == 0 {
			c = store.Missing(key)
		}
		res, err := q.st.Txn(ctx, []store.Cmp{c},
			[]store.Op{store.Put(key, []byte(strconv.FormatInt(newLimit, 10)))},
			[]store.Op{store.Get(key)})
		if err != nil {
			return 0, fmt.Errorf("jobqueue: reserving job ids: %w", err)
		}
		if res.Succeeded {
			q.idLimit, q.idRev = newLimit, res.Revision
			continue
		}
		// Someone else reserved ids: skip past them.
		q.idRev = 0
		if len(res.Results) > 0 && len(res.Results[0]) > 0 {
			kv := res.Results[0][0]
			v, err := strconv.ParseInt(string(kv.Value), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("jobqueue: corrupt id block %q", kv.Value)
			}
			q.idRev = kv.ModRevision
			q.idNext = max(q.idNext, v)
			q.idLimit = max(q.idLimit, v)
		}
	}
	first := q.idNext
	q.idNext += int64(n)
	return first, nil
}
