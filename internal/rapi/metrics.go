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

// instrument counts the request r and times it; the caller answers through
// the returned writer and calls done at the end.
func (h *Handler) instrument(w http.ResponseWriter, r *http.Request) (http.ResponseWriter, func()) {
	return h.metrics.Instrument(w, r, h.routeLabel)
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
	_ = h.metrics.Registry.WriteText(&buf) // a bytes.Buffer does not fail
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
