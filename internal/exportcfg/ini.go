package exportcfg

import (
	"fmt"
	"slices"
	"strings"
)

// section is one [name] block of an INI file: its keys (lower-cased) and
// their values.
type section map[string]string

// parseINI reads the subset of Python's ConfigParser syntax that Ganeti's
// export files use: "[section]" headers, "key = value" or "key: value"
// lines, full-line comments starting with # or ;, and values continued on
// indented lines (joined with "\n"). Keys are lower-cased as ConfigParser's
// default optionxform does; values are trimmed; a key given twice keeps the
// last value and a section given twice is merged, as Python 2's parser that
// wrote these files did. There is no interpolation and no inline comment.
func parseINI(data []byte) (map[string]section, error) {
	secs := map[string]section{}
	var cur section
	key := "" // the key an indented line continues, "" when none
	for n, raw := range strings.Split(string(data), "\n") {
		lineNo := n + 1
		t := strings.TrimSpace(raw)
		switch {
		case t == "":
			key = ""
			continue
		case t[0] == '#' || t[0] == ';':
			continue
		case (raw[0] == ' ' || raw[0] == '\t') && key != "":
			cur[key] += "\n" + t
			continue
		case t[0] == '[':
			name, ok := strings.CutPrefix(t, "[")
			name, ok2 := strings.CutSuffix(name, "]")
			if !ok || !ok2 || name == "" || strings.ContainsAny(name, "[]") {
				return nil, fmt.Errorf("line %d: bad section header %q", lineNo, t)
			}
			if secs[name] == nil {
				secs[name] = section{}
			}
			cur, key = secs[name], ""
			continue
		}
		i := strings.IndexAny(t, "=:")
		if i < 0 {
			return nil, fmt.Errorf("line %d: expected \"key = value\", got %q", lineNo, t)
		}
		k := strings.ToLower(strings.TrimSpace(t[:i]))
		if k == "" {
			return nil, fmt.Errorf("line %d: empty key", lineNo)
		}
		if cur == nil {
			return nil, fmt.Errorf("line %d: key %q before any [section] header", lineNo, k)
		}
		cur[k] = strings.TrimSpace(t[i+1:])
		key = k
	}
	return secs, nil
}

// iniWriter builds an INI file in a fixed order, as ConfigParser writes
// it: a header, "key = value" lines, a blank line after each section.
type iniWriter struct{ b strings.Builder }

func (w *iniWriter) section(name string) {
	if w.b.Len() > 0 {
		w.b.WriteByte('\n')
	}
	fmt.Fprintf(&w.b, "[%s]\n", name)
}

// set writes one key. Multi-line values become continuation lines; blank
// lines after the first are dropped from them, since the reader would take
// a blank line as the end of the value.
func (w *iniWriter) set(key, value string) {
	var lines []string
	for i, l := range strings.Split(value, "\n") {
		if l = strings.TrimSpace(l); l != "" || i == 0 {
			lines = append(lines, l)
		}
	}
	w.b.WriteString(key + " = " + strings.Join(lines, "\n\t") + "\n")
}

// setMap writes a parameter dict sorted by key, leaving out keys that
// could not be read back as the same key.
func (w *iniWriter) setMap(m map[string]string) {
	keys := make([]string, 0, len(m))
	for k := range m {
		if writableKey(k) {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	for _, k := range keys {
		w.set(k, m[k])
	}
}

// writableKey reports whether k survives a write and read unchanged.
func writableKey(k string) bool {
	if k == "" || k != strings.TrimSpace(k) || k != strings.ToLower(k) || strings.ContainsAny(k, "=:\n") {
		return false
	}
	return k[0] != '[' && k[0] != '#' && k[0] != ';'
}
