package jobqueue

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/google/uuid"

	"github.com/corral/corral/internal/ecode"
	"github.com/corral/corral/internal/jobfilter"
	"github.com/corral/corral/internal/store"
)

// Job filter rules (Ganeti's gnt-filter) live with the queue, one store
// key each. The scheduler applies them to jobs that have not started:
// a REJECT rule cancels the job, PAUSE keeps it queued, RATE_LIMIT n lets
// at most n jobs it applies to run at once, ACCEPT runs it; CONTINUE
// rules never decide (see jobfilter.Applying).

func (q *Queue) filterPrefix() string         { return q.prefix + "filters/" }
func (q *Queue) filterKey(uuid string) string { return q.filterPrefix() + uuid }

// loadFilters reads the filter rules from the store.
func (q *Queue) loadFilters(ctx context.Context) error {
	kvs, _, err := q.st.Range(ctx, q.filterPrefix(), store.RangeOptions{})
	if err != nil {
		return fmt.Errorf("jobqueue: loading the job filters: %w", err)
	}
	rules := make([]*jobfilter.Rule, 0, len(kvs))
	for i := range kvs {
		var r jobfilter.Rule
		if err := json.Unmarshal(kvs[i].Value, &r); err != nil {
			q.log.Error("skipping unreadable job filter", "key", kvs[i].Key, "err", err)
			continue
		}
		rules = append(rules, &r)
	}
	jobfilter.Sort(rules)
	q.mu.Lock()
	q.setRulesLocked(rules)
	q.mu.Unlock()
	return nil
}

// setRulesLocked installs a new rule list; the verdicts cached on jobs
// are then stale.
func (q *Queue) setRulesLocked(rules []*jobfilter.Rule) {
	q.rules = rules
	q.rulesGen++
}

// applying is the rule that decides j's fate under the current rules (nil:
// none), computed once per job and rule list: what a job's predicates look
// at never changes. Callers hold q.mu.
func (q *Queue) applying(j *job) *jobfilter.Rule {
	if j.verdictGen != q.rulesGen {
		j.verdict = jobfilter.Applying(q.rules, q.filterFacts(j))
		j.verdictGen = q.rulesGen
	}
	return j.verdict
}

// Filters returns copies of the filter rules in evaluation order.
func (q *Queue) Filters() []*jobfilter.Rule {
	q.mu.RLock()
	defer q.mu.RUnlock()
	out := make([]*jobfilter.Rule, len(q.rules))
	for i, r := range q.rules {
		c := *r
		out[i] = &c
	}
	return out
}

// LastJobID is the highest job id handed out so far (0 before the first).
func (q *Queue) LastJobID() int64 {
	q.idMu.Lock()
	defer q.idMu.Unlock()
	return q.idNext - 1
}

// ReplaceFilter adds r (r.UUID empty: a new rule gets a fresh uuid) or
// replaces the rule with r's uuid, stamping it with the highest job id
// handed out so far as its watermark. It returns the rule's uuid. The
// change applies to the queued jobs at once.
func (q *Queue) ReplaceFilter(ctx context.Context, r jobfilter.Rule) (string, error) {
	switch {
	case r.UUID == "":
		r.UUID = uuid.NewString()
	case !jobfilter.IsUUID(r.UUID):
		return "", ecode.Errorf(ecode.Inval, "Unable to parse UUID")
	}
	if r.Priority < 0 {
		return "", ecode.Errorf(ecode.Inval, "Filter priority must be a non-negative integer, got %d", r.Priority)
	}
	if r.Predicates == nil {
		r.Predicates = []jobfilter.Predicate{}
	}
	if r.ReasonTrail == nil {
		r.ReasonTrail = []any{}
	}
	r.Watermark = q.LastJobID()
	b, err := json.Marshal(&r)
	if err != nil {
		return "", fmt.Errorf("jobqueue: encoding job filter %s: %w", r.UUID, err)
	}
	q.filterMu.Lock()
	defer q.filterMu.Unlock()
	if _, err := q.st.Txn(ctx, nil, []store.Op{store.Put(q.filterKey(r.UUID), b)}, nil); err != nil {
		return "", fmt.Errorf("jobqueue: writing job filter %s: %w", r.UUID, err)
	}
	q.mu.Lock()
	rules := slices.DeleteFunc(slices.Clone(q.rules), func(o *jobfilter.Rule) bool { return o.UUID == r.UUID })
	rules = append(rules, &r)
	jobfilter.Sort(rules)
	q.setRulesLocked(rules)
	q.mu.Unlock()
	q.schedule()
	return r.UUID, nil
}

// DeleteFilter removes a filter rule; jobs it held may then run.
func (q *Queue) DeleteFilter(ctx context.Context, id string) error {
	q.filterMu.Lock()
	defer q.filterMu.Unlock()
	q.mu.RLock()
	found := slices.ContainsFunc(q.rules, func(r *jobfilter.Rule) bool { return r.UUID == id })
	q.mu.RUnlock()
	if !found {
		return ecode.Errorf(ecode.NoEnt, "Filter rule with UUID %s does not exist", id)
	}
	if _, err := q.st.Txn(ctx, nil, []store.Op{store.Delete(q.filterKey(id))}, nil); err != nil {
		return fmt.Errorf("jobqueue: deleting job filter %s: %w", id, err)
	}
	q.mu.Lock()
	q.setRulesLocked(slices.DeleteFunc(slices.Clone(q.rules), func(r *jobfilter.Rule) bool { return r.UUID == id }))
	q.mu.Unlock()
	q.schedule()
	return nil
}

// filterFacts is what the rules look at in j, made once (q.mu held).
func (q *Queue) filterFacts(j *job) *jobfilter.Job {
	if j.facts == nil {
		rec := j.snapshot().rec
		inputs := make([]json.RawMessage, len(rec.Ops))
		for i := range rec.Ops {
			inputs[i] = rec.Ops[i].Input
		}
		j.facts = jobfilter.NewJob(j.id, inputs)
	}
	return j.facts
}

// notStarted reports whether no op of the job has begun: only such jobs
// are subject to the filter rules.
func notStarted(rec *jobRecord) bool {
	return len(rec.Ops) > 0 && rec.Ops[0].Status == StatusQueued
}

// filterRound is the rules' view of the queue for one scheduling round:
// how many slots each RATE_LIMIT rule has left. Started jobs the rule
// applies to take its slots. Queued jobs a REJECT rule applies to are
// canceled (on their own goroutine, as the cancel writes to the store).
// Callers hold q.mu.
type filterRound struct {
	free map[string]int
}

func (q *Queue) newFilterRound() *filterRound {
	fr := &filterRound{free: map[string]int{}}
	scan := false // only RATE_LIMIT and REJECT rules need to look past the ready jobs
	for _, r := range q.rules {
		switch r.Action.Kind {
		case jobfilter.RateLimit:
			fr.free[r.UUID] = r.Action.Limit
			scan = true
		case jobfilter.Reject:
			scan = true
		}
	}
	if !scan {
		return fr
	}
	for _, j := range q.jobs {
		s := j.snapshot()
		if s.status.Finalized() {
			continue
		}
		if j.state == stateActive || !notStarted(s.rec) {
			// Running, or started before (a job's goroutine may not have
			// recorded its first op's start yet).
			if r := q.applying(j); r != nil && r.Action.Kind == jobfilter.RateLimit {
				fr.free[r.UUID]--
			}
			continue
		}
		if j.state == stateBlocked || j.state == stateReady {
			if r := q.applying(j); r != nil && r.Action.Kind == jobfilter.Reject {
				q.rejectLocked(j, r)
			}
		}
	}
	return fr
}

// admits reports whether the ready job j may start now, taking a rate
// limit slot if a RATE_LIMIT rule applies.
func (q *Queue) admits(fr *filterRound, j *job) bool {
	if !notStarted(j.snapshot().rec) {
		return true
	}
	r := q.applying(j)
	if r == nil {
		return true
	}
	switch r.Action.Kind {
	case jobfilter.Pause:
		return false
	case jobfilter.Reject:
		q.rejectLocked(j, r)
		return false
	case jobfilter.RateLimit:
		if fr.free[r.UUID] <= 0 {
			return false
		}
		fr.free[r.UUID]--
	}
	return true
}

// rejectLocked cancels a queued job a REJECT rule applies to, once.
func (q *Queue) rejectLocked(j *job, r *jobfilter.Rule) {
	if j.rejecting || q.stopping {
		return
	}
	j.rejecting = true
	q.log.Info("canceling a job rejected by a filter rule", "job", j.id, "filter", r.UUID)
	q.wg.Add(1)
	go func() {
		defer q.wg.Done()
		if _, _, err := q.Cancel(q.runCtx, j.id, false); err != nil {
			q.log.Error("canceling a job rejected by a filter rule", "job", j.id, "filter", r.UUID, "err", err)
			q.mu.Lock()
			j.rejecting = false
			q.mu.Unlock()
		}
	}()
}
