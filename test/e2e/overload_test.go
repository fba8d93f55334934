package e2e

// Overload and fairness through the real daemon: the LUXI connection and
// message limits, priorities in the job queue, lock waits that show in the
// wait graph and can be cancelled, and priority changes of pending jobs.

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/corral/corral/internal/ecode"
	"github.com/corral/corral/internal/luxi"
)

// overload drives a dev cluster for the tests of this file.
type overload struct{ *cluster }

// rawLUXI is a LUXI connection driven frame by frame, to see exactly what
// the daemon answers and when it hangs up.
type rawLUXI struct {
	t  *testing.T
	nc net.Conn
	br *bufio.Reader
}

func (c overload) rawDial() *rawLUXI {
	c.t.Helper()
	nc, err := net.Dial("unix", c.st.Socket)
	if err != nil {
		c.t.Fatalf("dial %s: %v", c.st.Socket, err)
	}
	// No read here may block the test for long: a daemon that neither
	// answers nor hangs up is a failure, not a hang.
	_ = nc.SetDeadline(time.Now().Add(time.Minute))
	return &rawLUXI{t: c.t, nc: nc, br: bufio.NewReader(nc)}
}

func (r *rawLUXI) Close() { r.nc.Close() }

// reply reads one message and decodes it as a LUXI reply.
func (r *rawLUXI) reply() (success bool, result json.RawMessage, err error) {
	msg, err := luxi.ReadFrame(r.br, 64<<20)
	if err != nil {
		return false, nil, err
	}
	var resp struct {
		Success *bool           `json:"success"`
		Result  json.RawMessage `json:"result"`
		Version *int            `json:"version"`
	}
	if err := json.Unmarshal(msg, &resp); err != nil || resp.Success == nil {
		r.t.Fatalf("reply %q is not a LUXI reply", msg)
	}
	if resp.Version != nil {
		r.t.Fatalf("reply %q carries a version, which Ganeti's client refuses unless it is its own", msg)
	}
	return *resp.Success, resp.Result, nil
}

// call sends a well-formed request and returns the reply.
func (r *rawLUXI) call(method string, args ...any) (bool, json.RawMessage) {
	r.t.Helper()
	if args == nil {
		args = []any{}
	}
	req, _ := json.Marshal(map[string]any{"method": method, "args": args, "version": luxi.ProtocolVersion})
	if err := luxi.WriteFrame(r.nc, req); err != nil {
		r.t.Fatalf("%s: write: %v", method, err)
	}
	ok, res, err := r.reply()
	if err != nil {
		r.t.Fatalf("%s: read reply: %v", method, err)
	}
	return ok, res
}

// failure decodes a failure reply's encoded exception.
func (r *rawLUXI) failure(ok bool, res json.RawMessage) *ecode.Error {
	r.t.Helper()
	if ok {
		r.t.Fatalf("want a failure reply, got success %s", res)
	}
	var enc any
	if err := json.Unmarshal(res, &enc); err != nil {
		r.t.Fatalf("failure result %s: %v", res, err)
	}
	return ecode.Decode(enc)
}

// hungUp reports whether the daemon closed the connection: the next read
// gives EOF (or a reset) rather than data or a timeout.
func (r *rawLUXI) hungUp() bool {
	_ = r.nc.SetReadDeadline(time.Now().Add(30 * time.Second))
	var b [1]byte
	n, err := r.br.Read(b[:])
	if n > 0 {
		r.t.Fatalf("unexpected byte %q after the final reply", b[0])
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return false
	}
	return err != nil
}

// jobRows queries fields of jobs and fails the test on error.
func (c overload) jobRows(ids []int64, fields ...string) [][]any {
	c.t.Helper()
	rows, err := c.luxi.QueryJobs(context.Background(), ids, fields)
	if err != nil {
		c.t.Fatalf("query jobs %v: %v", ids, err)
	}
	return rows
}

func (c overload) jobStatus(id int64) string {
	c.t.Helper()
	s, _ := c.jobRows([]int64{id}, "status")[0][0].(string)
	return s
}

// waitStatus polls a job until it has status want. Polling is how a client
// of the real daemon learns of a change it does not cause itself.
func (c overload) waitStatus(id int64, want string) {
	c.t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		got := c.jobStatus(id)
		if got == want {
			return
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("job %d is %s, waited for %s", id, got, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitJob waits for a job to reach a final status (canceling is not one:
// the job may still hold locks) and returns it.
func (c overload) waitJob(id int64) string {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var prev []any
	serial := int64(1 << 62) // log entries do not matter here
	for {
		ch, err := c.luxi.WaitForJobChange(ctx, id, []string{"status"}, prev, &serial, 10)
		if err != nil {
			c.t.Fatalf("wait for job %d: %v", id, err)
		}
		if ch.NoChange {
			continue
		}
		st, _ := ch.JobInfo[0].(string)
		switch st {
		case "success", "error", "canceled":
			return st
		}
		prev = ch.JobInfo
	}
}

func (c overload) submitJob(op map[string]any) int64 {
	c.t.Helper()
	id, err := c.luxi.SubmitJob(context.Background(), []any{op})
	if err != nil {
		c.t.Fatalf("submit %v: %v", op["OP_ID"], err)
	}
	return id
}

// cancelJob cancels through LUXI and requires the daemon to accept.
func (c overload) cancelJob(id int64, kill bool) {
	c.t.Helper()
	ok, msg, err := c.luxi.CancelJob(context.Background(), id, kill)
	if err != nil || !ok {
		c.t.Fatalf("cancel job %d (kill %v): %v %v %q", id, kill, err, ok, msg)
	}
}

// slotDelayOp sleeps on the master for secs; interruptible so a kill-cancel
// ends it at once, which is how the tests release a run slot or a lock.
func slotDelayOp(secs float64) map[string]any {
	return map[string]any{"OP_ID": "OP_TEST_DELAY", "duration": secs, "interruptible": true}
}

// nodeLockHolderOp holds the node lock of node (shared, with the big cluster
// lock shared) while it sleeps, also on the node daemon.
func nodeLockHolderOp(node string, secs float64) map[string]any {
	op := slotDelayOp(secs)
	op["no_locks"] = false
	op["on_nodes"] = []any{node}
	return op
}

// nodeLockWaiterOp wants node's lock exclusively (and changes nothing: the
// node is not drained).
func nodeLockWaiterOp(node string) map[string]any {
	return map[string]any{"OP_ID": "OP_NODE_SET_PARAMS", "node_name": node, "drained": false}
}

// jobTS converts a job timestamp ([sec, usec] on the wire) to microseconds.
func jobTS(t *testing.T, v any) int64 {
	t.Helper()
	l, ok := v.([]any)
	if !ok || len(l) != 2 {
		t.Fatalf("timestamp %v is not [sec, usec]", v)
	}
	s, _ := l[0].(float64)
	u, _ := l[1].(float64)
	return int64(s)*1_000_000 + int64(u)
}

// lockEntry is one entry of the DebugLocks answer.
type lockEntry struct {
	Name    string
	Mode    string
	Owners  []string
	Pending []struct {
		Owner    string
		Mode     string
		Priority int
	}
}

func (c overload) debugLocks() []lockEntry {
	c.t.Helper()
	var locks []lockEntry
	if err := c.luxi.Call(context.Background(), "DebugLocks", nil, &locks); err != nil {
		c.t.Fatalf("DebugLocks: %v", err)
	}
	return locks
}

// ownedByJob reports whether a lock owner string belongs to job id.
func ownedByJob(owner string, id int64) bool {
	return strings.HasPrefix(owner, fmt.Sprintf("job %d/", id))
}

// lockState finds, for lock name, whether job holder owns it and the jobs
// waiting for it in queue order with their priorities.
func (c overload) lockState(name string, holder int64) (held bool, waiters []int64, prios []int) {
	c.t.Helper()
	for _, l := range c.debugLocks() {
		if l.Name != name {
			continue
		}
		held = slices.ContainsFunc(l.Owners, func(o string) bool { return ownedByJob(o, holder) })
		for _, p := range l.Pending {
			var id int64
			if _, err := fmt.Sscanf(p.Owner, "job %d/", &id); err != nil {
				c.t.Fatalf("lock %s: waiter %q names no job", name, p.Owner)
			}
			waiters = append(waiters, id)
			prios = append(prios, p.Priority)
		}
	}
	return held, waiters, prios
}

// waitLockWaiters polls the lock list until holder owns lock name and
// exactly the jobs want wait for it, in that order.
func (c overload) waitLockWaiters(name string, holder int64, want ...int64) []int {
	c.t.Helper()
	deadline := time.Now().Add(15 * time.Second) // well within the holder's sleep
	for {
		held, waiters, prios := c.lockState(name, holder)
		if held && slices.Equal(waiters, want) {
			return prios
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("lock %s: held by job %d %v, waiters %v; want waiters %v\n%s", name, holder, held, waiters, want, toJSON(c.debugLocks()))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (c overload) nodeLockName(node string) string {
	c.t.Helper()
	rows, err := c.luxi.QueryNodes(context.Background(), []string{node}, []string{"uuid"}, false)
	if err != nil || len(rows) != 1 {
		c.t.Fatalf("uuid of %s: %v %v", node, rows, err)
	}
	return "node/" + rows[0][0].(string)
}

func (c overload) quickJobRuns() {
	c.t.Helper()
	c.mustSucceed(map[string]any{"OP_ID": "OP_TEST_DELAY", "duration": 0})
}

func (c overload) setMaxRunning(n int) {
	c.t.Helper()
	c.mustSucceed(map[string]any{"OP_ID": "OP_CLUSTER_SET_PARAMS", "max_running_jobs": n})
	info, err := c.luxi.QueryClusterInfo(context.Background())
	if err != nil || info["max_running_jobs"] != float64(n) {
		c.t.Fatalf("max_running_jobs after modify: %v %v", info["max_running_jobs"], err)
	}
}

// TestConnLimit fills corrald's connection limit and checks that the next
// client is told why it is turned away, that the daemon keeps serving the
// connections it has, and that freed room is used again. The test's
// clients run as root, to whom corrald's admin reserve would otherwise
// give room beyond the limit: the reserve is off here.
func TestConnLimit(t *testing.T) {
	const limit = 50
	c := overload{newCluster(t, clusterOpts{nodes: 0, hypervisors: []string{"fake"},
		corraldArgs: []string{"--max-connections", strconv.Itoa(limit), "--admin-connections", "0"}})}

	var held []*rawLUXI
	defer func() {
		for _, r := range held {
			r.Close()
		}
	}()
	c.quickJobRuns()
	// The harness's own client is one of the connections. (A connection
	// the dev cluster's start-up closed leaves the count when the daemon
	// notices, hence waitAccepted.)
	for len(held) < limit-1 {
		held = append(held, c.waitAccepted())
	}

	// The limit is reached: the next client gets a reason and a hang-up,
	// without sending anything.
	over := c.rawDial()
	ok, res, err := over.reply()
	if err != nil {
		t.Fatalf("connection over the limit: no reply: %v", err)
	}
	e := over.failure(ok, res)
	if e.Kind != ecode.LuxiError || !strings.Contains(e.Msg, "too many connections") || !strings.Contains(e.Msg, strconv.Itoa(limit)) {
		t.Fatalf("connection over the limit: reply %s, want a LuxiError naming the limit %d", res, limit)
	}
	if !over.hungUp() {
		t.Fatal("connection over the limit was not closed")
	}
	over.Close()
	// The client library reports the same reason to a caller.
	cl, err := luxi.Dial(context.Background(), c.st.Socket)
	if err != nil {
		t.Fatal(err)
	}
	var v []any
	err = cl.Call(context.Background(), "QueryConfigValues", []any{[]string{"cluster_name"}}, &v)
	cl.Close()
	if e, ok := ecode.As(err); !ok || !strings.Contains(e.Msg, "too many connections") {
		t.Fatalf("client over the limit: %v, want the daemon's reason", err)
	}

	// Every connection held is still served, and the queue still runs jobs.
	for i, r := range held {
		if ok, res := r.call("QueryConfigValues", []string{"cluster_name"}); !ok {
			t.Fatalf("held connection %d: %s", i, res)
		}
	}
	c.quickJobRuns()

	// Freed room is used again, up to the limit and no further.
	const freed = 5
	for _, r := range held[:freed] {
		r.Close()
	}
	held = held[freed:]
	for range freed {
		r := c.waitAccepted()
		held = append(held, r)
	}
	if ok, _ := c.rawDialAccepted(); ok {
		t.Fatal("a connection beyond the limit was served after room was freed")
	}
	c.quickJobRuns()
}

// rawDialAccepted opens a connection, makes one call and closes it; it
// reports whether the daemon served it.
func (c overload) rawDialAccepted() (bool, json.RawMessage) {
	c.t.Helper()
	r := c.rawDial()
	defer r.Close()
	req, _ := json.Marshal(map[string]any{"method": "QueryConfigValues", "args": []any{[]string{"cluster_name"}}})
	// A turned-away connection may already be closed: the write may fail,
	// the reply still tells.
	_ = luxi.WriteFrame(r.nc, req)
	ok, res, err := r.reply()
	if err != nil {
		c.t.Fatalf("no reply: %v", err)
	}
	return ok, res
}

// waitAccepted dials until the daemon serves the connection: a closed
// connection leaves the daemon's count when it notices the hang-up.
func (c overload) waitAccepted() *rawLUXI {
	c.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		r := c.rawDial()
		req, _ := json.Marshal(map[string]any{"method": "QueryConfigValues", "args": []any{[]string{"cluster_name"}}})
		_ = luxi.WriteFrame(r.nc, req)
		ok, res, err := r.reply()
		if err != nil {
			c.t.Fatalf("no reply: %v", err)
		}
		if ok {
			return r
		}
		r.Close()
		if time.Now().After(deadline) {
			c.t.Fatalf("no connection accepted after others closed: %s", res)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestMessageSizeLimit sends a request over corrald's message limit and
// malformed frames: each gets a clear error and a hang-up, and nothing else
// is disturbed.
func TestMessageSizeLimit(t *testing.T) {
	const limit = 1 << 20
	c := overload{newCluster(t, clusterOpts{nodes: 0, hypervisors: []string{"fake"},
		corraldArgs: []string{"--max-message-bytes", strconv.Itoa(limit)}})}
	other := c.rawDial() // an unrelated client, mid-conversation
	defer other.Close()
	if ok, res := other.call("QueryConfigValues", []string{"cluster_name"}); !ok {
		t.Fatal(string(res))
	}
	before := configSerials(t, c.cluster)
	jobsBefore := len(c.jobRows(nil, "id"))

	// Just under the limit: an answer (this one a refusal of the bogus
	// field), and the connection stays usable.
	pad := strings.Repeat("x", limit-200)
	r := c.rawDial()
	e := r.failure(r.call("QueryConfigValues", []string{pad}))
	if !strings.Contains(e.Msg, "Unknown configuration value") {
		t.Fatalf("request under the limit: %v", e)
	}
	if ok, res := r.call("QueryConfigValues", []string{"cluster_name"}); !ok {
		t.Fatalf("connection after a request under the limit: %s", res)
	}
	r.Close()

	// Over the limit: a job submission of 1 MiB and a bit.
	big := map[string]any{"method": "SubmitJob", "version": luxi.ProtocolVersion, "args": []any{[]any{
		map[string]any{"OP_ID": "OP_TEST_DELAY", "duration": 0, "comment": strings.Repeat("y", limit)}}}}
	req, _ := json.Marshal(big)
	r = c.rawDial()
	// The daemon answers and hangs up before reading everything, so the
	// write runs on its own and may fail.
	wrote := make(chan error, 1)
	go func() { wrote <- luxi.WriteFrame(r.nc, req) }()
	ok, res, err := r.reply()
	if err != nil {
		t.Fatalf("oversized request: no reply: %v", err)
	}
	e = r.failure(ok, res)
	if e.Kind != ecode.LuxiError || !strings.Contains(e.Msg, "exceeds") || !strings.Contains(e.Msg, strconv.Itoa(limit)) {
		t.Fatalf("oversized request: reply %s, want a LuxiError naming the limit %d", res, limit)
	}
	if !r.hungUp() {
		t.Fatal("connection with an oversized request was not closed")
	}
	r.Close()
	<-wrote

	// Malformed frames: each is refused with a reason and a hang-up.
	for _, bad := range []struct{ frame, want string }{
		{"this is not JSON", "not a JSON object"},
		{`["SubmitJob", []]`, "not a JSON object"},
		{`{"method": "SubmitJob"}`, "no args"},
		{`{"method": 7, "args": []}`, "method is not a string"},
		{`{"method": "SubmitJob", "args": {"OP_ID": "OP_TEST_DELAY"}}`, "not a list"},
	} {
		r := c.rawDial()
		if err := luxi.WriteFrame(r.nc, []byte(bad.frame)); err != nil {
			t.Fatal(err)
		}
		ok, res, err := r.reply()
		if err != nil {
			t.Fatalf("frame %q: no reply: %v", bad.frame, err)
		}
		e := r.failure(ok, res)
		if e.Kind != ecode.LuxiError || !strings.Contains(e.Msg, bad.want) {
			t.Fatalf("frame %q: reply %s, want a LuxiError about %q", bad.frame, res, bad.want)
		}
		if !r.hungUp() {
			t.Fatalf("frame %q: connection not closed", bad.frame)
		}
		r.Close()
	}
	// A message cut off by the client's hang-up is dropped quietly.
	r = c.rawDial()
	_, _ = r.nc.Write([]byte(`{"method": "SubmitJob", "args": [[{"OP_ID": "OP_TEST_`))
	r.Close()

	// Nothing changed, nothing was submitted, and the daemon is unharmed.
	if after := configSerials(t, c.cluster); toJSON(after) != toJSON(before) {
		t.Fatalf("configuration changed: %v -> %v", before, after)
	}
	if n := len(c.jobRows(nil, "id")); n != jobsBefore {
		t.Fatalf("jobs: %d before, %d after the refused requests", jobsBefore, n)
	}
	if ok, res := other.call("QueryConfigValues", []string{"cluster_name"}); !ok {
		t.Fatalf("unrelated connection after the refused requests: %s", res)
	}
	c.quickJobRuns()
}

// TestJobPriorityOverload queues a thousand low-priority jobs behind a
// single run slot, then one high-priority job: the high one runs first, and
// the low ones run in the order they came.
func TestJobPriorityOverload(t *testing.T) {
	const low = 1000
	c := overload{newCluster(t, clusterOpts{nodes: 0, hypervisors: []string{"fake"}})}
	ctx := context.Background()
	if out, err := c.corral("cluster", "modify", "--max-running-jobs", "1"); err != nil {
		t.Fatalf("cluster modify: %v\n%s", err, out)
	}
	if info, err := c.luxi.QueryClusterInfo(ctx); err != nil || info["max_running_jobs"] != float64(1) {
		t.Fatalf("max_running_jobs after modify: %v %v", info["max_running_jobs"], err)
	}

	// The slot is taken until the test lets go.
	slot := c.submitJob(slotDelayOp(120))
	c.waitStatus(slot, "running")

	jobs := make([][]any, low)
	for i := range jobs {
		jobs[i] = []any{map[string]any{"OP_ID": "OP_TEST_DELAY", "duration": 0, "priority": 10}}
	}
	res, err := c.luxi.SubmitManyJobs(ctx, jobs)
	if err != nil {
		t.Fatal(err)
	}
	lows := make([]int64, len(res))
	for i, r := range res {
		if !r.OK {
			t.Fatalf("low job %d refused: %v", i, r.Err)
		}
		lows[i] = r.JobID
	}
	high := c.submitJob(map[string]any{"OP_ID": "OP_TEST_DELAY", "duration": 0, "priority": -10})
	if high < lows[len(lows)-1] {
		t.Fatalf("high job %d submitted after low job %d has a smaller id", high, lows[len(lows)-1])
	}
	// Nothing but the slot holder has started.
	for _, r := range c.jobRows(append(slices.Clone(lows), high), "id", "status") {
		if r[1] != "queued" {
			t.Fatalf("job %v is %v while the only run slot is taken", r[0], r[1])
		}
	}

	c.cancelJob(slot, true)
	if st := c.waitJob(slot); st != "canceled" {
		t.Fatalf("slot holder ended %s", st)
	}
	if st := c.waitJob(high); st != "success" {
		t.Fatalf("high job ended %s", st)
	}
	for _, id := range lows {
		if st := c.waitJob(id); st != "success" {
			t.Fatalf("low job %d ended %s", id, st)
		}
	}

	// A finished job's "priority" is the default, as in Ganeti; its ops
	// keep theirs.
	rows := c.jobRows(append([]int64{high}, lows...), "id", "oppriority", "start_ts", "opstart")
	if toJSON(rows[0][1]) != toJSON([]any{-10}) {
		t.Fatalf("high job op priority %v", rows[0][1])
	}
	highStart := jobTS(t, rows[0][2])
	prev := int64(0)
	for _, r := range rows[1:] {
		if toJSON(r[1]) != toJSON([]any{10}) {
			t.Fatalf("low job %v op priority %v", r[0], r[1])
		}
		start := jobTS(t, r[2])
		if start <= highStart {
			t.Fatalf("low job %v started at %d, not after the high job %d (%d)", r[0], start, high, highStart)
		}
		// Equal priorities are served in arrival order.
		if start < prev {
			t.Fatalf("low job %v started before the low job submitted ahead of it", r[0])
		}
		prev = start
		if ops := r[3].([]any); len(ops) != 1 || jobTS(t, ops[0]) < start {
			t.Fatalf("low job %v: opstart %v before the job start", r[0], r[3])
		}
	}
}

// TestLockWaitCancel shows a job waiting for a lock in the wait graph, with
// the job that holds it, and cancels the waiter (through LUXI and the CLI)
// while the holder carries on.
func TestLockWaitCancel(t *testing.T) {
	c := overload{newCluster(t, clusterOpts{nodes: 0, hypervisors: []string{"fake"}})}
	node := c.st.Master
	lock := c.nodeLockName(node)

	a := c.submitJob(nodeLockHolderOp(node, 20))
	c.waitStatus(a, "running")
	b1 := c.submitJob(nodeLockWaiterOp(node))
	b2 := c.submitJob(nodeLockWaiterOp(node))
	c.waitLockWaiters(lock, a, b1, b2)
	for _, id := range []int64{b1, b2} {
		if st := c.jobStatus(id); st != "waiting" {
			t.Fatalf("job %d blocked on a lock is %s, want waiting", id, st)
		}
	}
	// The CLI shows the same graph: A owns the lock, B1 and B2 wait.
	out, err := c.corral("debug", "locks", "--no-headers", "--separator", "|")
	if err != nil {
		t.Fatalf("debug locks: %v\n%s", err, out)
	}
	var line string
	for l := range strings.Lines(out) {
		if strings.HasPrefix(l, lock+"|") {
			line = strings.TrimSpace(l)
		}
	}
	f := strings.Split(line, "|")
	if len(f) != 4 || !strings.Contains(f[2], fmt.Sprintf("job %d/", a)) ||
		!strings.Contains(f[3], fmt.Sprintf("job %d/", b1)) || !strings.Contains(f[3], fmt.Sprintf("job %d/", b2)) {
		t.Fatalf("debug locks: no line for %s owned by job %d with jobs %d and %d pending:\n%s", lock, a, b1, b2, out)
	}

	// Cancel B1 through LUXI: it ends canceled while A still runs.
	c.cancelJob(b1, false)
	if st := c.waitJob(b1); st != "canceled" {
		t.Fatalf("waiting job %d ended %s after cancel", b1, st)
	}
	if st := c.jobStatus(a); st != "running" {
		t.Fatalf("lock holder %d is %s after a waiter was cancelled", a, st)
	}
	if held, waiters, _ := c.lockState(lock, a); !held || !slices.Equal(waiters, []int64{b2}) {
		t.Fatalf("after cancelling %d: lock held by %d %v, waiters %v", b1, a, held, waiters)
	}

	// Cancel B2 through the CLI.
	out, err = c.corral("job", "cancel", strconv.FormatInt(b2, 10))
	if err != nil || !strings.Contains(out, "cancel") {
		t.Fatalf("job cancel %d: %v\n%s", b2, err, out)
	}
	if st := c.waitJob(b2); st != "canceled" {
		t.Fatalf("waiting job %d ended %s after cancel", b2, st)
	}
	if st := c.jobStatus(a); st != "running" {
		t.Fatalf("lock holder %d is %s after the waiters were cancelled", a, st)
	}
	if held, waiters, _ := c.lockState(lock, a); !held || len(waiters) != 0 {
		t.Fatalf("after cancelling the waiters: lock held by %d %v, waiters %v", a, held, waiters)
	}
	// A running job is not cancelled without --kill.
	if ok, _, err := c.luxi.CancelJob(context.Background(), a, false); err != nil || ok {
		t.Fatalf("cancel of running job %d without kill: %v %v", a, ok, err)
	}

	// Let A go too, so the test ends; its lock is released.
	c.cancelJob(a, true)
	if st := c.waitJob(a); st != "canceled" {
		t.Fatalf("lock holder %d ended %s after a kill-cancel", a, st)
	}
	for _, l := range c.debugLocks() {
		for _, o := range l.Owners {
			for _, id := range []int64{a, b1, b2} {
				if ownedByJob(o, id) {
					t.Fatalf("lock %s still owned by finished job %d", l.Name, id)
				}
			}
		}
	}
	// The node lock is free: a job that needs it exclusively runs.
	c.mustSucceed(nodeLockWaiterOp(node))
}

// TestChangeJobPriority changes the priority of a job waiting for a lock
// and of jobs queued behind a full run slot, through LUXI and the CLI: the
// new priority shows in the job queries and decides who goes first.
func TestChangeJobPriority(t *testing.T) {
	c := overload{newCluster(t, clusterOpts{nodes: 0, hypervisors: []string{"fake"}})}
	ctx := context.Background()
	node := c.st.Master
	lock := c.nodeLockName(node)

	// Waiting jobs: B then C queue for a lock A holds.
	a := c.submitJob(nodeLockHolderOp(node, 60))
	c.waitStatus(a, "running")
	b := c.submitJob(nodeLockWaiterOp(node))
	cj := c.submitJob(nodeLockWaiterOp(node))
	if prios := c.waitLockWaiters(lock, a, b, cj); !slices.Equal(prios, []int{0, 0}) {
		t.Fatalf("waiter priorities %v, want the default 0", prios)
	}
	ok, msg, err := c.luxi.ChangeJobPriority(ctx, cj, -10)
	if err != nil || !ok {
		t.Fatalf("change priority of waiting job %d: %v %v %q", cj, ok, err, msg)
	}
	if out, err := c.corral("job", "change-priority", strconv.FormatInt(b, 10), "--priority", "low"); err != nil {
		t.Fatalf("job change-priority %d: %v\n%s", b, err, out)
	}
	for _, want := range []struct {
		id   int64
		prio float64
	}{{b, 10}, {cj, -10}} {
		r := c.jobRows([]int64{want.id}, "status", "priority", "oppriority")[0]
		if r[0] != "waiting" || r[1] != want.prio || toJSON(r[2]) != toJSON([]any{want.prio}) {
			t.Fatalf("job %d after the change: %v, want waiting at priority %v", want.id, r, want.prio)
		}
	}
	// The lock queue follows: C is now ahead of B.
	if prios := c.waitLockWaiters(lock, a, cj, b); !slices.Equal(prios, []int{-10, 10}) {
		t.Fatalf("waiter priorities %v after the change, want [-10 10]", prios)
	}
	c.cancelJob(a, true)
	for _, id := range []int64{a, b, cj} {
		c.waitJob(id)
	}
	rows := c.jobRows([]int64{b, cj}, "status", "opexec")
	if rows[0][0] != "success" || rows[1][0] != "success" {
		t.Fatalf("waiters ended %v and %v", rows[0][0], rows[1][0])
	}
	if execB, execC := jobTS(t, rows[0][1].([]any)[0]), jobTS(t, rows[1][1].([]any)[0]); execC >= execB {
		t.Fatalf("raised job %d got the lock at %d, after job %d at %d", cj, execC, b, execB)
	}

	// Queued jobs: Q1, Q2, Q3 behind the one run slot; Q3 raised through
	// LUXI, Q2 through the CLI above it.
	c.setMaxRunning(1)
	slot := c.submitJob(slotDelayOp(120))
	c.waitStatus(slot, "running")
	q1 := c.submitJob(map[string]any{"OP_ID": "OP_TEST_DELAY", "duration": 0})
	q2 := c.submitJob(map[string]any{"OP_ID": "OP_TEST_DELAY", "duration": 0})
	q3 := c.submitJob(map[string]any{"OP_ID": "OP_TEST_DELAY", "duration": 0})
	if ok, msg, err := c.luxi.ChangeJobPriority(ctx, q3, -5); err != nil || !ok {
		t.Fatalf("change priority of queued job %d: %v %v %q", q3, ok, err, msg)
	}
	if out, err := c.corral("job", "change-priority", strconv.FormatInt(q2, 10), "--priority", "high"); err != nil || !strings.Contains(out, "-10") {
		t.Fatalf("job change-priority %d: %v\n%s", q2, err, out)
	}
	for _, want := range []struct {
		id   int64
		prio float64
	}{{q1, 0}, {q2, -10}, {q3, -5}} {
		r := c.jobRows([]int64{want.id}, "status", "priority", "oppriority")[0]
		if r[0] != "queued" || r[1] != want.prio || toJSON(r[2]) != toJSON([]any{want.prio}) {
			t.Fatalf("job %d: %v, want queued at priority %v", want.id, r, want.prio)
		}
	}
	// Bad changes are refused and change nothing.
	if _, _, err := c.luxi.ChangeJobPriority(ctx, q1, -21); err == nil {
		t.Fatal("priority -21 accepted")
	}
	if out, err := c.corral("job", "change-priority", strconv.FormatInt(a, 10), "--priority", "high"); err == nil || !strings.Contains(out, "finished") {
		t.Fatalf("change-priority of finished job %d: %v\n%s", a, err, out)
	}
	if ok, _, err := c.luxi.ChangeJobPriority(ctx, 999999, 0); ok || err == nil {
		t.Fatalf("change priority of an unknown job: %v %v", ok, err)
	}

	c.cancelJob(slot, true)
	for _, id := range []int64{slot, q1, q2, q3} {
		c.waitJob(id)
	}
	rows = c.jobRows([]int64{q2, q3, q1}, "id", "status", "start_ts")
	for i := range rows {
		if rows[i][1] != "success" {
			t.Fatalf("job %v ended %v", rows[i][0], rows[i][1])
		}
		if i > 0 && jobTS(t, rows[i][2]) <= jobTS(t, rows[i-1][2]) {
			t.Fatalf("job %v started before job %v: want the order %d %d %d by priority", rows[i][0], rows[i-1][0], q2, q3, q1)
		}
	}
}
