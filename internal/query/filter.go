package query

import (
	"fmt"
	"reflect"
	"regexp"
	"strings"
)

// Getter returns a field's value for the object being filtered.
type Getter func(name string) (any, bool)

// Predicate is a compiled filter.
type Predicate func(get Getter) bool

// Compile turns Ganeti's filter language into a predicate:
//
//	["|", f...]  ["&", f...]  ["!", f]  ["?", field]  ["=", field, value]
//	["!=", field, value]  ["<" | ">" | "<=" | ">=", field, value]
//	["=~", field, regexp]  ["=[]", field, value] (list contains value)
//
// known reports whether a field exists.
func Compile(filter any, known func(string) bool) (Predicate, error) {
	return compile(filter, known, 0)
}

func compile(filter any, known func(string) bool, depth int) (Predicate, error) {
	if depth > 64 {
		return nil, errFilter("nested too deeply")
	}
	l, ok := filter.([]any)
	if !ok || len(l) == 0 {
		return nil, errFilter("expected a non-empty list, got %v", filter)
	}
	op, ok := l[0].(string)
	if !ok {
		return nil, errFilter("operator must be a string, got %v", l[0])
	}
	switch op {
	case "|", "&":
		var subs []Predicate
		for _, e := range l[1:] {
			p, err := compile(e, known, depth+1)
			if err != nil {
				return nil, err
			}
			subs = append(subs, p)
		}
		if op == "|" {
			return func(g Getter) bool {
				for _, p := range subs {
					if p(g) {
						return true
					}
				}
				return false
			}, nil
		}
		return func(g Getter) bool {
			for _, p := range subs {
				if !p(g) {
					return false
				}
			}
			return true
		}, nil
	case "!":
		if len(l) != 2 {
			return nil, errFilter("'!' takes one operand")
		}
		p, err := compile(l[1], known, depth+1)
		if err != nil {
			return nil, err
		}
		return func(g Getter) bool { return !p(g) }, nil
	}
	field, fok := func() (string, bool) {
		if len(l) < 2 {
			return "", false
		}
		s, ok := l[1].(string)
		return s, ok
	}()
	if !fok {
		return nil, errFilter("operator '%s' needs a field name", op)
	}
	if !known(field) {
		return nil, errFilter("unknown field '%s'", field)
	}
	if op == "?" {
		if len(l) != 2 {
			return nil, errFilter("'?' takes one field")
		}
		return func(g Getter) bool {
			v, ok := g(field)
			return ok && truthy(v)
		}, nil
	}
	if len(l) != 3 {
		return nil, errFilter("operator '%s' takes a field and a value", op)
	}
	want := l[2]
	switch op {
	case "=", "==":
		return func(g Getter) bool { v, ok := g(field); return ok && equal(v, want) }, nil
	case "!=":
		return func(g Getter) bool { v, ok := g(field); return ok && !equal(v, want) }, nil
	case "<", ">", "<=", ">=":
		return func(g Getter) bool {
			v, ok := g(field)
			if !ok {
				return false
			}
			c, ok := compare(v, want)
			if !ok {
				return false
			}
			switch op {
			case "<":
				return c < 0
			case ">":
				return c > 0
			case "<=":
				return c <= 0
			}
			return c >= 0
		}, nil
	case "=~":
		s, ok := want.(string)
		if !ok {
			return nil, errFilter("'=~' needs a regular expression string")
		}
		re, err := regexp.Compile(s)
		if err != nil {
			return nil, errFilter("bad regular expression %q: %v", s, err)
		}
		return func(g Getter) bool {
			v, ok := g(field)
			sv, isStr := v.(string)
			return ok && isStr && re.MatchString(sv)
		}, nil
	case "=[]":
		return func(g Getter) bool {
			v, ok := g(field)
			if !ok {
				return false
			}
			for _, e := range asList(v) {
				if equal(e, want) {
					return true
				}
			}
			return false
		}, nil
	}
	return nil, errFilter("unknown operator '%s'", op)
}

func truthy(v any) bool {
	switch x := v.(type) {
	case nil:
		return false
	case bool:
		return x
	case string:
		return x != ""
	case float64:
		return x != 0
	case int:
		return x != 0
	case int64:
		return x != 0
	}
	if l := asList(v); l != nil {
		return len(l) > 0
	}
	return true
}

func asList(v any) []any {
	if x, ok := v.([]any); ok {
		return x
	}
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Slice {
		return nil
	}
	out := make([]any, rv.Len())
	for i := range out {
		out[i] = rv.Index(i).Interface()
	}
	return out
}

func num(v any) (float64, bool) {
	switch x := v.(type) {
	case float64:
		return x, true
	case int:
		return float64(x), true
	case int64:
		return float64(x), true
	case int32:
		return float64(x), true
	}
	return 0, false
}

func equal(a, b any) bool {
	if x, ok := num(a); ok {
		y, ok := num(b)
		return ok && x == y
	}
	return fmt.Sprint(a) == fmt.Sprint(b)
}

func compare(a, b any) (int, bool) {
	if x, ok := num(a); ok {
		y, ok := num(b)
		if !ok {
			return 0, false
		}
		switch {
		case x < y:
			return -1, true
		case x > y:
			return 1, true
		}
		return 0, true
	}
	sa, ok1 := a.(string)
	sb, ok2 := b.(string)
	if !ok1 || !ok2 {
		return 0, false
	}
	return strings.Compare(sa, sb), true
}
