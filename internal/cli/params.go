package cli

import (
	"math"
	"strconv"
	"strings"

	"github.com/corral/corral/internal/ecode"
	"github.com/corral/corral/internal/kvopts"
)

// The opcode parameters built from "key=val,..." flags. Every such flag goes
// through kvopts; this file adds what the CLI knows about the values, as
// Ganeti's tools do before submitting (sizes in backend parameters, disk and
// NIC indices).

// resetValue is what a "-key" element sends: Ganeti's VALUE_DEFAULT, which
// removes the custom setting so the default applies again.
const resetValue = "default"

// flagErr prefixes an option parser error with the flag it came from,
// keeping its kind and class.
func flagErr(flag string, err error) error {
	if e, ok := ecode.As(err); ok {
		return &ecode.Error{Kind: e.Kind, Class: e.Class, Msg: flag + ": " + e.Msg, Err: err}
	}
	return paramErr("%s: %v", flag, err)
}

// parseParams parses "key=val,..." into string values; with allowReset,
// "-key" gives resetValue.
func parseParams(flag, s string, allowReset bool) (map[string]any, error) {
	vals, err := kvopts.ParseValues(s)
	if err != nil {
		return nil, flagErr(flag, err)
	}
	out := make(map[string]any, len(vals))
	for k, v := range vals {
		switch {
		case v.Reset && !allowReset:
			return nil, paramErr("%s: %q cannot be reset to its default here", flag, k)
		case v.Reset:
			out[k] = resetValue
		default:
			out[k] = v.Str
		}
	}
	return out, nil
}

// beKind is the type of a backend parameter, as Ganeti's
// BES_PARAMETER_TYPES.
func beKind(key string) string {
	switch key {
	case "memory", "maxmem", "minmem":
		return "size"
	case "vcpus", "spindle_use":
		return "int"
	case "auto_balance", "always_failover":
		return "bool"
	}
	return ""
}

// parseBEParams parses -B: sizes accept units ("memory=1G" is 1024),
// numbers and booleans are converted; unknown keys go to the server as
// text, which rejects them.
func parseBEParams(flag, s string, allowReset bool) (map[string]any, error) {
	m, err := parseParams(flag, s, allowReset)
	if err != nil {
		return nil, err
	}
	for k, v := range m {
		str := v.(string)
		if str == resetValue {
			continue
		}
		switch beKind(k) {
		case "size":
			n, err := kvopts.ParseUnitMiB(str)
			if err != nil {
				return nil, flagErr(flag+" "+k, err)
			}
			m[k] = n
		case "int":
			n, err := strconv.ParseInt(str, 10, 64)
			if err != nil || n < 0 {
				return nil, paramErr("%s: %s must be a non-negative integer", flag, k)
			}
			m[k] = n
		case "bool":
			b, err := parseBool(str)
			if err != nil {
				return nil, paramErr("%s: %s must be a boolean", flag, k)
			}
			m[k] = b
		}
	}
	return m, nil
}

// parseBool accepts the spellings kvopts and Ganeti use.
func parseBool(s string) (bool, error) {
	switch strings.ToLower(s) {
	case "true", "yes", "y", "1", "on":
		return true, nil
	case "false", "no", "n", "0", "off":
		return false, nil
	}
	return false, paramErr("invalid boolean %q", s)
}

// parseYesNo reads the yes|no value of flags like --offline.
func parseYesNo(flag, s string) (bool, error) {
	switch strings.ToLower(s) {
	case "yes", "y", "true":
		return true, nil
	case "no", "n", "false":
		return false, nil
	}
	return false, paramErr("--%s: expected yes or no, got %q", flag, s)
}

// parseGroups parses repeated "ident:key=val,..." options (cluster -H and
// -O) into {ident: {key: val}}. An identifier may appear once; with
// allowReset, "-key" gives resetValue.
func parseGroups(flag string, specs []string, allowReset bool) (map[string]any, error) {
	out := map[string]any{}
	for _, s := range specs {
		g, err := kvopts.ParseGroup(s)
		if err != nil {
			return nil, flagErr(flag, err)
		}
		if g.Remove || g.Reset {
			return nil, paramErr("%s: parameter group %q cannot be removed or reset here", flag, g.Ident)
		}
		if _, dup := out[g.Ident]; dup {
			return nil, paramErr("%s: %q given more than once", flag, g.Ident)
		}
		m := make(map[string]any, len(g.Values))
		for k, v := range g.Values {
			switch {
			case v.Reset && !allowReset:
				return nil, paramErr("%s: %s: %q cannot be reset to its default here", flag, g.Ident, k)
			case v.Reset:
				m[k] = resetValue
			default:
				m[k] = v.Str
			}
		}
		out[g.Ident] = m
	}
	return out, nil
}

// maxIndexed bounds disk and NIC indices; far above what the server allows,
// it keeps a typo like "1000000:size=1G" from allocating a huge list.
const maxIndexed = 64

// parseIndexed parses repeated "N:key=val,..." options (--disk, --net) into
// a list ordered by N. Indices start at 0 and may not repeat or leave gaps.
func parseIndexed(flag, what string, specs []string) ([]map[string]string, error) {
	byIdx := map[int]map[string]string{}
	for _, s := range specs {
		ident, kv, err := kvopts.ParseIdentKV(s)
		if err != nil {
			return nil, flagErr(flag, err)
		}
		idx, err := strconv.Atoi(ident)
		if err != nil || idx < 0 || idx >= maxIndexed {
			return nil, paramErr("%s: invalid %s index %q (expected 0 to %d)", flag, what, ident, maxIndexed-1)
		}
		if _, dup := byIdx[idx]; dup {
			return nil, paramErr("%s: %s %d given more than once", flag, what, idx)
		}
		byIdx[idx] = kv
	}
	out := make([]map[string]string, len(byIdx))
	for i := range out {
		kv, ok := byIdx[i]
		if !ok {
			return nil, paramErr("%s: %s %d is missing (indices start at 0, without gaps)", flag, what, i)
		}
		out[i] = kv
	}
	return out, nil
}

// parseDisks builds OP_INSTANCE_CREATE's disks from --disk options or the
// -s shortcut: [{"size": MiB, "mode": ...}, ...].
func parseDisks(specs []string, size string) ([]any, error) {
	if size != "" && len(specs) > 0 {
		return nil, paramErr("-s and --disk cannot be combined")
	}
	if size != "" {
		specs = []string{"0:size=" + escapeKV(size)}
	}
	disks, err := parseIndexed("--disk", "disk", specs)
	if err != nil {
		return nil, err
	}
	out := make([]any, len(disks))
	for i, kv := range disks {
		d := map[string]any{}
		for k, v := range kv {
			d[k] = v
		}
		sz, ok := kv["size"]
		if !ok {
			return nil, paramErr("--disk: disk %d has no size", i)
		}
		n, err := kvopts.ParseUnitMiB(sz)
		if err != nil {
			return nil, flagErr("--disk "+strconv.Itoa(i), err)
		}
		d["size"] = n
		if m, ok := kv["mode"]; ok && m != "rw" && m != "ro" {
			return nil, paramErr("--disk: disk %d: invalid mode %q (rw or ro)", i, m)
		}
		out[i] = d
	}
	return out, nil
}

// escapeKV protects commas and backslashes in a value spliced into kvopts
// syntax.
func escapeKV(s string) string {
	return strings.NewReplacer(`\`, `\\`, `,`, `\,`).Replace(s)
}

// parseNICs builds OP_INSTANCE_CREATE's nics from --net options: one NIC
// with the cluster's defaults ({}) when none is given, none with --no-nics.
func parseNICs(specs []string, none bool) ([]any, error) {
	if none && len(specs) > 0 {
		return nil, paramErr("--no-nics and --net cannot be combined")
	}
	if none {
		return []any{}, nil
	}
	if len(specs) == 0 {
		return []any{map[string]any{}}, nil
	}
	nics, err := parseIndexed("--net", "NIC", specs)
	if err != nil {
		return nil, err
	}
	out := make([]any, len(nics))
	for i, kv := range nics {
		n := map[string]any{}
		for k, v := range kv {
			n[k] = v
		}
		if m, ok := kv["mode"]; ok && m != "bridged" && m != "routed" {
			return nil, paramErr("--net: NIC %d: invalid mode %q (bridged or routed)", i, m)
		}
		out[i] = n
	}
	return out, nil
}

// parseListMods parses "add:NAME,remove:NAME" into Ganeti's
// [["add", NAME], ["remove", NAME]].
func parseListMods(flag, s string) ([]any, error) {
	mods, err := kvopts.ParseListMods(s)
	if err != nil {
		return nil, flagErr(flag, err)
	}
	out := make([]any, len(mods))
	for i, m := range mods {
		out[i] = []any{m.Action, m.Name}
	}
	return out, nil
}

// parseNameList parses "a,b,c".
func parseNameList(flag, s string) ([]any, error) {
	names, err := kvopts.SplitList(s)
	if err != nil {
		return nil, flagErr(flag, err)
	}
	if len(names) == 0 {
		return nil, paramErr("%s: empty list", flag)
	}
	out := make([]any, len(names))
	for i, n := range names {
		out[i] = n
	}
	return out, nil
}

// parseTimespec reads a duration as Ganeti's ParseTimespec: a whole number
// of seconds, or with a suffix s, m, h, d or w.
func parseTimespec(s string) (int64, error) {
	if s == "" {
		return 0, paramErr("empty time specification")
	}
	mult := int64(1)
	num := s
	switch s[len(s)-1] {
	case 's':
		num = s[:len(s)-1]
	case 'm':
		mult, num = 60, s[:len(s)-1]
	case 'h':
		mult, num = 3600, s[:len(s)-1]
	case 'd':
		mult, num = 86400, s[:len(s)-1]
	case 'w':
		mult, num = 604800, s[:len(s)-1]
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n < 0 || num[0] == '+' {
		return 0, paramErr("invalid time specification %q (a number of seconds, or with a suffix s, m, h, d or w)", s)
	}
	if n > math.MaxInt64/mult {
		return 0, paramErr("time specification %q is too large", s)
	}
	return n * mult, nil
}
