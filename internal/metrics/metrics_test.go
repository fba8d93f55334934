package metrics

import (
	"math"
	"strings"
	"sync"
	"testing"
)

func text(t *testing.T, r *Registry) string {
	t.Helper()
	var b strings.Builder
	if err := r.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

func TestExposition(t *testing.T) {
	tests := []struct {
		name  string
		setup func(r *Registry)
		want  string
	}{
		{
			name: "counter without labels starts at zero",
			setup: func(r *Registry) {
				r.Counter("c_total", "Things counted.")
			},
			want: "# HELP c_total Things counted.\n# TYPE c_total counter\nc_total 0\n",
		},
		{
			name: "counter with labels, sorted series",
			setup: func(r *Registry) {
				c := r.Counter("req_total", "Requests.", "route", "code")
				c.With("/b", "200").Inc()
				c.With("/a", "404").Add(2.5)
				c.With("/a", "404").Add(-7) // ignored
				c.With("/a", "200").Inc()
			},
			want: "# HELP req_total Requests.\n# TYPE req_total counter\n" +
				"req_total{route=\"/a\",code=\"200\"} 1\n" +
				"req_total{route=\"/a\",code=\"404\"} 2.5\n" +
				"req_total{route=\"/b\",code=\"200\"} 1\n",
		},
		{
			name: "vector without series is left out",
			setup: func(r *Registry) {
				r.Counter("unused_total", "Nothing yet.", "x")
				r.Gauge("g", "A gauge.").With().Set(-3)
			},
			want: "# HELP g A gauge.\n# TYPE g gauge\ng -3\n",
		},
		{
			name: "gauge up and down, special values",
			setup: func(r *Registry) {
				g := r.Gauge("g", "Gauge.", "k")
				g.With("a").Inc()
				g.With("a").Inc()
				g.With("a").Dec()
				g.With("b").Set(math.Inf(1))
				g.With("c").Set(math.NaN())
				g.With("d").Set(1e-7)
			},
			want: "# HELP g Gauge.\n# TYPE g gauge\n" +
				"g{k=\"a\"} 1\ng{k=\"b\"} +Inf\ng{k=\"c\"} NaN\ng{k=\"d\"} 1e-07\n",
		},
		{
			name: "histogram buckets cumulative, le last",
			setup: func(r *Registry) {
				h := r.Histogram("lat_seconds", "Latency.", []float64{0.1, 1, math.Inf(1)}, "op")
				for _, v := range []float64{0.05, 0.1, 0.5, 3, math.NaN()} {
					h.With("x").Observe(v)
				}
			},
			want: "# HELP lat_seconds Latency.\n# TYPE lat_seconds histogram\n" +
				"lat_seconds_bucket{op=\"x\",le=\"0.1\"} 2\n" +
				"lat_seconds_bucket{op=\"x\",le=\"1\"} 3\n" +
				"lat_seconds_bucket{op=\"x\",le=\"+Inf\"} 5\n" +
				"lat_seconds_sum{op=\"x\"} NaN\n" +
				"lat_seconds_count{op=\"x\"} 5\n",
		},
		{
			name: "histogram without labels",
			setup: func(r *Registry) {
				h := r.Histogram("h", "H.", []float64{1})
				h.With().Observe(2)
				h.With().Observe(0.5)
			},
			want: "# HELP h H.\n# TYPE h histogram\n" +
				"h_bucket{le=\"1\"} 1\nh_bucket{le=\"+Inf\"} 2\nh_sum 2.5\nh_count 2\n",
		},
		{
			name: "gauge func, families sorted by name",
			setup: func(r *Registry) {
				r.GaugeFunc("z_jobs", "Jobs.", []string{"status"}, func(emit func(float64, ...string)) {
					emit(3, "success")
					emit(1, "error")
					emit(9, "too", "many") // wrong arity: dropped
				})
				r.Counter("a_total", "A.")
			},
			want: "# HELP a_total A.\n# TYPE a_total counter\na_total 0\n" +
				"# HELP z_jobs Jobs.\n# TYPE z_jobs gauge\nz_jobs{status=\"error\"} 1\nz_jobs{status=\"success\"} 3\n",
		},
		{
			name: "escaping of help and label values",
			setup: func(r *Registry) {
				r.Counter("e_total", "Back\\slash and\nnewline \"quoted\".", "v").
					With("a\"b\\c\nd\xffe").Inc()
			},
			want: "# HELP e_total Back\\\\slash and\\nnewline \"quoted\".\n# TYPE e_total counter\n" +
				"e_total{v=\"a\\\"b\\\\c\\nd\uFFFDe\"} 1\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := NewRegistry()
			tt.setup(r)
			got := text(t, r)
			if got != tt.want {
				t.Fatalf("got:\n%s\nwant:\n%s", got, tt.want)
			}
			if _, err := ParseText(got); err != nil {
				t.Fatalf("own output does not parse: %v", err)
			}
		})
	}
}

func TestRegistrationPanics(t *testing.T) {
	tests := []struct {
		name string
		f    func(r *Registry)
	}{
		{"bad metric name", func(r *Registry) { r.Counter("1abc", "") }},
		{"bad metric name chars", func(r *Registry) { r.Counter("a-b", "") }},
		{"bad label name", func(r *Registry) { r.Counter("a", "", "x:y") }},
		{"reserved label name", func(r *Registry) { r.Counter("a", "", "__x") }},
		{"le on histogram", func(r *Registry) { r.Histogram("a", "", nil, "le") }},
		{"repeated label", func(r *Registry) { r.Gauge("a", "", "x", "x") }},
		{"duplicate name", func(r *Registry) { r.Counter("a", ""); r.Gauge("a", "") }},
		{"buckets not increasing", func(r *Registry) { r.Histogram("a", "", []float64{1, 1}) }},
		{"wrong label count", func(r *Registry) { r.Counter("a", "", "x").With() }},
		{"bad exponential buckets", func(*Registry) { ExponentialBuckets(1, 1, 3) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Fatal("no panic")
				}
			}()
			tt.f(NewRegistry())
		})
	}
}

func TestExponentialBuckets(t *testing.T) {
	got := ExponentialBuckets(0.001, 10, 4)
	want := []float64{0.001, 0.01, 0.1, 1}
	for i := range want {
		if math.Abs(got[i]-want[i]) > 1e-12 {
			t.Fatalf("got %v, want %v", got, want)
		}
	}
}

// TestConcurrentUpdates checks that concurrent updates are neither lost nor
// racy, with writes of the registry going on meanwhile.
func TestConcurrentUpdates(t *testing.T) {
	r := NewRegistry()
	c := r.Counter("c_total", "", "k")
	g := r.Gauge("g", "")
	h := r.Histogram("h", "", []float64{1, 2}, "k")
	const workers, each = 8, 500
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			k := []string{"a", "b"}[w%2]
			for i := range each {
				c.With(k).Inc()
				g.With().Inc()
				h.With(k).Observe(float64(i % 3))
			}
		}()
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range 20 {
			var b strings.Builder
			if err := r.WriteText(&b); err != nil {
				t.Error(err)
				return
			}
			if _, err := ParseText(b.String()); err != nil {
				t.Errorf("mid-update output does not parse: %v", err)
				return
			}
		}
	}()
	wg.Wait()
	<-done
	if got := c.With("a").Value() + c.With("b").Value(); got != workers*each {
		t.Fatalf("counter = %v, want %d", got, workers*each)
	}
	if got := g.With().Value(); got != workers*each {
		t.Fatalf("gauge = %v, want %d", got, workers*each)
	}
	fams, err := ParseText(text(t, r))
	if err != nil {
		t.Fatal(err)
	}
	total := 0.0
	for _, k := range []string{"a", "b"} {
		n, ok := fams.Value("h_count", "k", k)
		inf, ok2 := fams.Value("h_bucket", "k", k, "le", "+Inf")
		if !ok || !ok2 || n != inf {
			t.Fatalf("h_count{k=%s} = %v (%v), +Inf bucket %v (%v)", k, n, ok, inf, ok2)
		}
		total += n
	}
	if total != workers*each {
		t.Fatalf("histogram count = %v, want %d", total, workers*each)
	}
	// Each worker observes 0, 1, 2 in turn: the sum is known exactly.
	wantSum := 0.0
	for i := range each {
		wantSum += float64(i % 3)
	}
	sa, _ := fams.Value("h_sum", "k", "a")
	sb, _ := fams.Value("h_sum", "k", "b")
	if sa+sb != wantSum*workers {
		t.Fatalf("histogram sum = %v, want %v", sa+sb, wantSum*workers)
	}
}

func BenchmarkHistogramObserveParallel(b *testing.B) {
	h := NewRegistry().Histogram("h_seconds", "", nil, "op").With("OP_TEST")
	b.RunParallel(func(pb *testing.PB) {
		v := 0.0
		for pb.Next() {
			h.Observe(v)
			v += 0.001
		}
	})
}

func BenchmarkHistogramWithObserveParallel(b *testing.B) {
	v := NewRegistry().Histogram("h_seconds", "", nil, "route", "method")
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			v.With("/2/instances/{name}", "GET").Observe(0.02)
		}
	})
}

func BenchmarkCounterIncParallel(b *testing.B) {
	c := NewRegistry().Counter("c_total", "", "code").With("200")
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			c.Inc()
		}
	})
}

func BenchmarkWriteText(b *testing.B) {
	r := NewRegistry()
	h := r.Histogram("h_seconds", "", nil, "route", "method")
	for i := range 50 {
		h.With(strings.Repeat("x", i), "GET").Observe(0.1)
	}
	var sb strings.Builder
	for b.Loop() {
		sb.Reset()
		_ = r.WriteText(&sb)
	}
}
