package apifront

import (
	"net/http"
	"strconv"
	"time"

	"github.com/corral/corral/internal/metrics"
)

// Limiter bounds the requests an API serves at once. A request beyond the
// limit is refused at once rather than queued: a client that retries does
// better than one whose request waits behind a burst.
type Limiter struct {
	slots chan struct{}
}

// NewLimiter allows n requests at once; n <= 0 means no limit.
func NewLimiter(n int) *Limiter {
	if n <= 0 {
		return &Limiter{}
	}
	return &Limiter{slots: make(chan struct{}, n)}
}

// Acquire takes a slot; false when all are taken. release gives it back.
func (l *Limiter) Acquire() (release func(), ok bool) {
	if l.slots == nil {
		return func() {}, true
	}
	select {
	case l.slots <- struct{}{}:
		return func() { <-l.slots }, true
	default:
		return nil, false
	}
}

// RequestMetrics are an API's own request metrics, named after the API
// (corral_<api>_requests_total, corral_<api>_request_seconds and
// corral_<api>_requests_in_flight), labelled by route pattern, method and
// status code. Route labels must be patterns, never paths: names in paths
// would make a series per instance.
type RequestMetrics struct {
	Registry *metrics.Registry
	requests *metrics.CounterVec
	seconds  *metrics.HistogramVec
	inFlight *metrics.Gauge
}

// NewRequestMetrics registers api's metrics in a registry of their own;
// what names the API in the help texts ("RAPI").
func NewRequestMetrics(api, what string) *RequestMetrics {
	reg := metrics.NewRegistry()
	return &RequestMetrics{
		Registry: reg,
		requests: reg.Counter("corral_"+api+"_requests_total",
			what+" requests answered, by route pattern (unmatched: no route), method and HTTP status code.",
			"route", "method", "code"),
		seconds: reg.Histogram("corral_"+api+"_request_seconds",
			"Time to answer a "+what+" request, by route pattern and method.",
			[]float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120},
			"route", "method"),
		inFlight: reg.Gauge("corral_"+api+"_requests_in_flight", what+" requests being answered now.").With(),
	}
}

// Instrument counts the request r and times it; the caller answers through
// the returned writer and calls done at the end. route is asked for the
// request's route label then.
func (m *RequestMetrics) Instrument(w http.ResponseWriter, r *http.Request, route func(*http.Request) string) (http.ResponseWriter, func()) {
	start := time.Now()
	m.inFlight.Inc()
	sw := &statusWriter{ResponseWriter: w}
	return sw, func() {
		m.inFlight.Dec()
		label, method := route(r), MethodLabel(r.Method)
		m.seconds.With(label, method).ObserveSince(start)
		m.requests.With(label, method, strconv.Itoa(sw.code())).Inc()
	}
}

// MethodLabel is the method as a label: the usual ones, else "other", so a
// client cannot make series of its own.
func MethodLabel(m string) string {
	switch m {
	case http.MethodGet, http.MethodPut, http.MethodPost, http.MethodDelete, http.MethodHead:
		return m
	}
	return "other"
}

// statusWriter remembers the status code sent.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection's writer.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (w *statusWriter) code() int {
	if w.status == 0 {
		return http.StatusOK
	}
	return w.status
}
