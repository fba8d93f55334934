package harness

import (
	"fmt"
	"math"
	"slices"
	"time"
)

// Stats summarises latencies, in milliseconds.
type Stats struct {
	N    int     `json:"n"`
	P50  float64 `json:"p50_ms"`
	P99  float64 `json:"p99_ms"`
	Max  float64 `json:"max_ms"`
	Mean float64 `json:"mean_ms"`
}

// Summarize computes the statistics of ms (left unchanged).
func Summarize(ms []float64) Stats {
	if len(ms) == 0 {
		return Stats{}
	}
	s := slices.Clone(ms)
	slices.Sort(s)
	var sum float64
	for _, v := range s {
		sum += v
	}
	return Stats{N: len(s), P50: Percentile(s, 50), P99: Percentile(s, 99), Max: s[len(s)-1], Mean: sum / float64(len(s))}
}

// Percentile returns the nearest-rank p-th percentile of sorted: the
// smallest value with at least p% of the values at or below it.
func Percentile(sorted []float64, p float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	rank := int(math.Ceil(p / 100 * float64(len(sorted))))
	return sorted[min(max(rank, 1), len(sorted))-1]
}

// String reads "p50 0.31 ms, p99 1.20 ms, max 3.40 ms".
func (s Stats) String() string {
	if s.N == 0 {
		return "no samples"
	}
	return fmt.Sprintf("p50 %s ms, p99 %s ms, max %s ms", fmtMs(s.P50), fmtMs(s.P99), fmtMs(s.Max))
}

func fmtMs(v float64) string {
	switch {
	case v < 10:
		return fmt.Sprintf("%.2f", v)
	case v < 100:
		return fmt.Sprintf("%.1f", v)
	}
	return fmt.Sprintf("%.0f", v)
}

// Ms converts a duration to milliseconds.
func Ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// Latencies collects call latencies. It is not safe for concurrent use.
type Latencies struct {
	ms   []float64
	errs int
	err  error // the first error
}

// Time runs f and records its latency, or counts its error.
func (l *Latencies) Time(f func() error) {
	t0 := time.Now()
	err := f()
	if err != nil {
		l.errs++
		if l.err == nil {
			l.err = err
		}
		return
	}
	l.ms = append(l.ms, Ms(time.Since(t0)))
}

// Stats summarises the recorded latencies.
func (l *Latencies) Stats() Stats { return Summarize(l.ms) }

// Errors returns the number of failed calls and the first failure.
func (l *Latencies) Errors() (int, error) { return l.errs, l.err }
