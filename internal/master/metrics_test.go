package master

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/corral/corral/internal/ecode"
	"github.com/corral/corral/internal/jobqueue"
	"github.com/corral/corral/internal/metrics"
	"github.com/corral/corral/internal/rpc"
)

// TestDaemonMetrics drives the hooks as corrald wires them (a real job
// queue, the LUXI handler) and reads the result back through QueryMetrics.
func TestDaemonMetrics(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), testWait)
	defer cancel()
	d := &Daemon{}
	d.metrics = newDaemonMetrics(func() *jobqueue.Queue { return d.queue })
	q, err := jobqueue.New(jobqueue.Options{
		Store: testStore(t),
		Runner: runnerFunc(func(ctx context.Context) error {
			return nil
		}),
		Finalized: d.metrics.jobFinalized,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := q.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(q.Stop)
	d.queue = q
	h := &luxiHandler{d}

	const jobs = 3
	for range jobs {
		runDelayJob(t, ctx, h, q)
	}
	if _, err := h.Call(ctx, "NoSuchMethod", nil); err == nil {
		t.Fatal("unknown method answered")
	}
	d.metrics.nodeRPC("instance_list", time.Now(), nil)
	d.metrics.nodeRPC("instance_list", time.Now(), fmt.Errorf("x: %w", rpc.ErrUnreachable))
	// A job's duration is recorded when the queue finalises it, and its
	// goroutine leaves the executing count after that, both of which may
	// come just after its status turned to success: wait for the last one
	// (reading the metrics directly, which counts no LUXI request).
	for {
		text, _ := d.metrics.text()
		fams, _ := metrics.ParseText(text)
		n, _ := fams.Value("corral_job_seconds_count", "op", "OP_TEST_DELAY")
		if running, _ := fams.Value("corral_jobs_scheduling", "state", "executing"); n >= jobs && running == 0 {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatal("the jobs' durations were never recorded")
		case <-time.After(10 * time.Millisecond):
		}
	}

	res, err := h.Call(ctx, "QueryMetrics", nil)
	if err != nil {
		t.Fatal(err)
	}
	// The answer goes out as a JSON string.
	raw, err := json.Marshal(res)
	if err != nil {
		t.Fatal(err)
	}
	var text string
	if err := json.Unmarshal(raw, &text); err != nil {
		t.Fatalf("QueryMetrics answered %s, not a string", raw)
	}
	fams, err := metrics.ParseText(text)
	if err != nil {
		t.Fatalf("exposition does not parse: %v\n%s", err, text)
	}
	checks := []struct {
		name   string
		labels []string
		want   float64
	}{
		{"corral_jobs", []string{"status", "success"}, jobs},
		{"corral_jobs", []string{"status", "error"}, 0},
		{"corral_jobs_scheduling", []string{"state", "executing"}, 0},
		{"corral_job_seconds_count", []string{"op", "OP_TEST_DELAY"}, jobs},
		{"corral_luxi_requests_total", []string{"method", "SubmitJob", "outcome", "success"}, jobs},
		{"corral_luxi_requests_total", []string{"method", "other", "outcome", "error"}, 1},
		{"corral_node_rpc_seconds_count", []string{"method", "instance_list", "outcome", "success"}, 1},
		{"corral_node_rpc_seconds_count", []string{"method", "instance_list", "outcome", "unreachable"}, 1},
	}
	for _, c := range checks {
		if got, ok := fams.Value(c.name, c.labels...); !ok || got != c.want {
			t.Errorf("%s%v = %v (found %v), want %v", c.name, c.labels, got, ok, c.want)
		}
	}
	// The QueryMetrics call itself is counted after it answered.
	if _, ok := fams.Value("corral_luxi_requests_total", "method", "QueryMetrics"); ok {
		t.Error("QueryMetrics counted before it answered")
	}
	text2, _ := d.metrics.text()
	fams2, _ := metrics.ParseText(text2)
	if got, _ := fams2.Value("corral_luxi_requests_total", "method", "QueryMetrics", "outcome", "success"); got != 1 {
		t.Errorf("QueryMetrics requests = %v, want 1", got)
	}
}

func TestRPCOutcome(t *testing.T) {
	tests := []struct {
		err  error
		want string
	}{
		{nil, "success"},
		{ecode.Errorf(ecode.NoEnt, "no such instance"), "error"},
		{&ecode.Error{Class: ecode.Environ, Msg: "unreachable", Err: fmt.Errorf("%w: refused", rpc.ErrUnreachable)}, "unreachable"},
		{&ecode.Error{Class: ecode.Environ, Msg: "abandoned", Err: context.Canceled}, "abandoned"},
		{fmt.Errorf("wait: %w", context.DeadlineExceeded), "abandoned"},
		{errors.New("other"), "error"},
	}
	for _, tt := range tests {
		if got := rpcOutcome(tt.err); got != tt.want {
			t.Errorf("rpcOutcome(%v) = %q, want %q", tt.err, got, tt.want)
		}
	}
}

// TestNilDaemonMetrics: a daemon assembled without metrics still works.
func TestNilDaemonMetrics(t *testing.T) {
	var m *daemonMetrics
	m.jobFinalized("OP_X", jobqueue.StatusSuccess, time.Second)
	m.nodeRPC("x", time.Now(), nil)
	m.luxiCall("x", nil)
	if s, err := m.text(); s != "" || err != nil {
		t.Fatalf("text = %q, %v", s, err)
	}
}

// runDelayJob submits an OP_TEST_DELAY job through h and waits until it
// has succeeded.
func runDelayJob(t *testing.T, ctx context.Context, h *luxiHandler, q *jobqueue.Queue) {
	t.Helper()
	res, err := h.Call(ctx, "SubmitJob", []json.RawMessage{json.RawMessage(`[{"OP_ID":"OP_TEST_DELAY"}]`)})
	if err != nil {
		t.Fatal(err)
	}
	id := res.(int64)
	var prev []any
	for {
		info, _, _, err := q.WaitForChange(ctx, id, []string{"status"}, prev, -1, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if info[0] == string(jobqueue.StatusSuccess) {
			return
		}
		prev = info
	}
}

// TestLUXIMethodsCountedByName: every method the dispatcher serves is
// counted under its own name, Corral's and the less common Ganeti ones
// included, and only unknown names count as "other".
func TestLUXIMethodsCountedByName(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), testWait)
	defer cancel()
	d := &Daemon{}
	d.metrics = newDaemonMetrics(func() *jobqueue.Queue { return d.queue })
	h := &luxiHandler{d}
	// Asking for locks fails before QueryExports reads anything, and a
	// pairing request that is not an object fails at decoding.
	if _, err := h.Call(ctx, "QueryExports", []json.RawMessage{json.RawMessage(`null`), json.RawMessage(`true`)}); err == nil {
		t.Fatal("QueryExports with locking answered")
	}
	if _, err := h.Call(ctx, "PairRedeem", []json.RawMessage{json.RawMessage(`1`)}); err == nil {
		t.Fatal("PairRedeem of a number answered")
	}
	if _, err := h.Call(ctx, "NoSuchMethod", nil); err == nil {
		t.Fatal("unknown method answered")
	}
	text, err := d.metrics.text()
	if err != nil {
		t.Fatal(err)
	}
	fams, err := metrics.ParseText(text)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range []string{"QueryExports", "PairRedeem", "other"} {
		if got, _ := fams.Value("corral_luxi_requests_total", "method", m, "outcome", "error"); got != 1 {
			t.Errorf("requests of %s = %v, want 1\n%s", m, got, text)
		}
	}
	for name := range luxiMethods {
		d.metrics.luxiCall(name, nil)
	}
	text, _ = d.metrics.text()
	fams, _ = metrics.ParseText(text)
	for name := range luxiMethods {
		if got, _ := fams.Value("corral_luxi_requests_total", "method", name, "outcome", "success"); got != 1 {
			t.Errorf("method %s counted %v times under its name, want 1", name, got)
		}
	}
}
