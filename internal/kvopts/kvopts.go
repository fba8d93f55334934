// Package kvopts parses Ganeti's option syntax, shared by every CLI flag that
// takes parameters: "key=val,key=val" (-B memory=512,vcpus=2), with an
// optional group identifier in front ("0:size=10G,mode=rw",
// "kvm:kernel_path=/boot/vmlinuz"), and comma-separated lists
// ("add:debian,remove:centos").
//
// The rules are Ganeti's: elements are separated by commas, and a comma
// inside a key or value is written "\,"; a backslash escapes any character
// ("\\" for a backslash itself), and a lone backslash at the end stays as it
// is. An element "key=val" splits at its first "=", so values may contain
// "=". A bare "key" means true, "no_key" means false and "-key" resets the
// key to its default. Booleans are returned as the strings "true" and
// "false": the opcode layer converts values by each parameter's type.
//
// Errors are *ecode.Error of kind ParameterError (UnitParseError for sizes)
// and class wrong_input. They name keys and positions but never echo values,
// which may be secrets.
package kvopts

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/corral/corral/internal/ecode"
)

// Prefixes of bare elements and group identifiers.
const (
	noPrefix    = "no_" // "no_key": false; "no_ident": remove the group
	resetPrefix = "-"   // "-key": reset to the default; "-ident": reset the group
)

// Value is one parsed parameter. The zero Value means "not given", so a
// lookup of a missing key in a map[string]Value reads as neither set nor
// reset.
type Value struct {
	Set   bool   // given as key=val, bare key ("true") or no_key ("false")
	Reset bool   // given as -key: back to the default
	Str   string // the value when Set
}

// Group is an "ident:key=val,..." option.
type Group struct {
	Ident  string
	Remove bool // "no_ident": drop the whole group (no keys allowed)
	Reset  bool // "-ident": reset the whole group to its defaults (no keys allowed)
	Values map[string]Value
}

// ListMod is one element of an "add:NAME,remove:NAME" list.
type ListMod struct {
	Action string // "add" or "remove"
	Name   string
}

// List actions, as Ganeti's DDM_ADD and DDM_REMOVE.
const (
	ActionAdd    = "add"
	ActionRemove = "remove"
)

func paramErr(format string, args ...any) *ecode.Error {
	return ecode.New(ecode.ParameterError, ecode.Inval, fmt.Sprintf(format, args...))
}

// SplitList splits s at unescaped commas and removes the escapes. An empty s
// is an empty list; an empty element ("a,,b" or a trailing comma) is an
// error.
func SplitList(s string) ([]string, error) {
	elems := split(s)
	for i, e := range elems {
		if e == "" {
			return nil, paramErr("empty element %d in list", i+1)
		}
	}
	return elems, nil
}

// split is Ganeti's escape-aware comma split without validation.
func split(s string) []string {
	if s == "" {
		return []string{}
	}
	var out []string
	var cur strings.Builder
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '\\' && i+1 < len(s):
			i++
			cur.WriteByte(s[i])
		case c == ',':
			out = append(out, cur.String())
			cur.Reset()
		default:
			cur.WriteByte(c)
		}
	}
	return append(out, cur.String())
}

// ParseValues parses "key=val,key,no_key,-key,...". Keys must be non-empty
// and unique (no_x and -x count as key x).
func ParseValues(s string) (map[string]Value, error) {
	out := map[string]Value{}
	for i, elem := range split(s) {
		var key string
		var v Value
		if k, val, ok := strings.Cut(elem, "="); ok {
			key, v = k, Value{Set: true, Str: val}
		} else if k, ok := strings.CutPrefix(elem, noPrefix); ok {
			key, v = k, Value{Set: true, Str: "false"}
		} else if k, ok := strings.CutPrefix(elem, resetPrefix); ok {
			key, v = k, Value{Reset: true}
		} else {
			key, v = elem, Value{Set: true, Str: "true"}
		}
		if key == "" {
			if elem == "" {
				return nil, paramErr("empty element %d", i+1)
			}
			return nil, paramErr("empty key in element %d", i+1)
		}
		if _, dup := out[key]; dup {
			return nil, paramErr("duplicate key %q", key)
		}
		out[key] = v
	}
	return out, nil
}

// ParseKV parses "key=val,key,no_key,..." into strings, a bare key giving
// "true" and no_key "false". "-key" (reset) is rejected: use ParseValues
// where resetting is meaningful.
func ParseKV(s string) (map[string]string, error) {
	vals, err := ParseValues(s)
	if err != nil {
		return nil, err
	}
	return toStrings(vals)
}

func toStrings(vals map[string]Value) (map[string]string, error) {
	out := make(map[string]string, len(vals))
	for k, v := range vals {
		if v.Reset {
			return nil, paramErr("%q cannot be reset to its default here (\"-%s\")", k, k)
		}
		out[k] = v.Str
	}
	return out, nil
}

// ParseStrictKV parses "key=val,..." where every element must carry "=":
// for options whose values are never booleans.
func ParseStrictKV(s string) (map[string]string, error) {
	out := map[string]string{}
	for i, elem := range split(s) {
		key, val, ok := strings.Cut(elem, "=")
		switch {
		case elem == "":
			return nil, paramErr("empty element %d", i+1)
		case !ok:
			return nil, paramErr("missing '=' after key %q (expected key=value)", elem)
		case key == "":
			return nil, paramErr("empty key in element %d", i+1)
		}
		if _, dup := out[key]; dup {
			return nil, paramErr("duplicate key %q", key)
		}
		out[key] = val
	}
	return out, nil
}

// ParseGroup parses "ident:key=val,...", "ident" (a group with no keys),
// "no_ident" (remove the group) or "-ident" (reset it). "-" followed by a
// digit is an ordinary identifier, so negative indices like "-1:..." work.
// The identifier is taken as written, up to the first ":".
func ParseGroup(s string) (Group, error) {
	ident, rest, hasRest := strings.Cut(s, ":")
	if strings.Contains(ident, "=") {
		return Group{}, paramErr("missing identifier: expected ident:key=value,...")
	}
	var g Group
	switch {
	case strings.HasPrefix(ident, noPrefix):
		g = Group{Ident: ident[len(noPrefix):], Remove: true}
	case strings.HasPrefix(ident, resetPrefix) && (len(ident) == len(resetPrefix) || !isDigit(ident[len(resetPrefix)])):
		g = Group{Ident: ident[len(resetPrefix):], Reset: true}
	default:
		g = Group{Ident: ident}
	}
	if g.Ident == "" {
		return Group{}, paramErr("missing identifier: expected ident:key=value,...")
	}
	if g.Remove || g.Reset {
		if hasRest && rest != "" {
			return Group{}, paramErr("cannot pass options when removing or resetting parameter group %q", g.Ident)
		}
		return g, nil
	}
	vals, err := ParseValues(rest)
	if err != nil {
		e, _ := ecode.As(err)
		return Group{}, paramErr("%s: %s", g.Ident, e.Msg)
	}
	g.Values = vals
	return g, nil
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

// ParseIdentKV parses "ident:key=val,..." into the identifier and string
// values, as ParseKV does. Group removal and resets are rejected: use
// ParseGroup where they are meaningful.
func ParseIdentKV(s string) (ident string, kv map[string]string, err error) {
	g, err := ParseGroup(s)
	if err != nil {
		return "", nil, err
	}
	if g.Remove || g.Reset {
		return "", nil, paramErr("parameter group %q cannot be removed or reset here", g.Ident)
	}
	kv, err = toStrings(g.Values)
	if err != nil {
		e, _ := ecode.As(err)
		return "", nil, paramErr("%s: %s", g.Ident, e.Msg)
	}
	return g.Ident, kv, nil
}

// ParseListMods parses "add:NAME,remove:NAME,...".
func ParseListMods(s string) ([]ListMod, error) {
	elems, err := SplitList(s)
	if err != nil {
		return nil, err
	}
	out := make([]ListMod, 0, len(elems))
	for i, e := range elems {
		action, name, ok := strings.Cut(e, ":")
		if !ok {
			return nil, paramErr("element %d has no action: expected add:NAME or remove:NAME", i+1)
		}
		if action != ActionAdd && action != ActionRemove {
			return nil, paramErr("element %d: unknown action %q (expected add or remove)", i+1, action)
		}
		if name == "" {
			return nil, paramErr("element %d: empty name after %q", i+1, action+":")
		}
		out = append(out, ListMod{Action: action, Name: name})
	}
	return out, nil
}

// escape protects the characters split treats specially.
func escape(s string) string {
	if !strings.ContainsAny(s, `\,`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' || s[i] == ',' {
			b.WriteByte('\\')
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// FormatKV writes kv in the syntax ParseKV and ParseStrictKV read, keys
// sorted. Keys containing "=" cannot be written (no parser produces them).
func FormatKV(kv map[string]string) string {
	parts := make([]string, 0, len(kv))
	for _, k := range slices.Sorted(maps.Keys(kv)) {
		parts = append(parts, escape(k)+"="+escape(kv[k]))
	}
	return strings.Join(parts, ",")
}

// FormatValues writes vals in the syntax ParseValues reads, keys sorted.
// Values that are neither set nor reset are left out.
func FormatValues(vals map[string]Value) string {
	parts := make([]string, 0, len(vals))
	for _, k := range slices.Sorted(maps.Keys(vals)) {
		switch v := vals[k]; {
		case v.Reset:
			parts = append(parts, resetPrefix+escape(k))
		case v.Set:
			parts = append(parts, escape(k)+"="+escape(v.Str))
		}
	}
	return strings.Join(parts, ",")
}

// FormatIdentKV writes "ident:key=val,...".
func FormatIdentKV(ident string, kv map[string]string) string {
	if len(kv) == 0 {
		return ident
	}
	return ident + ":" + FormatKV(kv)
}

// FormatGroup writes g in the syntax ParseGroup reads.
func FormatGroup(g Group) string {
	switch {
	case g.Remove:
		return noPrefix + g.Ident
	case g.Reset:
		return resetPrefix + g.Ident
	}
	if len(g.Values) == 0 {
		return g.Ident
	}
	return g.Ident + ":" + FormatValues(g.Values)
}
