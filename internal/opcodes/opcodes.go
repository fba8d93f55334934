// Package opcodes is the one declarative table of Corral's opcodes: their
// Ganeti OP_ID, parameter names, types and defaults. It feeds validation of
// submitted jobs, job summaries and CLI help, so the three cannot drift.
package opcodes

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"slices"
	"sort"
	"strings"

	"github.com/corral/corral/internal/ecode"
)

// Type is a parameter's type as checked at submission.
type Type int

const (
	TString   Type = iota
	TNEString      // non-empty string
	TInt
	TFloat // any number
	TBool
	TList
	TDict
	TAny
	TStringList
	TMaybeString // string or null
	TMaybeInt
	TNonNegInt   // Ganeti's TNonNegativeInt
	TNonNegFloat // Ganeti's TNonNegative(TNumber)
)

func (t Type) String() string {
	return [...]string{"string", "non-empty string", "int", "number", "bool", "list", "dict", "any",
		"list of strings", "string or null", "int or null", "non-negative int", "non-negative number"}[t]
}

// MaxExactInt is the largest integer a JSON number (a float64) carries
// exactly, with no neighbour rounding to it; int parameters beyond it are
// refused rather than rounded.
const MaxExactInt = 1<<53 - 1

// Param is one opcode parameter.
type Param struct {
	Name     string
	Type     Type
	Required bool
	Default  any // applied when absent (JSON types: float64, string, bool, nil, []any, map[string]any)
	Doc      string
	// Sensitive says who may see the value in a job (redact.go).
	Sensitive Sensitivity
	// Ops marks a list of opcodes (OP_INSTANCE_MULTI_ALLOC's instances):
	// Redact hides each item's sensitive parameters by its own definition.
	Ops bool
	// Max bounds a numeric parameter from above when non-zero; MaxDoc
	// says what the bound means ("7 days").
	Max    float64
	MaxDoc string
	// Unsupported, when set, names what Corral cannot do: the parameter
	// is accepted with its default, null, an empty list or dict, or one of
	// Honoured, and any other value is refused naming the parameter.
	Unsupported string
	Honoured    []any
}

// Def is one opcode.
type Def struct {
	ID     string // OP_INSTANCE_CREATE
	KeyPrm string // parameter shown in the job summary: INSTANCE_CREATE(<value>)
	Doc    string
	Params []Param
	// RootOnly opcodes act as root on the nodes beyond what the cluster's
	// own objects need (a shell command, a file anywhere): corrald takes
	// them only from root on its LUXI socket.
	RootOnly bool
	byName   map[string]*Param
}

// Common parameters every opcode accepts (Ganeti's OpCode base).
var commonParams = []Param{
	{Name: "dry_run", Type: TBool, Default: false, Doc: "only check, change nothing"},
	{Name: "debug_level", Type: TInt, Default: float64(0), Doc: "debug level"},
	{Name: "priority", Type: TInt, Default: float64(0), Doc: "job priority, -20 (high) .. 19 (low)"},
	{Name: "depends", Type: TAny, Default: nil, Doc: "job dependencies [[job_id, [statuses]], ...]"},
	{Name: "comment", Type: TAny, Default: nil, Doc: "free-form comment"},
	{Name: "reason", Type: TAny, Default: []any{}, Doc: "reason trail [[source, reason, timestamp], ...]"},
}

// Table is an immutable set of opcode definitions.
type Table struct {
	defs map[string]*Def
	ids  []string
	// sensitive[s] lists the names of parameters of sensitivity s or more
	// in any opcode, for Redact's quick test.
	sensitive map[Sensitivity][]string
}

// NewTable indexes defs.
func NewTable(defs []Def) *Table {
	t := &Table{defs: map[string]*Def{}, sensitive: map[Sensitivity][]string{}}
	for i := range defs {
		d := defs[i]
		d.Params = append(append([]Param{}, d.Params...), commonParams...)
		d.byName = map[string]*Param{}
		for j := range d.Params {
			p := &d.Params[j]
			d.byName[p.Name] = p
			for s := Private; s <= p.Sensitive; s++ {
				if !slices.Contains(t.sensitive[s], p.Name) {
					t.sensitive[s] = append(t.sensitive[s], p.Name)
				}
			}
		}
		t.defs[d.ID] = &d
		t.ids = append(t.ids, d.ID)
	}
	sort.Strings(t.ids)
	return t
}

// Lookup returns the definition of an OP_ID.
func (t *Table) Lookup(id string) (*Def, bool) {
	d, ok := t.defs[id]
	return d, ok
}

// IDs lists every OP_ID, sorted.
func (t *Table) IDs() []string { return t.ids }

// Op is a decoded, validated opcode: its OP_ID and the parameters with
// defaults filled in.
type Op struct {
	ID     string
	Def    *Def
	Params map[string]any
}

// Decode parses and validates one opcode as submitted. Unknown OP_IDs,
// unknown parameters, wrong types and missing required parameters are
// ecode.Inval errors naming the culprit.
func (t *Table) Decode(raw json.RawMessage) (*Op, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		return nil, ecode.Errorf(ecode.Inval, "opcode is not a JSON object: %v", err)
	}
	if m == nil {
		return nil, ecode.Errorf(ecode.Inval, "opcode is not a JSON object")
	}
	id, _ := m["OP_ID"].(string)
	if id == "" {
		return nil, ecode.Errorf(ecode.Inval, "opcode has no OP_ID")
	}
	d, ok := t.defs[id]
	if !ok {
		if slices.Contains(GanetiOpIDs(), id) {
			return nil, ecode.Errorf(ecode.Inval, "Opcode %s is not supported by Corral", id)
		}
		return nil, &ecode.Error{Kind: ecode.OpCodeUnknown, Class: ecode.Inval, Msg: fmt.Sprintf("unknown opcode %q", id)}
	}
	op := &Op{ID: id, Def: d, Params: make(map[string]any, len(d.Params))}
	for k, v := range m {
		if k == "OP_ID" {
			continue
		}
		p, ok := d.byName[k]
		if !ok {
			return nil, ecode.Errorf(ecode.Inval, "%s: unknown parameter %q", id, k)
		}
		cv, err := check(p, normalize(v))
		if err != nil {
			return nil, ecode.Errorf(ecode.Inval, "%s: parameter %q: %v", id, k, err)
		}
		if p.Unsupported != "" && !honoured(p, cv) {
			return nil, ecode.Errorf(ecode.Inval, "%s: parameter %q: value %s is not supported: Corral has no %s", id, k, ParamText(cv), p.Unsupported)
		}
		op.Params[k] = cv
	}
	for i := range d.Params {
		p := &d.Params[i]
		if _, ok := op.Params[p.Name]; ok {
			continue
		}
		if p.Required {
			return nil, ecode.Errorf(ecode.Inval, "%s: required parameter %q is missing", id, p.Name)
		}
		op.Params[p.Name] = p.Default
	}
	return op, nil
}

// honoured reports whether v is a value Corral honours for a parameter
// with Unsupported set: its default, null, an empty list or dict, or one of
// the listed values.
func honoured(p *Param, v any) bool {
	switch x := v.(type) {
	case nil:
		return true
	case []any:
		if len(x) == 0 {
			return true
		}
	case map[string]any:
		if len(x) == 0 {
			return true
		}
	}
	if reflect.DeepEqual(v, p.Default) {
		return true
	}
	return slices.ContainsFunc(p.Honoured, func(h any) bool { return reflect.DeepEqual(h, v) })
}

// normalize turns json.Number into float64 recursively.
func normalize(v any) any {
	switch x := v.(type) {
	case json.Number:
		f, _ := x.Float64()
		return f
	case []any:
		for i := range x {
			x[i] = normalize(x[i])
		}
		return x
	case map[string]any:
		for k := range x {
			x[k] = normalize(x[k])
		}
		return x
	}
	return v
}

func check(p *Param, v any) (any, error) {
	if v == nil {
		switch p.Type {
		case TAny, TMaybeString, TMaybeInt:
			return nil, nil
		}
		if !p.Required {
			return p.Default, nil
		}
		return nil, fmt.Errorf("must not be null")
	}
	bad := func() error { return fmt.Errorf("expected %s, got %s", p.Type, jsonType(v)) }
	switch p.Type {
	case TString, TMaybeString:
		if _, ok := v.(string); !ok {
			return nil, bad()
		}
	case TNEString:
		s, ok := v.(string)
		if !ok {
			return nil, bad()
		}
		if strings.TrimSpace(s) == "" {
			return nil, fmt.Errorf("must not be empty")
		}
	case TInt, TMaybeInt, TNonNegInt, TFloat, TNonNegFloat:
		if err := checkNumber(p, v); err != nil {
			return nil, err
		}
	case TBool:
		if _, ok := v.(bool); !ok {
			return nil, bad()
		}
	case TList:
		if _, ok := v.([]any); !ok {
			return nil, bad()
		}
	case TStringList:
		l, ok := v.([]any)
		if !ok {
			return nil, bad()
		}
		for _, e := range l {
			if _, ok := e.(string); !ok {
				return nil, fmt.Errorf("expected a list of strings, found %s", jsonType(e))
			}
		}
	case TDict:
		if _, ok := v.(map[string]any); !ok {
			return nil, bad()
		}
	}
	return v, nil
}

// checkNumber checks a numeric parameter: a finite number (JSON cannot
// carry NaN or infinities, but 1e999 decodes to +Inf), integral and exactly
// representable for int types, non-negative and within Max where the
// parameter says so.
func checkNumber(p *Param, v any) error {
	f, ok := v.(float64)
	if !ok {
		return fmt.Errorf("expected %s, got %s", p.Type, jsonType(v))
	}
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return fmt.Errorf("expected a finite %s, got %v", p.Type, f)
	}
	integral := p.Type == TInt || p.Type == TMaybeInt || p.Type == TNonNegInt
	if integral && f != math.Trunc(f) {
		return fmt.Errorf("expected %s, got number %v", p.Type, f)
	}
	if integral && math.Abs(f) > MaxExactInt {
		return fmt.Errorf("%s %v is out of range (at most %d in magnitude)", p.Type, f, int64(MaxExactInt))
	}
	if (p.Type == TNonNegInt || p.Type == TNonNegFloat) && f < 0 {
		return fmt.Errorf("expected %s, got %v", p.Type, f)
	}
	if p.Max != 0 && f > p.Max {
		bound := ParamText(p.Max)
		if p.MaxDoc != "" {
			bound += " (" + p.MaxDoc + ")"
		}
		return fmt.Errorf("%v is above the maximum %s", f, bound)
	}
	return nil
}

func jsonType(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case string:
		return "string"
	case float64:
		return "number"
	case bool:
		return "bool"
	case []any:
		return "list"
	case map[string]any:
		return "dict"
	}
	return fmt.Sprintf("%T", v)
}

// Summary renders Ganeti's job summary: "INSTANCE_CREATE(inst1)".
func (t *Table) Summary(id string, raw json.RawMessage) string {
	short := strings.TrimPrefix(id, "OP_")
	d, ok := t.defs[id]
	if !ok || d.KeyPrm == "" {
		return short
	}
	var m map[string]any
	if json.Unmarshal(raw, &m) != nil {
		return short
	}
	v, ok := m[d.KeyPrm]
	if !ok || v == nil {
		return short
	}
	return fmt.Sprintf("%s(%s)", short, ParamText(v))
}

// ParamText renders a parameter value for summaries and messages.
func ParamText(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case float64:
		if x == math.Trunc(x) {
			return fmt.Sprintf("%d", int64(x))
		}
		return fmt.Sprint(x)
	default:
		b, _ := json.Marshal(x)
		return string(b)
	}
}

// Accessors used by logical units on validated ops.

func (o *Op) Str(name string) string {
	s, _ := o.Params[name].(string)
	return s
}

func (o *Op) Int(name string) int {
	f, _ := o.Params[name].(float64)
	return int(f)
}

func (o *Op) Float(name string) float64 {
	f, _ := o.Params[name].(float64)
	return f
}

func (o *Op) Bool(name string) bool {
	b, _ := o.Params[name].(bool)
	return b
}

func (o *Op) Has(name string) bool { return o.Params[name] != nil }

func (o *Op) Dict(name string) map[string]any {
	m, _ := o.Params[name].(map[string]any)
	return m
}

func (o *Op) List(name string) []any {
	l, _ := o.Params[name].([]any)
	return l
}

func (o *Op) Strings(name string) []string {
	var out []string
	for _, e := range o.List(name) {
		if s, ok := e.(string); ok {
			out = append(out, s)
		}
	}
	return out
}
