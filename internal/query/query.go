// Package query is the one field and filter language behind LUXI's Query and
// Query{Instances,Nodes,Groups}, RAPI's /2/query and the CLI's -o. A resource
// declares its fields once (name, title, kind, getter); every front end uses
// the same declarations.
package query

import (
	"fmt"
	"sort"
	"strings"

	"github.com/corral/corral/internal/ecode"
)

// Kind is Ganeti's field kind.
type Kind string

const (
	KText      Kind = "text"
	KNumber    Kind = "number"
	KBool      Kind = "bool"
	KOther     Kind = "other"
	KTimestamp Kind = "timestamp"
	KUnit      Kind = "unit"
	KFloat     Kind = "float"
)

// Result status of one value (Ganeti's RS_*).
const (
	RSNormal  = 0
	RSUnknown = 1
	RSNoData  = 2
	RSUnavail = 3
	RSOffline = 4
)

// Field is one queryable attribute of a resource of type T.
type Field[T any] struct {
	Name  string
	Title string
	Kind  Kind
	Doc   string
	// Live fields need facts gathered from nodes.
	Live bool
	// Get returns the value and its status (RSNormal when available).
	Get func(obj T) (any, int)
}

// FieldDef is a field's description as sent to clients.
type FieldDef struct {
	Name  string `json:"name"`
	Title string `json:"title"`
	Kind  Kind   `json:"kind"`
	Doc   string `json:"doc"`
}

// Resource is the set of fields of one resource type.
type Resource[T any] struct {
	Name   string
	fields map[string]*Field[T]
	order  []string
}

// NewResource indexes fields.
func NewResource[T any](name string, fields []Field[T]) *Resource[T] {
	r := &Resource[T]{Name: name, fields: map[string]*Field[T]{}}
	for i := range fields {
		f := &fields[i]
		r.fields[f.Name] = f
		r.order = append(r.order, f.Name)
	}
	return r
}

// Names lists the fields in declaration order.
func (r *Resource[T]) Names() []string { return r.order }

// Defs describes the named fields (all when names is empty); unknown names
// get a definition of kind "unknown" as Ganeti does.
func (r *Resource[T]) Defs(names []string) []FieldDef {
	if len(names) == 0 {
		names = append([]string(nil), r.order...)
		sort.Strings(names)
	}
	out := make([]FieldDef, 0, len(names))
	for _, n := range names {
		if f, ok := r.fields[n]; ok {
			out = append(out, FieldDef{f.Name, f.Title, f.Kind, f.Doc})
		} else {
			out = append(out, FieldDef{n, strings.ToUpper(n), "unknown", "Unknown field '" + n + "'"})
		}
	}
	return out
}

// Check returns an error naming unknown fields.
func (r *Resource[T]) Check(names []string) error {
	var bad []string
	for _, n := range names {
		if _, ok := r.fields[n]; !ok {
			bad = append(bad, n)
		}
	}
	if len(bad) > 0 {
		return ecode.Errorf(ecode.Inval, "Unknown output fields selected: %s", strings.Join(bad, ", "))
	}
	return nil
}

// NeedsLive reports whether any named field (or filter field) needs node facts.
func (r *Resource[T]) NeedsLive(names []string) bool {
	for _, n := range names {
		if f, ok := r.fields[n]; ok && f.Live {
			return true
		}
	}
	return false
}

// Cell is one value with its status, Ganeti's [status, value].
type Cell [2]any

// Rows evaluates fields for each object (new-style Query: every value with
// its status).
func (r *Resource[T]) Rows(objs []T, names []string) [][]Cell {
	out := make([][]Cell, 0, len(objs))
	for _, o := range objs {
		row := make([]Cell, len(names))
		for i, n := range names {
			f, ok := r.fields[n]
			if !ok {
				row[i] = Cell{RSUnknown, nil}
				continue
			}
			v, st := f.Get(o)
			if st != RSNormal {
				v = nil
			}
			row[i] = Cell{st, v}
		}
		out = append(out, row)
	}
	return out
}

// Values evaluates fields for each object (old-style queries: plain values,
// null where unavailable).
func (r *Resource[T]) Values(objs []T, names []string) [][]any {
	out := make([][]any, 0, len(objs))
	for _, o := range objs {
		row := make([]any, len(names))
		for i, n := range names {
			if f, ok := r.fields[n]; ok {
				if v, st := f.Get(o); st == RSNormal {
					row[i] = v
				}
			}
		}
		out = append(out, row)
	}
	return out
}

// Value evaluates one field (for filters).
func (r *Resource[T]) Value(o T, name string) (any, bool) {
	f, ok := r.fields[name]
	if !ok {
		return nil, false
	}
	v, st := f.Get(o)
	return v, st == RSNormal
}

// Has reports whether a field exists.
func (r *Resource[T]) Has(name string) bool { _, ok := r.fields[name]; return ok }

// Filter keeps the objects matching a Ganeti query filter (nil = all).
func Filter[T any](r *Resource[T], objs []T, filter any) ([]T, error) {
	if filter == nil {
		return objs, nil
	}
	f, err := Compile(filter, func(name string) bool { return r.Has(name) })
	if err != nil {
		return nil, err
	}
	var out []T
	for _, o := range objs {
		if f(func(name string) (any, bool) { return r.Value(o, name) }) {
			out = append(out, o)
		}
	}
	return out, nil
}

// FilterFields lists the fields a filter refers to.
func FilterFields(filter any) []string {
	var out []string
	var walk func(v any)
	walk = func(v any) {
		l, ok := v.([]any)
		if !ok || len(l) == 0 {
			return
		}
		op, _ := l[0].(string)
		switch op {
		case "|", "&":
			for _, e := range l[1:] {
				walk(e)
			}
		case "!":
			if len(l) > 1 {
				walk(l[1])
			}
		default:
			if len(l) > 1 {
				if s, ok := l[1].(string); ok {
					out = append(out, s)
				}
			}
		}
	}
	walk(filter)
	return out
}

func errFilter(format string, args ...any) error {
	return ecode.Errorf(ecode.Inval, "Invalid query filter: %s", fmt.Sprintf(format, args...))
}

// RequestedNames returns the names a filter asks for when it is nothing
// but equalities on namefield joined by "|" (Ganeti then looks each name
// up and reports an unknown one), and false for any other filter. A nil
// filter asks for no name in particular.
func RequestedNames(filter any, namefield string) ([]string, bool) {
	if filter == nil {
		return nil, true
	}
	l, isList := filter.([]any)
	if !isList || len(l) == 0 {
		return nil, false
	}
	switch l[0] {
	case "|":
		var out []string
		for _, sub := range l[1:] {
			names, ok := RequestedNames(sub, namefield)
			if !ok || sub == nil {
				return nil, false
			}
			out = append(out, names...)
		}
		return out, true
	case "=", "==":
		if len(l) == 3 && l[1] == namefield {
			if s, ok := l[2].(string); ok {
				return []string{s}, true
			}
		}
	}
	return nil, false
}
