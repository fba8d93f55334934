package master

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/corral/corral/internal/jobqueue"
	"github.com/corral/corral/internal/metrics"
	"github.com/corral/corral/internal/rpc"
)

// daemonMetrics is corrald's metrics registry and the instruments its hooks
// update. corral-rapi fetches the exposition with the Corral-only LUXI
// method QueryMetrics and serves it on its /metrics after its own. A nil
// *daemonMetrics records nothing, for daemons assembled by hand in tests.
type daemonMetrics struct {
	reg     *metrics.Registry
	jobSecs *metrics.HistogramVec
	rpcSecs *metrics.HistogramVec
	luxi    *metrics.CounterVec
}

// jobBuckets span a no-op job to a long OS install, in seconds.
var jobBuckets = []float64{.01, .05, .1, .5, 1, 5, 10, 30, 60, 300, 900, 1800, 3600}

// rpcBuckets span a local call to the longest waits the registered call
// timeouts allow.
var rpcBuckets = []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300}

// jobStatuses are every job status, so that each has a series from the
// start, at zero.
var jobStatuses = []jobqueue.Status{jobqueue.StatusQueued, jobqueue.StatusWaiting, jobqueue.StatusCanceling,
	jobqueue.StatusRunning, jobqueue.StatusCanceled, jobqueue.StatusSuccess, jobqueue.StatusError}

// newDaemonMetrics registers corrald's metrics. queue returns the job queue
// (nil before it exists); the job gauges read it when written.
func newDaemonMetrics(queue func() *jobqueue.Queue) *daemonMetrics {
	reg := metrics.NewRegistry()
	m := &daemonMetrics{
		reg: reg,
		jobSecs: reg.Histogram("corral_job_seconds",
			"Time from a job's submission to its end, by the OP_ID of its first opcode; observed when the job finalises.",
			jobBuckets, "op"),
		rpcSecs: reg.Histogram("corral_node_rpc_seconds",
			"Latency of corrald's node RPCs by method and outcome (success, error: the node answered with an error, unreachable, abandoned: canceled or timed out).",
			rpcBuckets, "method", "outcome"),
		luxi: reg.Counter("corral_luxi_requests_total",
			"LUXI requests answered by corrald, by method (other: a name corrald does not know) and outcome (success, error).",
			"method", "outcome"),
	}
	reg.GaugeFunc("corral_jobs", "Jobs in the queue (not archived) by status.", []string{"status"},
		func(emit func(float64, ...string)) {
			q := queue()
			if q == nil {
				return
			}
			by := q.Stats().ByStatus
			for _, st := range jobStatuses {
				emit(float64(by[st]), string(st))
			}
		})
	reg.GaugeFunc("corral_jobs_scheduling", "Unfinished jobs by where they are in scheduling (executing, ready: waiting for a run slot, blocked: on dependencies, suspended).",
		[]string{"state"}, func(emit func(float64, ...string)) {
			q := queue()
			if q == nil {
				return
			}
			s := q.Stats()
			emit(float64(s.Executing), "executing")
			emit(float64(s.Ready), "ready")
			emit(float64(s.Blocked), "blocked")
			emit(float64(s.Suspended), "suspended")
		})
	return m
}

// text is the exposition served through QueryMetrics.
func (m *daemonMetrics) text() (string, error) {
	if m == nil {
		return "", nil
	}
	var b strings.Builder
	if err := m.reg.WriteText(&b); err != nil {
		return "", err
	}
	return b.String(), nil
}

// jobFinalized is the job queue's Finalized hook.
func (m *daemonMetrics) jobFinalized(firstOp string, _ jobqueue.Status, took time.Duration) {
	if m == nil {
		return
	}
	m.jobSecs.With(firstOp).Observe(took.Seconds())
}

// nodeRPC records one node RPC.
func (m *daemonMetrics) nodeRPC(method string, start time.Time, err error) {
	if m == nil {
		return
	}
	m.rpcSecs.With(method, rpcOutcome(err)).ObserveSince(start)
}

func rpcOutcome(err error) string {
	switch {
	case err == nil:
		return "success"
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return "abandoned"
	case errors.Is(err, rpc.ErrUnreachable):
		return "unreachable"
	}
	return "error"
}

// luxiCall records one LUXI request.
func (m *daemonMetrics) luxiCall(method string, err error) {
	if m == nil {
		return
	}
	// The method label is bounded by the methods corrald serves: a client
	// may send any name, and each distinct value would be a series kept
	// forever.
	if _, ok := luxiMethods[method]; !ok {
		method = "other"
	}
	outcome := "success"
	if err != nil {
		outcome = "error"
	}
	m.luxi.With(method, outcome).Inc()
}
