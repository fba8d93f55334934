package metrics

import (
	"bufio"
	"io"
	"math"
	"sort"
	"strconv"
	"strings"
)

// WriteText writes every metric in the text exposition format: families
// sorted by name, each with its HELP and TYPE lines, series sorted by
// label values. A vector with no series yet is left out.
func (r *Registry) WriteText(w io.Writer) error {
	r.mu.Lock()
	fams := make([]*family, 0, len(r.fams))
	for _, f := range r.fams {
		fams = append(fams, f)
	}
	r.mu.Unlock()
	sort.Slice(fams, func(i, j int) bool { return fams[i].name < fams[j].name })
	bw := bufio.NewWriter(w)
	for _, f := range fams {
		f.write(bw)
	}
	return bw.Flush()
}

// sample is one series' state, copied for writing.
type sample struct {
	values []string
	val    float64
	counts []uint64
	sum    float64
}

func (f *family) snapshot() []sample {
	var out []sample
	if f.collect != nil {
		f.collect(func(v float64, values ...string) {
			if len(values) == len(f.labels) {
				out = append(out, sample{values: append([]string(nil), values...), val: v})
			}
		})
	} else {
		f.mu.RLock()
		for _, s := range f.series {
			sm := sample{values: s.values, val: math.Float64frombits(s.val.Load()),
				sum: math.Float64frombits(s.sum.Load())}
			for i := range s.counts {
				sm.counts = append(sm.counts, s.counts[i].Load())
			}
			out = append(out, sm)
		}
		f.mu.RUnlock()
	}
	sort.SliceStable(out, func(i, j int) bool { return lessValues(out[i].values, out[j].values) })
	return out
}

// lessValues orders label-value tuples value by value, so that the output
// is stable from one scrape to the next.
func lessValues(a, b []string) bool {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return a[i] < b[i]
		}
	}
	return len(a) < len(b)
}

func (f *family) write(w *bufio.Writer) {
	samples := f.snapshot()
	if len(samples) == 0 {
		return
	}
	w.WriteString("# HELP ")
	w.WriteString(f.name)
	w.WriteByte(' ')
	w.WriteString(helpEscaper.Replace(strings.ToValidUTF8(f.help, "\uFFFD")))
	w.WriteString("\n# TYPE ")
	w.WriteString(f.name)
	w.WriteByte(' ')
	w.WriteString(string(f.kind))
	w.WriteByte('\n')
	for _, s := range samples {
		if f.kind != kindHistogram {
			writeSample(w, f.name, f.labels, s.values, "", "", s.val)
			continue
		}
		// Buckets are cumulative, and _count is the +Inf bucket, so the
		// three stay consistent even while observations land mid-write.
		var cum uint64
		for i, c := range s.counts {
			cum += c
			le := "+Inf"
			if i < len(f.buckets) {
				le = formatFloat(f.buckets[i])
			}
			writeSample(w, f.name+"_bucket", f.labels, s.values, "le", le, float64(cum))
		}
		writeSample(w, f.name+"_sum", f.labels, s.values, "", "", s.sum)
		writeSample(w, f.name+"_count", f.labels, s.values, "", "", float64(cum))
	}
}

func writeSample(w *bufio.Writer, name string, labels, values []string, extraName, extraValue string, v float64) {
	w.WriteString(name)
	if len(labels) > 0 || extraName != "" {
		w.WriteByte('{')
		for i, l := range labels {
			if i > 0 {
				w.WriteByte(',')
			}
			writeLabel(w, l, values[i])
		}
		if extraName != "" {
			if len(labels) > 0 {
				w.WriteByte(',')
			}
			writeLabel(w, extraName, extraValue)
		}
		w.WriteByte('}')
	}
	w.WriteByte(' ')
	w.WriteString(formatFloat(v))
	w.WriteByte('\n')
}

func writeLabel(w *bufio.Writer, name, value string) {
	w.WriteString(name)
	w.WriteString(`="`)
	w.WriteString(EscapeLabelValue(value))
	w.WriteByte('"')
}

var (
	labelEscaper = strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`)
	helpEscaper  = strings.NewReplacer(`\`, `\\`, "\n", `\n`)
)

// EscapeLabelValue renders a label value for use between double quotes in
// the text format: backslash, double quote and line feed are escaped, and
// invalid UTF-8 becomes U+FFFD (the format is UTF-8).
func EscapeLabelValue(v string) string {
	return labelEscaper.Replace(strings.ToValidUTF8(v, "\uFFFD"))
}

// formatFloat writes a value as the format expects: shortest round-trip
// decimal, +Inf, -Inf or NaN.
func formatFloat(v float64) string {
	switch {
	case math.IsInf(v, +1):
		return "+Inf"
	case math.IsInf(v, -1):
		return "-Inf"
	case math.IsNaN(v):
		return "NaN"
	}
	return strconv.FormatFloat(v, 'g', -1, 64)
}

func validMetricName(s string) bool {
	if s == "" {
		return false
	}
	for i, c := range s {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c == '_', c == ':':
		case c >= '0' && c <= '9' && i > 0:
		default:
			return false
		}
	}
	return true
}

func validLabelName(s string) bool {
	return validMetricName(s) && !strings.Contains(s, ":")
}
