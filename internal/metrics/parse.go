package metrics

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// Sample is one parsed sample line.
type Sample struct {
	Name   string
	Labels map[string]string
	Value  float64
}

// Family is a parsed metric family: the samples following its TYPE line
// (for a histogram, its _bucket, _sum and _count samples too).
type Family struct {
	Name    string
	Help    string
	Type    string // counter, gauge, histogram, summary or untyped
	Samples []Sample
}

// Families is a parsed exposition.
type Families []*Family

// ParseText parses the text exposition format strictly enough to check what
// Corral's daemons write, and what scrapers would reject: a malformed line,
// a TYPE line after its family's samples, a family or a series given twice.
// Timestamps are accepted and dropped.
func ParseText(data string) (Families, error) {
	var fams Families
	byName := map[string]*Family{}
	seen := map[string]bool{} // series already given: name + labels
	var cur *Family
	family := func(name string) *Family {
		if f := byName[name]; f != nil {
			return f
		}
		f := &Family{Name: name, Type: "untyped"}
		byName[name] = f
		fams = append(fams, f)
		return f
	}
	for n, line := range strings.Split(data, "\n") {
		n++
		line = strings.TrimRight(line, "\r")
		if strings.TrimSpace(line) == "" {
			continue
		}
		if strings.HasPrefix(line, "#") {
			fields := strings.Fields(line[1:])
			if len(fields) < 2 || (fields[0] != "HELP" && fields[0] != "TYPE") {
				continue // a comment
			}
			name := fields[1]
			if !validMetricName(name) {
				return nil, fmt.Errorf("line %d: invalid metric name %q", n, name)
			}
			f := family(name)
			if len(f.Samples) > 0 {
				return nil, fmt.Errorf("line %d: %s for %s after its samples", n, fields[0], name)
			}
			if fields[0] == "HELP" {
				_, rest, _ := strings.Cut(strings.TrimLeft(line[1:], " \t"), "HELP")
				text := strings.TrimPrefix(strings.TrimLeft(rest, " \t"), name)
				h, err := unescape(strings.TrimPrefix(text, " "), false)
				if err != nil {
					return nil, fmt.Errorf("line %d: help of %s: %w", n, name, err)
				}
				f.Help = h
				cur = f
				continue
			}
			if len(fields) != 3 {
				return nil, fmt.Errorf("line %d: malformed TYPE line", n)
			}
			switch fields[2] {
			case "counter", "gauge", "histogram", "summary", "untyped":
			default:
				return nil, fmt.Errorf("line %d: unknown type %q", n, fields[2])
			}
			if f.Type != "untyped" {
				return nil, fmt.Errorf("line %d: second TYPE line for %s", n, name)
			}
			f.Type = fields[2]
			cur = f
			continue
		}
		s, err := parseSample(line)
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", n, err)
		}
		key := seriesKey(s)
		if seen[key] {
			return nil, fmt.Errorf("line %d: series %s given twice", n, key)
		}
		seen[key] = true
		f := cur
		if f == nil || !belongs(f, s.Name) {
			f = family(s.Name)
			cur = f
		}
		f.Samples = append(f.Samples, s)
	}
	return fams, nil
}

// belongs reports whether a sample named name is part of family f.
func belongs(f *Family, name string) bool {
	if name == f.Name {
		return true
	}
	if f.Type != "histogram" && f.Type != "summary" {
		return false
	}
	suffix, ok := strings.CutPrefix(name, f.Name)
	return ok && (suffix == "_sum" || suffix == "_count" || (suffix == "_bucket" && f.Type == "histogram"))
}

func seriesKey(s Sample) string {
	keys := make([]string, 0, len(s.Labels))
	for k := range s.Labels {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	b.WriteString(s.Name)
	b.WriteByte('{')
	for i, k := range keys {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(k)
		b.WriteString(`="`)
		b.WriteString(EscapeLabelValue(s.Labels[k]))
		b.WriteByte('"')
	}
	b.WriteByte('}')
	return b.String()
}

func parseSample(line string) (Sample, error) {
	s := Sample{Labels: map[string]string{}}
	i := 0
	for i < len(line) && line[i] != '{' && line[i] != ' ' && line[i] != '\t' {
		i++
	}
	s.Name = line[:i]
	if !validMetricName(s.Name) {
		return s, fmt.Errorf("invalid metric name %q", s.Name)
	}
	rest := line[i:]
	if strings.HasPrefix(rest, "{") {
		var err error
		if rest, err = parseLabels(rest[1:], s.Labels); err != nil {
			return s, err
		}
	}
	fields := strings.Fields(rest)
	if len(fields) < 1 || len(fields) > 2 || (rest != "" && rest[0] != ' ' && rest[0] != '\t') {
		return s, fmt.Errorf("malformed sample %q", line)
	}
	v, err := strconv.ParseFloat(fields[0], 64)
	if err != nil {
		return s, fmt.Errorf("value of %s: %w", s.Name, err)
	}
	s.Value = v
	if len(fields) == 2 {
		if _, err := strconv.ParseInt(fields[1], 10, 64); err != nil {
			return s, fmt.Errorf("timestamp of %s: %w", s.Name, err)
		}
	}
	return s, nil
}

// parseLabels reads name="value" pairs up to the closing brace (after the
// opening one) into into, and returns what follows the brace.
func parseLabels(s string, into map[string]string) (string, error) {
	for {
		s = strings.TrimLeft(s, " \t")
		if strings.HasPrefix(s, "}") {
			return s[1:], nil
		}
		eq := strings.IndexByte(s, '=')
		if eq < 0 {
			return "", fmt.Errorf("label without a value")
		}
		name := strings.TrimSpace(s[:eq])
		if !validLabelName(name) {
			return "", fmt.Errorf("invalid label name %q", name)
		}
		if _, dup := into[name]; dup {
			return "", fmt.Errorf("label %s given twice", name)
		}
		s = strings.TrimLeft(s[eq+1:], " \t")
		if !strings.HasPrefix(s, `"`) {
			return "", fmt.Errorf("value of label %s is not quoted", name)
		}
		end := closingQuote(s[1:])
		if end < 0 {
			return "", fmt.Errorf("unterminated value of label %s", name)
		}
		v, err := unescape(s[1:1+end], true)
		if err != nil {
			return "", fmt.Errorf("label %s: %w", name, err)
		}
		into[name] = v
		s = strings.TrimLeft(s[end+2:], " \t")
		switch {
		case strings.HasPrefix(s, ","):
			s = s[1:]
		case strings.HasPrefix(s, "}"):
		default:
			return "", fmt.Errorf("expected , or } after label %s", name)
		}
	}
}

// closingQuote returns the index of the first unescaped double quote.
func closingQuote(s string) int {
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++
		case '"':
			return i
		}
	}
	return -1
}

// unescape undoes the format's escapes: \\ and \n, and \" in label values.
func unescape(s string, quote bool) (string, error) {
	if !strings.Contains(s, `\`) {
		return s, nil
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '\\' {
			b.WriteByte(c)
			continue
		}
		i++
		if i == len(s) {
			return "", fmt.Errorf("trailing backslash")
		}
		switch s[i] {
		case '\\':
			b.WriteByte('\\')
		case 'n':
			b.WriteByte('\n')
		case '"':
			if !quote {
				// HELP text keeps \" as written.
				b.WriteString(`\"`)
				continue
			}
			b.WriteByte('"')
		default:
			if !quote {
				b.WriteByte('\\')
				b.WriteByte(s[i])
				continue
			}
			return "", fmt.Errorf("unknown escape \\%c", s[i])
		}
	}
	return b.String(), nil
}

// Get returns the family named name, or nil.
func (fs Families) Get(name string) *Family {
	for _, f := range fs {
		if f.Name == name {
			return f
		}
	}
	return nil
}

// Value returns the value of the sample named name whose labels include
// the given name/value pairs (labels is name1, value1, name2, value2, ...);
// ok is false when there is none. When several match, the first is taken.
func (fs Families) Value(name string, labels ...string) (v float64, ok bool) {
	for _, f := range fs {
		for _, s := range f.Samples {
			if s.Name == name && hasLabels(s.Labels, labels) {
				return s.Value, true
			}
		}
	}
	return 0, false
}

func hasLabels(have map[string]string, want []string) bool {
	for i := 0; i+1 < len(want); i += 2 {
		if v, ok := have[want[i]]; !ok || v != want[i+1] {
			return false
		}
	}
	return len(want)%2 == 0
}
