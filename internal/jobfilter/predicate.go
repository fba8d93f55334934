package jobfilter

import (
	"cmp"
	"encoding/json"

	"strings"
)

// matches reports whether p holds for j; watermark is the rule's.
func (p *Predicate) matches(j *Job, watermark int64) bool {
	e := p.expr
	if e == nil {
		// A predicate built in Go rather than parsed; compile it now.
		v, err := Normalize(p.Filter)
		if err != nil {
			return false
		}
		if e, err = parseExpr(v, 0); err != nil {
			return false
		}
	}
	switch p.Kind {
	case "jobid":
		return e.holds(func(l *expr) (bool, bool) { return jobIDLeaf(l, j.ID, watermark) })
	case "opcode":
		for _, op := range j.Ops {
			if opcodeMatches(e, op) {
				return true
			}
		}
		return false
	case "reason":
		for _, r := range j.Reasons {
			if e.holds(func(l *expr) (bool, bool) { return reasonLeaf(l, r) }) {
				return true
			}
		}
	}
	return false
}

// jobIDLeaf compares the job id ("id") with a number or the watermark.
func jobIDLeaf(l *expr, id, watermark int64) (bool, bool) {
	if l.field != "id" || l.re != nil || l.op == "?" || l.op == "=[]" {
		return false, false
	}
	switch {
	case l.value.isNum:
		return comparison(l.op, cmp.Compare(id, l.value.n))
	case l.value.s == "watermark":
		return comparison(l.op, cmp.Compare(id, watermark))
	}
	return false, false
}

// reasonLeaf compares one reason trail entry [source, reason, timestamp].
func reasonLeaf(l *expr, r []any) (bool, bool) {
	if l.re != nil || l.op == "?" || l.op == "=[]" {
		return false, false
	}
	var have value
	switch l.field {
	case "source", "reason":
		i := 0
		if l.field == "reason" {
			i = 1
		}
		s, ok := r[i].(string)
		if !ok {
			return false, false
		}
		have = value{s: s}
	case "timestamp":
		n, ok := r[2].(json.Number)
		if !ok {
			return false, false
		}
		ts, err := n.Int64()
		if err != nil {
			return false, false
		}
		have = value{isNum: true, n: ts}
	default:
		return false, false
	}
	return comparison(l.op, have.compare(l.value))
}

// opcodeMatches evaluates e on one opcode, whose fields are dotted paths
// into its parameters ("OP_ID", "instance_name", "beparams.memory"). A path
// that does not exist makes the predicate false.
func opcodeMatches(e *expr, op map[string]any) bool {
	vals := map[string]any{}
	for _, f := range e.fields(nil) {
		v, ok := access(op, f)
		if !ok {
			return false
		}
		vals[f] = v
	}
	return e.holds(func(l *expr) (bool, bool) { return jsonLeaf(l, vals[l.field]) })
}

func access(v any, dotted string) (any, bool) {
	for _, k := range strings.Split(dotted, ".") {
		m, ok := v.(map[string]any)
		if !ok {
			return nil, false
		}
		if v, ok = m[k]; !ok {
			return nil, false
		}
	}
	return v, true
}

// jsonLeaf applies an operator to a JSON value of an opcode.
func jsonLeaf(l *expr, v any) (bool, bool) {
	switch {
	case l.op == "?":
		b, ok := v.(bool)
		return b, ok
	case l.re != nil:
		s, ok := v.(string)
		if !ok {
			return false, false
		}
		return l.re.MatchString(s), true
	case l.op == "=[]":
		list, ok := v.([]any)
		if !ok {
			return false, false
		}
		found := false
		for _, e := range list {
			x, ok := jsonValue(e)
			if !ok || x.isNum != l.value.isNum {
				return false, false // not a list of this kind of value
			}
			found = found || x.compare(l.value) == 0
		}
		return found, true
	}
	return comparison(l.op, compareJSON(v, l.value.json()))
}

func jsonValue(v any) (value, bool) {
	switch x := v.(type) {
	case string:
		return value{s: x}, true
	case json.Number:
		n, err := x.Int64()
		return value{isNum: true, n: n}, err == nil
	}
	return value{}, false
}

// jsonRank orders JSON kinds: null, bool, number, string, array, object.
func jsonRank(v any) int {
	switch v.(type) {
	case nil:
		return 0
	case bool:
		return 1
	case json.Number, int64, float64:
		return 2
	case string:
		return 3
	case []any:
		return 4
	}
	return 5
}

// compareJSON is a total order on JSON values: by kind, then by value.
func compareJSON(a, b any) int {
	if c := cmp.Compare(jsonRank(a), jsonRank(b)); c != 0 {
		return c
	}
	switch x := a.(type) {
	case bool:
		y := b.(bool)
		switch {
		case x == y:
			return 0
		case !x:
			return -1
		}
		return 1
	case string:
		return strings.Compare(x, b.(string))
	case []any:
		y := b.([]any)
		for i := 0; i < len(x) && i < len(y); i++ {
			if c := compareJSON(x[i], y[i]); c != 0 {
				return c
			}
		}
		return cmp.Compare(len(x), len(y))
	case nil:
		return 0
	}
	if jsonRank(a) == 2 {
		if x, ok := integer(a); ok {
			if y, ok := integer(b); ok {
				return cmp.Compare(x, y)
			}
		}
		return cmp.Compare(number(a), number(b))
	}
	return strings.Compare(show(a), show(b))
}

func integer(v any) (int64, bool) {
	switch x := v.(type) {
	case json.Number:
		n, err := x.Int64()
		return n, err == nil
	case int64:
		return x, true
	}
	return 0, false
}

func number(v any) float64 {
	switch x := v.(type) {
	case json.Number:
		f, _ := x.Float64()
		return f
	case int64:
		return float64(x)
	case float64:
		return x
	}
	return 0
}
