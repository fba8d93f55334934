package jobfilter

import (
	"cmp"
	"encoding/json"
	"regexp"
	"strings"

	"github.com/corral/corral/internal/ecode"
)

// expr is a compiled query-language filter as predicates use it: the
// operators of Ganeti's query language, with values that are strings or
// integers.
type expr struct {
	op    string // "" (empty filter), "&", "|", "!", "?", "==", "<", "<=", ">", ">=", "=~", "=[]"
	subs  []*expr
	field string
	value value
	re    *regexp.Regexp
}

// value is a filter value: a string or an integer.
type value struct {
	isNum bool
	s     string
	n     int64
}

func (v value) json() any {
	if v.isNum {
		return v.n
	}
	return v.s
}

// compare orders values as Ganeti does: strings before numbers.
func (v value) compare(w value) int {
	switch {
	case v.isNum != w.isNum:
		if v.isNum {
			return 1
		}
		return -1
	case v.isNum:
		return cmp.Compare(v.n, w.n)
	}
	return strings.Compare(v.s, w.s)
}

// maxDepth bounds the nesting of a filter.
const maxDepth = 64

func parseErr(format string, args ...any) error {
	return ecode.Errorf(ecode.Inval, "Cannot deserialise filter: "+format, args...)
}

// parseExpr compiles a filter decoded with json.Number numbers.
func parseExpr(v any, depth int) (*expr, error) {
	if v == nil {
		return &expr{}, nil
	}
	if depth > maxDepth {
		return nil, parseErr("nested more than %d levels", maxDepth)
	}
	l, ok := v.([]any)
	if !ok || len(l) == 0 {
		return nil, parseErr("expected array [string, args], got %s", show(v))
	}
	op, ok := l[0].(string)
	if !ok {
		return nil, parseErr("expected array [string, args], got %s", show(v))
	}
	args := l[1:]
	switch op {
	case "&", "|":
		e := &expr{op: op}
		for _, a := range args {
			s, err := parseExpr(a, depth+1)
			if err != nil {
				return nil, err
			}
			e.subs = append(e.subs, s)
		}
		return e, nil
	case "!":
		if len(args) != 1 {
			return nil, parseErr("expected [filter] but got %s", show(args))
		}
		s, err := parseExpr(args[0], depth+1)
		if err != nil {
			return nil, err
		}
		return &expr{op: "!", subs: []*expr{s}}, nil
	case "?":
		if len(args) != 1 {
			return nil, parseErr("expected [fieldname] but got %s", show(args))
		}
		f, ok := args[0].(string)
		if !ok {
			return nil, parseErr("expected a field name, got %s", show(args[0]))
		}
		return &expr{op: "?", field: f}, nil
	case "==", "=", "!=", "<", ">", "<=", ">=", "=~", "=[]":
	default:
		return nil, ecode.Errorf(ecode.Inval, "Unknown filter operand '%s'", op)
	}
	if len(args) != 2 {
		return nil, parseErr("expected [fieldname, value] but got %s", show(args))
	}
	f, ok := args[0].(string)
	if !ok {
		return nil, parseErr("expected a field name, got %s", show(args[0]))
	}
	val, err := parseValue(args[1])
	if err != nil {
		return nil, err
	}
	e := &expr{op: op, field: f, value: val}
	switch op {
	case "=":
		e.op = "=="
	case "!=":
		// "!=" is not ("==").
		return &expr{op: "!", subs: []*expr{{op: "==", field: f, value: val}}}, nil
	case "=~":
		if val.isNum {
			return nil, parseErr("a regular expression must be a string, got %d", val.n)
		}
		re, err := regexp.Compile(val.s)
		if err != nil {
			return nil, ecode.Errorf(ecode.Inval, "Invalid regular expression '%s': %w", val.s, err)
		}
		e.re = re
	}
	return e, nil
}

func parseValue(v any) (value, error) {
	switch x := v.(type) {
	case string:
		return value{s: x}, nil
	case json.Number:
		n, err := x.Int64()
		if err != nil {
			return value{}, parseErr("expecting an integral numeric value but got %s", x.String())
		}
		return value{isNum: true, n: n}, nil
	}
	return value{}, parseErr("expected a string or a number as filter value, got %s", show(v))
}

// leaf evaluates one field operator; ok is false when the operation is
// not valid for the field (the whole filter is then false).
type leaf func(e *expr) (res, ok bool)

// eval evaluates e; ok is false when some operation reached was invalid.
// "&" and "|" stop at the first operand that decides them.
func (e *expr) eval(f leaf) (res, ok bool) {
	switch e.op {
	case "":
		return true, true
	case "&":
		for _, s := range e.subs {
			r, ok := s.eval(f)
			if !ok || !r {
				return false, ok
			}
		}
		return true, true
	case "|":
		for _, s := range e.subs {
			r, ok := s.eval(f)
			if !ok || r {
				return r, ok
			}
		}
		return false, true
	case "!":
		r, ok := e.subs[0].eval(f)
		return !r, ok
	}
	return f(e)
}

// holds is eval with an invalid operation counting as false.
func (e *expr) holds(f leaf) bool {
	r, ok := e.eval(f)
	return ok && r
}

// fields lists the field names e refers to.
func (e *expr) fields(out []string) []string {
	if e.field != "" {
		out = append(out, e.field)
	}
	for _, s := range e.subs {
		out = s.fields(out)
	}
	return out
}

// comparison applies a comparison operator to an ordering result.
func comparison(op string, c int) (bool, bool) {
	switch op {
	case "==":
		return c == 0, true
	case "<":
		return c < 0, true
	case "<=":
		return c <= 0, true
	case ">":
		return c > 0, true
	case ">=":
		return c >= 0, true
	}
	return false, false
}
