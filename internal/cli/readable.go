package cli

import (
	"io"
	"maps"
	"slices"
	"strings"
)

// The readable listing (cluster info, node info, job info, results): one
// "key: value" per line, the keys of a dict sorted and indented two spaces
// under it, lists of plain values comma-joined, other lists as "- " items.
// null prints as "-", an empty list or dict as "(none)".

// writeReadable prints the dict m at the top level.
func (f *formatter) writeReadable(w io.Writer, m map[string]any) error {
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(m)) {
		f.readable(&b, "", k, m[k])
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// readable prints key and its value at indent.
func (f *formatter) readable(b *strings.Builder, indent, key string, v any) {
	switch x := v.(type) {
	case map[string]any:
		if len(x) == 0 {
			line(b, indent, key+": (none)")
			return
		}
		line(b, indent, key+":")
		for _, k := range slices.Sorted(maps.Keys(x)) {
			f.readable(b, indent+"  ", k, x[k])
		}
	case []any:
		if len(x) == 0 {
			line(b, indent, key+": (none)")
			return
		}
		if t, ok := parseTimestamp(x); ok && isTimeKey(key) {
			line(b, indent, key+": "+t.In(f.loc).Format(timeLayout))
			return
		}
		if allScalar(x) {
			line(b, indent, key+": "+f.joinScalars(x))
			return
		}
		line(b, indent, key+":")
		for _, e := range x {
			f.item(b, indent+"  ", e)
		}
	default:
		line(b, indent, key+": "+f.scalar(key, x))
	}
}

// item prints one element of a list as "- value", a dict's keys following
// the dash and aligned under its first key.
func (f *formatter) item(b *strings.Builder, indent string, v any) {
	switch x := v.(type) {
	case map[string]any:
		if len(x) == 0 {
			line(b, indent, "- (none)")
			return
		}
		var sub strings.Builder
		for _, k := range slices.Sorted(maps.Keys(x)) {
			f.readable(&sub, indent+"  ", k, x[k])
		}
		b.WriteString(indent + "- " + strings.TrimPrefix(sub.String(), indent+"  "))
	case []any:
		switch {
		case len(x) == 0:
			line(b, indent, "- (none)")
		case allScalar(x):
			line(b, indent, "- "+f.joinScalars(x))
		default:
			line(b, indent, "-")
			for _, e := range x {
				f.item(b, indent+"  ", e)
			}
		}
	default:
		line(b, indent, "- "+f.scalar("", x))
	}
}

func line(b *strings.Builder, indent, s string) {
	b.WriteString(indent)
	b.WriteString(s)
	b.WriteByte('\n')
}

// scalar renders a plain value; times are recognised by their key.
func (f *formatter) scalar(key string, v any) string {
	switch x := v.(type) {
	case nil:
		return nullText
	case bool:
		if x {
			return "true"
		}
		return "false"
	case float64:
		if isTimeKey(key) {
			return f.time(x)
		}
		return formatNumber(x)
	}
	return f.cell(kindText, v)
}

func (f *formatter) joinScalars(l []any) string {
	parts := make([]string, len(l))
	for i, e := range l {
		parts[i] = f.scalar("", e)
	}
	return strings.Join(parts, ", ")
}

func allScalar(l []any) bool {
	for _, e := range l {
		switch e.(type) {
		case []any, map[string]any:
			return false
		}
	}
	return true
}

// isTimeKey tells the keys whose numbers are epoch times.
func isTimeKey(key string) bool {
	switch key {
	case "ctime", "mtime":
		return true
	}
	return strings.HasSuffix(key, "_ts") || strings.HasSuffix(key, "_timestamp")
}
