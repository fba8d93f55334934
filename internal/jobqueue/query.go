package jobqueue

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/corral/corral/internal/ecode"
	"github.com/corral/corral/internal/store"
)

// fieldNames are the job fields Query and WaitForChange answer (Ganeti's).
var fieldNames = [...]string{
	"id", "status", "priority", "archived", "ops", "opresult", "opstatus", "oplog",
	"opstart", "opexec", "opend", "oppriority", "summary", "received_ts", "start_ts", "end_ts",
}

// Fields lists the job fields Query and WaitForChange answer.
func Fields() []string { return slices.Clone(fieldNames[:]) }

func checkFields(fields []string) error {
	for _, f := range fields {
		if !slices.Contains(fieldNames[:], f) {
			return ecode.Errorf(ecode.Inval, "Unknown field '%s'", f)
		}
	}
	return nil
}

func jobLost(id int64) error {
	return ecode.New(ecode.JobLost, ecode.NoEnt, fmt.Sprintf("Job %d not found", id))
}

// view is what a query reads: a live snapshot or an archived record.
type view struct {
	rec      *jobRecord
	status   Status
	archived bool
	logs     []any // per op lists of entries; loaded on first use
	// summaries of the ops, from the snapshot; nil for a record read from
	// the archive, whose summaries are made when asked for.
	summaries []string
}

func viewOf(s *snapshot) *view {
	return &view{rec: s.rec, status: s.status, archived: s.archived, summaries: s.summaries}
}

// archivedView reads an archived job, or returns nil if there is none.
func (q *Queue) archivedView(ctx context.Context, id int64) (*view, error) {
	kv, err := q.st.Get(ctx, q.archiveKey(id))
	if err != nil {
		return nil, fmt.Errorf("jobqueue: reading archived job %d: %w", id, err)
	}
	if kv == nil {
		return nil, nil
	}
	rec, err := decodeRecord(kv.Value)
	if err != nil {
		return nil, ecode.New(ecode.JobFileCorrupted, ecode.Fault, fmt.Sprintf("archived job %d: %v", id, err))
	}
	return &view{rec: rec, status: rec.status(), archived: true}, nil
}

// findView returns the job's view, live or archived, or nil if unknown.
func (q *Queue) findView(ctx context.Context, id int64) (*view, error) {
	if j := q.lookup(id); j != nil {
		return viewOf(j.snapshot()), nil
	}
	return q.archivedView(ctx, id)
}

// Query answers fields for the given jobs (nil ids: every non-archived job,
// by id). An unknown job gets a nil row; archived jobs are read on demand.
func (q *Queue) Query(ctx context.Context, ids []int64, fields []string) ([][]any, error) {
	if err := checkFields(fields); err != nil {
		return nil, err
	}
	if ids == nil {
		q.mu.RLock()
		ids = make([]int64, 0, len(q.jobs))
		for id := range q.jobs {
			ids = append(ids, id)
		}
		q.mu.RUnlock()
		slices.Sort(ids)
	}
	rows := make([][]any, len(ids))
	for i, id := range ids {
		v, err := q.findView(ctx, id)
		if err != nil {
			return nil, err
		}
		if v == nil {
			continue
		}
		if rows[i], err = q.row(ctx, v, fields); err != nil {
			return nil, err
		}
	}
	return rows, nil
}

// row computes the values of fields for one job.
func (q *Queue) row(ctx context.Context, v *view, fields []string) ([]any, error) {
	r := v.rec
	row := make([]any, len(fields))
	perOp := func(f func(op *opRecord) any) []any {
		out := make([]any, len(r.Ops))
		for i := range r.Ops {
			out[i] = f(&r.Ops[i])
		}
		return out
	}
	for i, f := range fields {
		switch f {
		case "id":
			row[i] = r.ID
		case "status":
			row[i] = string(v.status)
		case "priority":
			row[i] = r.priority()
		case "archived":
			row[i] = v.archived
		case "ops":
			row[i] = perOp(func(op *opRecord) any { return op.Input })
		case "opresult":
			row[i] = perOp(func(op *opRecord) any {
				if op.Result == nil {
					return nil
				}
				return op.Result
			})
		case "opstatus":
			row[i] = perOp(func(op *opRecord) any { return string(op.Status) })
		case "oplog":
			if v.logs == nil {
				entries, err := q.readLog(ctx, r.ID, 1)
				if err != nil {
					return nil, err
				}
				v.logs = splitLog(r, entries)
			}
			row[i] = slices.Clone(v.logs)
		case "opstart":
			row[i] = perOp(func(op *opRecord) any { return op.Start.wire() })
		case "opexec":
			row[i] = perOp(func(op *opRecord) any { return op.Exec.wire() })
		case "opend":
			row[i] = perOp(func(op *opRecord) any { return op.End.wire() })
		case "oppriority":
			row[i] = perOp(func(op *opRecord) any { return op.Priority })
		case "summary":
			if v.summaries != nil {
				out := make([]any, len(v.summaries))
				for k, s := range v.summaries {
					out[k] = s
				}
				row[i] = out
				break
			}
			row[i] = perOp(func(op *opRecord) any { return q.summary(opIDOf(op.Input), op.Input) })
		case "received_ts":
			row[i] = r.Received.wire()
		case "start_ts":
			row[i] = r.Start.wire()
		case "end_ts":
			row[i] = r.End.wire()
		default:
			return nil, ecode.Errorf(ecode.Inval, "Unknown field '%s'", f)
		}
	}
	return row, nil
}

// readLog reads a job's log entries with serial >= from.
func (q *Queue) readLog(ctx context.Context, id, from int64) ([]logEntry, error) {
	kvs, _, err := q.st.Range(ctx, q.logPrefix(id), store.RangeOptions{From: q.logKey(id, max(from, 0))})
	if err != nil {
		return nil, fmt.Errorf("jobqueue: reading the log of job %d: %w", id, err)
	}
	out := make([]logEntry, 0, len(kvs))
	for i := range kvs {
		e, err := decodeLogEntry(kvs[i].Value)
		if err != nil {
			q.log.Warn("skipping unreadable log entry", "key", kvs[i].Key, "err", err)
			continue
		}
		out = append(out, e)
	}
	return out, nil
}

// splitLog assigns log entries to the ops they were written by: op i owns
// the serials from its LogFirst up to the next started op's LogFirst.
func splitLog(r *jobRecord, entries []logEntry) []any {
	out := make([][]any, len(r.Ops))
	for i := range out {
		out[i] = []any{}
	}
	for k := range entries {
		e := &entries[k]
		owner := -1
		for i := range r.Ops {
			if first := r.Ops[i].LogFirst; first > 0 && e.Serial >= first {
				owner = i
			}
		}
		if owner < 0 {
			owner = 0
		}
		out[owner] = append(out[owner], e.wire())
	}
	res := make([]any, len(out))
	for i := range out {
		res[i] = out[i]
	}
	return res
}

// Subscription delivers change notifications of one job. C has room for one
// notification: changes that come while one is pending are coalesced.
type Subscription struct {
	C    <-chan struct{}
	ch   chan struct{}
	j    *job
	once sync.Once
}

// Subscribe watches a live (non-archived) job. Close the subscription when
// done.
func (q *Queue) Subscribe(id int64) (*Subscription, error) {
	j := q.lookup(id)
	if j == nil {
		return nil, jobLost(id)
	}
	return j.subscribe(), nil
}

func (j *job) subscribe() *Subscription {
	s := &Subscription{ch: make(chan struct{}, 1), j: j}
	s.C = s.ch
	j.mu.Lock()
	if j.subs == nil {
		j.subs = map[*Subscription]struct{}{}
	}
	j.subs[s] = struct{}{}
	j.mu.Unlock()
	return s
}

// Close ends the subscription.
func (s *Subscription) Close() {
	s.once.Do(func() {
		s.j.mu.Lock()
		delete(s.j.subs, s)
		s.j.mu.Unlock()
	})
}

// WaitForChange implements Ganeti's WaitForJobChange. It returns at once
// when prevInfo is nil or differs from the current values of fields, when
// log entries with a serial above prevLogSerial exist (-1: none seen yet),
// or when the job is finalized; changed is then true. Otherwise it waits
// for a change until timeout and then returns the unchanged answer with
// changed false. An unknown job gives an ecode JobLost error.
func (q *Queue) WaitForChange(ctx context.Context, id int64, fields []string, prevInfo []any,
	prevLogSerial int64, timeout time.Duration) (info []any, logs [][]any, changed bool, err error) {
	if err := checkFields(fields); err != nil {
		return nil, nil, false, err
	}
	j := q.lookup(id)
	if j == nil {
		v, err := q.archivedView(ctx, id)
		if err != nil {
			return nil, nil, false, err
		}
		if v == nil {
			return nil, nil, false, jobLost(id)
		}
		return q.answer(ctx, v, fields, prevLogSerial, -1, nil)
	}
	sub := j.subscribe()
	defer sub.Close()
	var prev any
	if prevInfo != nil {
		prev = prevInfo
		if !decodedForm(prevInfo) {
			prev = normalize(prevInfo)
		}
	}
	var expired <-chan time.Time
	if timeout > 0 {
		t := time.NewTimer(timeout)
		defer t.Stop()
		expired = t.C
	}
	for {
		s := j.snapshot()
		info, logs, _, err := q.answer(ctx, viewOf(s), fields, prevLogSerial, s.lastSerial, s.tail)
		if err != nil {
			return nil, nil, false, err
		}
		if prevInfo == nil || len(logs) > 0 || s.status.Finalized() || s.archived ||
			!equalsDecoded(info, prev) {
			return info, logs, true, nil
		}
		if expired == nil {
			return info, logs, false, nil
		}
		select {
		case <-sub.C:
		case <-expired:
			return info, logs, false, nil
		case <-ctx.Done():
			return nil, nil, false, ctx.Err()
		}
	}
}

// answer computes the fields and the log entries after prevLogSerial,
// from the in-memory tail when it reaches back far enough, else from the
// store. lastSerial < 0 means unknown (archived jobs).
func (q *Queue) answer(ctx context.Context, v *view, fields []string, prevLogSerial, lastSerial int64, tail []logEntry) ([]any, [][]any, bool, error) {
	info, err := q.row(ctx, v, fields)
	if err != nil {
		return nil, nil, false, err
	}
	logs := [][]any{}
	if lastSerial >= 0 && lastSerial <= prevLogSerial {
		return info, logs, true, nil
	}
	entries := tail
	if len(tail) == 0 || tail[0].Serial > prevLogSerial+1 {
		if entries, err = q.readLog(ctx, v.rec.ID, prevLogSerial+1); err != nil {
			return nil, nil, false, err
		}
	}
	for k := range entries {
		if entries[k].Serial > prevLogSerial {
			logs = append(logs, entries[k].wire())
		}
	}
	return info, logs, true, nil
}

// equalsDecoded reports whether info, as computed by row, equals prev, a
// normalized value: reflect.DeepEqual(normalize(info), prev). It walks the
// types rows are made of directly instead of sending info through JSON on
// every wake-up, and falls back to the round trip for anything else.
func equalsDecoded(info, prev any) bool {
	if eq, ok := walkEqual(info, prev); ok {
		return eq
	}
	return reflect.DeepEqual(normalize(info), prev)
}

// walkEqual compares cur with prev as reflect.DeepEqual(normalize(cur),
// prev) would. ok is false when cur holds something JSON cannot encode, in
// which case normalize gives back cur whole and only the round trip
// answers as before.
func walkEqual(cur, prev any) (eq, ok bool) {
	switch c := cur.(type) {
	case nil:
		return prev == nil, true
	case string:
		if !utf8.ValidString(c) {
			break // encoding replaces the invalid bytes
		}
		p, isStr := prev.(string)
		return isStr && p == c, true
	case bool:
		p, isBool := prev.(bool)
		return isBool && p == c, true
	case int:
		return equalsNumber(float64(c), prev), true
	case int64:
		// Decoding gives the nearest float64, as the conversion does.
		return equalsNumber(float64(c), prev), true
	case []int64:
		if c == nil {
			return prev == nil, true
		}
		p, isList := prev.([]any)
		if !isList || p == nil || len(p) != len(c) {
			return false, true
		}
		for i := range c {
			if !equalsNumber(float64(c[i]), p[i]) {
				return false, true
			}
		}
		return true, true
	case []any:
		if c == nil {
			return prev == nil, true
		}
		p, isList := prev.([]any)
		if !isList || p == nil || len(p) != len(c) {
			// Still walk c: an element JSON cannot encode decides.
			for i := range c {
				if _, ok := walkEqual(c[i], nil); !ok {
					return false, false
				}
			}
			return false, true
		}
		eq := true
		for i := range c {
			e, ok := walkEqual(c[i], p[i])
			if !ok {
				return false, false
			}
			eq = eq && e
		}
		return eq, true
	}
	b, err := json.Marshal(cur)
	if err != nil {
		return false, false
	}
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		return false, false
	}
	return reflect.DeepEqual(v, prev), true
}

func equalsNumber(f float64, prev any) bool {
	p, ok := prev.(float64)
	return ok && p == f
}

// decodedForm reports whether v is already in the form JSON decoding
// gives (as prev_job_info from a client is), so that normalize would give
// back an equal value.
func decodedForm(v any) bool {
	switch x := v.(type) {
	case nil, bool, float64:
		return true
	case string:
		return utf8.ValidString(x)
	case []any:
		if x == nil {
			return false // encodes as null
		}
		for _, e := range x {
			if !decodedForm(e) {
				return false
			}
		}
		return true
	case map[string]any:
		if x == nil {
			return false
		}
		for k, e := range x {
			if !utf8.ValidString(k) || !decodedForm(e) {
				return false
			}
		}
		return true
	}
	return false
}

// normalize puts a value in the form JSON decoding gives, so that values
// computed here compare equal to the same values sent back by a client.
func normalize(v any) any {
	b, err := json.Marshal(v)
	if err != nil {
		return v
	}
	var out any
	if err := json.Unmarshal(b, &out); err != nil {
		return v
	}
	return out
}
