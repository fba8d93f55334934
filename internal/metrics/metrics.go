// Package metrics keeps a daemon's counters, gauges and histograms and
// writes them in Prometheus' text exposition format (version 0.0.4), which
// is what every Corral daemon serves on /metrics. It is deliberately small:
// fixed histogram buckets, no summaries, no exemplars, no protobuf.
//
// Metrics are registered once, when a daemon starts; registering a bad name
// or the same name twice is a programming error and panics, as does asking
// a vector for the wrong number of label values. Updating a metric is safe
// for concurrent use and takes no lock once its series exists.
package metrics

import (
	"fmt"
	"math"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"
)

// ContentType is the Content-Type of the text exposition format.
const ContentType = "text/plain; version=0.0.4; charset=utf-8"

// DefBuckets suit latencies from a few milliseconds to tens of seconds, in
// seconds.
var DefBuckets = []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}

// ExponentialBuckets returns count upper bounds, the first start and each
// factor times the one before.
func ExponentialBuckets(start, factor float64, count int) []float64 {
	if start <= 0 || factor <= 1 || count < 1 {
		panic(fmt.Sprintf("metrics: bad exponential buckets (start %v, factor %v, count %d)", start, factor, count))
	}
	b := make([]float64, count)
	for i := range b {
		b[i] = start
		start *= factor
	}
	return b
}

type kind string

const (
	kindCounter   kind = "counter"
	kindGauge     kind = "gauge"
	kindHistogram kind = "histogram"
)

// Registry holds a daemon's metrics. The zero value is not usable; call
// NewRegistry.
type Registry struct {
	mu   sync.Mutex
	fams map[string]*family
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry { return &Registry{fams: map[string]*family{}} }

// family is one metric name with its series, one per label-value tuple.
type family struct {
	name    string
	help    string
	kind    kind
	labels  []string
	buckets []float64 // histograms only
	// collect, when set, produces the samples at write time instead of
	// series (a gauge computed from state the owner already keeps).
	collect func(emit func(value float64, labelValues ...string))

	mu     sync.RWMutex
	series map[string]*series // keyed by the label values joined with sep
}

// sep joins label values into a map key; it cannot occur in valid UTF-8, so
// distinct tuples never share a key.
const sep = "\xff"

// series is one label-value tuple's value. Floats are stored as their bits
// so that updates are lock-free.
type series struct {
	values  []string
	buckets []float64       // histogram: the family's upper bounds
	val     atomic.Uint64   // counter, gauge: math.Float64bits
	counts  []atomic.Uint64 // histogram: per bucket (not cumulative), last is +Inf
	sum     atomic.Uint64   // histogram: math.Float64bits of the sum
}

func (r *Registry) register(f *family) *family {
	if !validMetricName(f.name) {
		panic(fmt.Sprintf("metrics: invalid metric name %q", f.name))
	}
	seen := map[string]bool{}
	for _, l := range f.labels {
		if !validLabelName(l) || strings.HasPrefix(l, "__") || (f.kind == kindHistogram && l == "le") || seen[l] {
			panic(fmt.Sprintf("metrics: invalid or repeated label name %q on %s", l, f.name))
		}
		seen[l] = true
	}
	for i := 1; i < len(f.buckets); i++ {
		if !(f.buckets[i] > f.buckets[i-1]) {
			panic(fmt.Sprintf("metrics: buckets of %s are not increasing", f.name))
		}
	}
	if n := len(f.buckets); n > 0 && math.IsInf(f.buckets[n-1], +1) {
		// +Inf is always written; listing it too would write it twice.
		f.buckets = f.buckets[:n-1]
	}
	f.series = map[string]*series{}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, dup := r.fams[f.name]; dup {
		panic(fmt.Sprintf("metrics: %s registered twice", f.name))
	}
	r.fams[f.name] = f
	if len(f.labels) == 0 && f.collect == nil {
		// A metric without labels exists from the start, at zero.
		f.with(nil)
	}
	return f
}

// with returns the series for values, creating it on first use.
func (f *family) with(values []string) *series {
	if len(values) != len(f.labels) {
		panic(fmt.Sprintf("metrics: %s takes %d label values, got %d", f.name, len(f.labels), len(values)))
	}
	for i, v := range values {
		if !utf8.ValidString(v) {
			// The key's separator is an invalid byte: keep it unique. The
			// format is UTF-8 anyway.
			values = append([]string(nil), values...)
			values[i] = strings.ToValidUTF8(v, "\uFFFD")
		}
	}
	// The key is built on the stack for the lookup (a map index by
	// string(bytes) does not allocate); only a new series keeps a copy.
	var buf [128]byte
	kb := buf[:0]
	for i, v := range values {
		if i > 0 {
			kb = append(kb, sep...)
		}
		kb = append(kb, v...)
	}
	f.mu.RLock()
	s := f.series[string(kb)]
	f.mu.RUnlock()
	if s != nil {
		return s
	}
	key := string(kb)
	f.mu.Lock()
	defer f.mu.Unlock()
	if s = f.series[key]; s != nil {
		return s
	}
	s = &series{values: append([]string(nil), values...)}
	if f.kind == kindHistogram {
		s.buckets = f.buckets
		s.counts = make([]atomic.Uint64, len(f.buckets)+1)
	}
	f.series[key] = s
	return s
}

// addFloat adds d to the float stored as bits in u.
func addFloat(u *atomic.Uint64, d float64) {
	for {
		old := u.Load()
		if u.CompareAndSwap(old, math.Float64bits(math.Float64frombits(old)+d)) {
			return
		}
	}
}

// CounterVec is a counter with labels.
type CounterVec struct{ f *family }

// Counter registers a counter. By convention its name ends in _total.
func (r *Registry) Counter(name, help string, labels ...string) *CounterVec {
	return &CounterVec{r.register(&family{name: name, help: help, kind: kindCounter, labels: labels})}
}

// With returns the counter for the label values, in the order the labels
// were registered.
func (v *CounterVec) With(values ...string) *Counter { return (*Counter)(v.f.with(values)) }

// Counter is one series of a CounterVec: a value that only goes up.
type Counter series

// Inc adds one.
func (c *Counter) Inc() { addFloat(&c.val, 1) }

// Add adds d; a negative d is ignored, since a counter never goes down.
func (c *Counter) Add(d float64) {
	if d > 0 {
		addFloat(&c.val, d)
	}
}

// Value returns the current value.
func (c *Counter) Value() float64 { return math.Float64frombits(c.val.Load()) }

// GaugeVec is a gauge with labels.
type GaugeVec struct{ f *family }

// Gauge registers a gauge.
func (r *Registry) Gauge(name, help string, labels ...string) *GaugeVec {
	return &GaugeVec{r.register(&family{name: name, help: help, kind: kindGauge, labels: labels})}
}

// With returns the gauge for the label values.
func (v *GaugeVec) With(values ...string) *Gauge { return (*Gauge)(v.f.with(values)) }

// Gauge is one series of a GaugeVec: a value that goes up and down.
type Gauge series

// Set sets the value.
func (g *Gauge) Set(x float64) { g.val.Store(math.Float64bits(x)) }

// Add adds d (which may be negative).
func (g *Gauge) Add(d float64) { addFloat(&g.val, d) }

// Inc adds one.
func (g *Gauge) Inc() { g.Add(1) }

// Dec subtracts one.
func (g *Gauge) Dec() { g.Add(-1) }

// Value returns the current value.
func (g *Gauge) Value() float64 { return math.Float64frombits(g.val.Load()) }

// GaugeFunc registers a gauge whose samples collect produces each time the
// registry is written, for values the caller already keeps (such as the
// number of jobs by status). collect calls emit once per label-value tuple;
// it runs on the writer's goroutine and must not block for long.
func (r *Registry) GaugeFunc(name, help string, labels []string, collect func(emit func(value float64, labelValues ...string))) {
	r.register(&family{name: name, help: help, kind: kindGauge, labels: labels, collect: collect})
}

// HistogramVec is a histogram with labels.
type HistogramVec struct{ f *family }

// Histogram registers a histogram with the given bucket upper bounds
// (increasing; nil means DefBuckets). A +Inf bucket is always added.
func (r *Registry) Histogram(name, help string, buckets []float64, labels ...string) *HistogramVec {
	if buckets == nil {
		buckets = DefBuckets
	}
	return &HistogramVec{r.register(&family{name: name, help: help, kind: kindHistogram,
		labels: labels, buckets: append([]float64(nil), buckets...)})}
}

// With returns the histogram for the label values.
func (v *HistogramVec) With(values ...string) *Histogram { return (*Histogram)(v.f.with(values)) }

// Histogram is one series of a HistogramVec.
type Histogram series

// Observe records one value (for latencies: seconds).
func (h *Histogram) Observe(v float64) {
	// The first bucket whose bound is >= v; NaN lands in +Inf.
	i := sort.SearchFloat64s(h.buckets, v)
	if math.IsNaN(v) {
		i = len(h.buckets)
	}
	h.counts[i].Add(1)
	addFloat(&h.sum, v)
}

// ObserveSince records the seconds elapsed since start.
func (h *Histogram) ObserveSince(start time.Time) { h.Observe(time.Since(start).Seconds()) }

// Count returns how many values were observed.
func (h *Histogram) Count() uint64 {
	var n uint64
	for i := range h.counts {
		n += h.counts[i].Load()
	}
	return n
}
