package metrics

import (
	"math"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestParseText(t *testing.T) {
	in := "# HELP a_total A \\\\ help\\nline.\n" +
		"# TYPE a_total counter\n" +
		"a_total{x=\"1\",y=\"q\\\"uote\\\\d\\n\"} 3 1700000000000\n" +
		"a_total{x=\"2\" , } 4\n" +
		"# just a comment\n" +
		"\n" +
		"# TYPE h histogram\n" +
		"h_bucket{le=\"1\"} 1\n" +
		"h_bucket{le=\"+Inf\"} 2\n" +
		"h_sum 2.5\n" +
		"h_count 2\n" +
		"loose -Inf\n" +
		"nan NaN\n"
	fams, err := ParseText(in)
	if err != nil {
		t.Fatal(err)
	}
	if len(fams) != 4 {
		t.Fatalf("families = %d, want 4: %+v", len(fams), fams)
	}
	a := fams.Get("a_total")
	if a == nil || a.Type != "counter" || a.Help != "A \\ help\nline." || len(a.Samples) != 2 {
		t.Fatalf("a_total = %+v", a)
	}
	if got := a.Samples[0].Labels["y"]; got != "q\"uote\\d\n" {
		t.Fatalf("label y = %q", got)
	}
	if v, ok := fams.Value("a_total", "x", "2"); !ok || v != 4 {
		t.Fatalf("a_total{x=2} = %v, %v", v, ok)
	}
	if h := fams.Get("h"); h == nil || h.Type != "histogram" || len(h.Samples) != 4 {
		t.Fatalf("h = %+v", h)
	}
	if v, ok := fams.Value("loose"); !ok || !math.IsInf(v, -1) || fams.Get("loose").Type != "untyped" {
		t.Fatalf("loose = %v, %v", v, ok)
	}
	if _, ok := fams.Value("a_total", "x"); ok {
		t.Fatal("odd label list matched")
	}
	if _, ok := fams.Value("absent"); ok {
		t.Fatal("absent sample found")
	}
}

func TestParseTextErrors(t *testing.T) {
	tests := []struct{ name, in string }{
		{"bad name", "1a 1\n"},
		{"no value", "a\n"},
		{"bad value", "a one\n"},
		{"bad timestamp", "a 1 x\n"},
		{"too many fields", "a 1 2 3\n"},
		{"unquoted label", "a{x=1} 1\n"},
		{"unterminated label", "a{x=\"1} 1\n"},
		{"bad escape", "a{x=\"\\t\"} 1\n"},
		{"label twice", "a{x=\"1\",x=\"2\"} 1\n"},
		{"bad label name", "a{x-y=\"1\"} 1\n"},
		{"missing comma", "a{x=\"1\" y=\"2\"} 1\n"},
		{"no space before value", "a{x=\"1\"}1\n"},
		{"series twice", "a{x=\"1\"} 1\na{x=\"1\"} 2\n"},
		{"type twice", "# TYPE a counter\n# TYPE a counter\n"},
		{"type after samples", "a 1\n# TYPE a counter\n"},
		{"unknown type", "# TYPE a thing\n"},
		{"bad help name", "# HELP 1a x\n"},
		{"label without value", "a{x} 1\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if fams, err := ParseText(tt.in); err == nil {
				t.Fatalf("parsed: %+v", fams)
			}
		})
	}
}

// FuzzLabelValue checks that any label value and help text survive the
// writer's escaping and come back from the parser unchanged (up to the
// replacement of invalid UTF-8).
func FuzzLabelValue(f *testing.F) {
	for _, s := range []string{"", "plain", `back\slash`, `"quoted"`, "new\nline", "\\n", `\"`, "\xff\xfe", "é ünïcode", "{},=", "trailing\\"} {
		f.Add(s, s)
	}
	f.Fuzz(func(t *testing.T, value, help string) {
		r := NewRegistry()
		r.Counter("f_total", help, "v").With(value).Inc()
		var b strings.Builder
		if err := r.WriteText(&b); err != nil {
			t.Fatal(err)
		}
		fams, err := ParseText(b.String())
		if err != nil {
			t.Fatalf("output %q does not parse: %v", b.String(), err)
		}
		fam := fams.Get("f_total")
		if fam == nil || len(fam.Samples) != 1 {
			t.Fatalf("families %+v", fams)
		}
		if got, want := fam.Samples[0].Labels["v"], strings.ToValidUTF8(value, "\uFFFD"); got != want {
			t.Fatalf("label value %q came back as %q", want, got)
		}
		// A line's trailing carriage return is taken as part of its end.
		wantHelp := strings.TrimRight(strings.ToValidUTF8(help, "\uFFFD"), "\r")
		if fam.Help != wantHelp {
			t.Fatalf("help %q came back as %q", wantHelp, fam.Help)
		}
	})
}

// FuzzParseText checks that the parser never panics, and that what it
// accepts is consistent: names valid, labels valid UTF-8 when the input is.
func FuzzParseText(f *testing.F) {
	for _, s := range []string{
		"", "a 1\n", "# TYPE a counter\na{x=\"1\"} 2\n", "# HELP a h\\\\x\n",
		"# TYPE h histogram\nh_bucket{le=\"+Inf\"} 1\nh_sum 1\nh_count 1\n",
		"a{x=\"\\\"\"} NaN 12\n", "a{", "a{x=\"", "a{x=\"\\", "# TYPE", "a{} 1\r\n",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		fams, err := ParseText(in)
		if err != nil {
			return
		}
		for _, fam := range fams {
			if !validMetricName(fam.Name) {
				t.Fatalf("accepted family name %q", fam.Name)
			}
			for _, s := range fam.Samples {
				if !validMetricName(s.Name) {
					t.Fatalf("accepted sample name %q", s.Name)
				}
				for k, v := range s.Labels {
					if !validLabelName(k) || (utf8.ValidString(in) && !utf8.ValidString(v)) {
						t.Fatalf("accepted label %q=%q", k, v)
					}
				}
			}
		}
	})
}
