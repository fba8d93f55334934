// Package jobfilter is the job queue's filter rules (Ganeti 2.13+ "job
// filters", gnt-filter): each rule has a priority, predicates on a job's
// id, opcodes and reason trail, and an action (ACCEPT, PAUSE, REJECT,
// CONTINUE or RATE_LIMIT n). The queue finds the rule that applies to a
// job as Ganeti's scheduler does: the first rule, in (priority,
// watermark, uuid) order, whose predicates all match and whose action is
// not CONTINUE.
package jobfilter

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"

	"github.com/corral/corral/internal/ecode"
)

// The actions a rule can take on the jobs it applies to.
const (
	Accept    = "ACCEPT"
	Pause     = "PAUSE"
	Reject    = "REJECT"
	Continue  = "CONTINUE"
	RateLimit = "RATE_LIMIT"
)

// Action is what a rule does to a matching job. Limit is RATE_LIMIT's
// number of matching jobs that may run at once.
type Action struct {
	Kind  string
	Limit int
}

// MarshalJSON writes "ACCEPT" ... or ["RATE_LIMIT", n], as Ganeti.
func (a Action) MarshalJSON() ([]byte, error) {
	if a.Kind == RateLimit {
		return json.Marshal([]any{RateLimit, a.Limit})
	}
	return json.Marshal(a.Kind)
}

// UnmarshalJSON reads an action; names are case-sensitive.
func (a *Action) UnmarshalJSON(b []byte) error {
	v, err := decode(b)
	if err != nil {
		return err
	}
	act, err := ParseAction(v)
	if err != nil {
		return err
	}
	*a = act
	return nil
}

// ParseAction reads an action from its decoded JSON.
func ParseAction(v any) (Action, error) {
	switch x := v.(type) {
	case string:
		switch x {
		case Accept, Pause, Reject, Continue:
			return Action{Kind: x}, nil
		}
	case []any:
		if len(x) > 0 && x[0] == RateLimit {
			if len(x) == 2 {
				if n, ok := x[1].(json.Number); ok {
					if i, err := n.Int64(); err == nil && i > 0 && i <= 1<<31 {
						return Action{Kind: RateLimit, Limit: int(i)}, nil
					}
				}
			}
			return Action{}, ecode.Errorf(ecode.Inval, "RATE_LIMIT argument must be a positive integer")
		}
	}
	return Action{}, ecode.Errorf(ecode.Inval, "malformed FilterAction JSON: %s", show(v))
}

// Predicate is one condition of a rule: Kind is "jobid", "opcode" or
// "reason"; Filter is a query-language filter (nil matches every job).
type Predicate struct {
	Kind   string
	Filter any
	expr   *expr
}

// MarshalJSON writes [kind, filter].
func (p Predicate) MarshalJSON() ([]byte, error) {
	return json.Marshal([]any{p.Kind, p.Filter})
}

// UnmarshalJSON reads [kind, filter] and compiles the filter.
func (p *Predicate) UnmarshalJSON(b []byte) error {
	v, err := decode(b)
	if err != nil {
		return err
	}
	q, err := ParsePredicate(v)
	if err != nil {
		return err
	}
	*p = q
	return nil
}

// ParsePredicate reads a predicate from its decoded JSON (numbers as
// json.Number).
func ParsePredicate(v any) (Predicate, error) {
	l, ok := v.([]any)
	if !ok || len(l) == 0 {
		return Predicate{}, ecode.Errorf(ecode.Inval, "malformed FilterPredicate: must be a list with the first entry being a string describing the predicate type")
	}
	kind, ok := l[0].(string)
	if !ok {
		return Predicate{}, ecode.Errorf(ecode.Inval, "malformed FilterPredicate: must be a list with the first entry being a string describing the predicate type")
	}
	switch kind {
	case "jobid", "opcode", "reason":
	default:
		return Predicate{}, ecode.Errorf(ecode.Inval, "malformed FilterPredicate: unknown predicate type '%s'", kind)
	}
	if len(l) != 2 {
		return Predicate{}, ecode.Errorf(ecode.Inval, "malformed FilterPredicate: bad parameter list for '%s' predicate: %s", kind, show(l[1:]))
	}
	e, err := parseExpr(l[1], 0)
	if err != nil {
		return Predicate{}, err
	}
	return Predicate{Kind: kind, Filter: l[1], expr: e}, nil
}

// Rule is one filter rule.
type Rule struct {
	UUID string `json:"uuid"`
	// Watermark is the highest job id handed out when the rule was
	// added; a jobid predicate can compare with it as "watermark".
	Watermark   int64       `json:"watermark"`
	Priority    int         `json:"priority"`
	Predicates  []Predicate `json:"predicates"`
	Action      Action      `json:"action"`
	ReasonTrail []any       `json:"reason_trail"`
}

// Less orders rules as they are evaluated: priority, then watermark,
// then uuid.
func Less(a, b *Rule) int {
	if c := cmp.Compare(a.Priority, b.Priority); c != 0 {
		return c
	}
	if c := cmp.Compare(a.Watermark, b.Watermark); c != 0 {
		return c
	}
	return cmp.Compare(a.UUID, b.UUID)
}

// Sort puts rules in evaluation order.
func Sort(rules []*Rule) { slices.SortFunc(rules, Less) }

// Job is what predicates look at: the job's id, its opcodes (decoded
// inputs) and the reason trail entries of all its opcodes.
type Job struct {
	ID      int64
	Ops     []map[string]any
	Reasons [][]any
}

// NewJob decodes a job's opcode inputs (numbers kept exact) and collects
// their reason trails; an input that does not decode is left out.
func NewJob(id int64, inputs []json.RawMessage) *Job {
	j := &Job{ID: id}
	for _, in := range inputs {
		v, err := decode(in)
		m, ok := v.(map[string]any)
		if err != nil || !ok {
			continue
		}
		j.Ops = append(j.Ops, m)
		if trail, ok := m["reason"].([]any); ok {
			for _, r := range trail {
				if e, ok := r.([]any); ok && len(e) == 3 {
					j.Reasons = append(j.Reasons, e)
				}
			}
		}
	}
	return j
}

// Matches reports whether every predicate of r holds for j.
func (r *Rule) Matches(j *Job) bool {
	for i := range r.Predicates {
		if !r.Predicates[i].matches(j, r.Watermark) {
			return false
		}
	}
	return true
}

// Applying is the rule that decides j's fate: the first of rules (in
// evaluation order, see Sort) that matches j and is not CONTINUE; nil
// when none does, and the job runs.
func Applying(rules []*Rule, j *Job) *Rule {
	for _, r := range rules {
		if r.Action.Kind != Continue && r.Matches(j) {
			return r
		}
	}
	return nil
}

var uuidRE = regexp.MustCompile(`^[a-fA-F0-9]{8}-[a-fA-F0-9]{4}-[a-fA-F0-9]{4}-[a-fA-F0-9]{4}-[a-fA-F0-9]{12}$`)

// IsUUID reports whether s is written as a UUID.
func IsUUID(s string) bool { return uuidRE.MatchString(s) }

// decode reads JSON keeping numbers as json.Number.
func decode(b []byte) (any, error) {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, ecode.Errorf(ecode.Inval, "malformed JSON: %w", err)
	}
	return v, nil
}

// Normalize re-reads a value decoded with float numbers (as LUXI and RAPI
// bodies arrive) so that numbers are json.Number, as the parsers expect.
func Normalize(v any) (any, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, ecode.Errorf(ecode.Inval, "unencodable value: %w", err)
	}
	return decode(b)
}

func show(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}
