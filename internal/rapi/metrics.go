package rapi

import (
	"bytes"
	"context"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/corral/corral/internal/metrics"
)

// MetricsPath is where the handler serves Prometheus metrics: corral-rapi's
// own, then corrald's. Unlike the RAPI resources it always needs valid
// credentials (any user: reading is enough), whatever RequireAuth says,
// since the numbers describe the whole cluster's activity.
const MetricsPath = "/metrics"

// metricsTimeout bounds the wait for corrald's part of a scrape: a master
// too busy to answer quickly shows as corral_up 0, not as a hung scrape.
const metricsTimeout = 10 * time.Second

// rapiMetrics are corral-rapi's own metrics.
type rapiMetrics struct {
	reg      *metrics.Registry
	requests *metrics.CounterVec
	seconds  *metrics.HistogramVec
	inFlight *metrics.Gauge
}

func newRAPIMetrics() *rapiMetrics {
	reg := metrics.NewRegistry()
	return &rapiMetrics{
		reg: reg,
		requests: reg.Counter("corral_rapi_requests_total",
			"RAPI requests answered, by route pattern (unmatched: no route), method and HTTP status code.",
			"route", "method", "code"),
		seconds: reg.Histogram("corral_rapi_request_seconds",
			"Time to answer a RAPI request, by route pattern and method.",
			[]float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120},
			"route", "method"),
		inFlight: reg.Gauge("corral_rapi_requests_in_flight", "RAPI requests being answered now.").With(),
	}
}

// instrument counts the request r and times it; the caller answers through
// the returned writer and calls done at the end.
func (h *Handler) instrument(w http.ResponseWriter, r *http.Request) (http.ResponseWriter, func()) {
	start := time.Now()
	h.metrics.inFlight.Inc()
	sw := &statusWriter{ResponseWriter: w}
	return sw, func() {
		h.metrics.inFlight.Dec()
		route, method := h.routeLabel(r), methodLabel(r.Method)
		h.metrics.seconds.With(route, method).ObserveSince(start)
		h.metrics.requests.With(route, method, strconv.Itoa(sw.code())).Inc()
	}
}

// routeLabel is the routes.go pattern the request matched, never its path:
// names in paths would make a series per instance.
func (h *Handler) routeLabel(r *http.Request) string {
	path := r.URL.EscapedPath()
	if path == MetricsPath {
		return MetricsPath
	}
	rt, _ := h.match(path)
	if rt == nil {
		return "unmatched"
	}
	return strings.Join(rt.segs, "/")
}

func methodLabel(m string) string {
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

// serveMetrics answers MetricsPath: corral-rapi's metrics, then corral_up
// (1 when corrald answered, else 0), then corrald's metrics when it
// answered. The status is 200 either way: corral-rapi itself is up, and
// corral_up says whether the master's part is there.
func (h *Handler) serveMetrics(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		h.writeError(w, errf(http.StatusNotImplemented, "Method %s is unsupported for path %s", r.Method, MetricsPath))
		return
	}
	if _, ok := h.auth.Authenticate(r); !ok {
		h.challenge(w)
		h.writeError(w, &httpError{code: http.StatusUnauthorized})
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), metricsTimeout)
	defer cancel()
	master, err := h.be.QueryMetrics(ctx)
	up := 1.0
	if err != nil {
		h.log.Warn("rapi: corrald's metrics unavailable", "err", err)
		up, master = 0, ""
	}
	var buf bytes.Buffer
	_ = h.metrics.reg.WriteText(&buf) // a bytes.Buffer does not fail
	// corral_up is per scrape, so it is not kept in the shared registry.
	upReg := metrics.NewRegistry()
	upReg.Gauge("corral_up", "Whether corrald answered for its part of this scrape (1) or not (0: its metrics are missing).").With().Set(up)
	_ = upReg.WriteText(&buf)
	buf.WriteString(master)
	w.Header().Set("Content-Type", metrics.ContentType)
	w.Header().Set("Content-Length", strconv.Itoa(buf.Len()))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(buf.Bytes())
}
