package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/corral/corral/internal/bootstrap"
	"github.com/corral/corral/internal/devcluster"
	"github.com/corral/corral/internal/hypervisor"
	"github.com/corral/corral/internal/luxi"
	"github.com/corral/corral/internal/storecfg"
)

// failoverTTL is the election lease's TTL in this test: short, so a
// takeover after a SIGKILL takes a few seconds (etcd's minimum is 2 s).
const failoverTTL = "3s"

// TestMasterFailover runs three corrald candidates on a three-member etcd:
// about two hundred jobs (test delays and fake-hypervisor instance
// operations) are queued and running when the master dies by SIGKILL; a
// standby takes over and every acknowledged job ends, successfully or with
// a reason; the instances match the fake hypervisors; then
// 'corral cluster master-failover' moves the role on purpose and a
// standby's socket names the new master.
func TestMasterFailover(t *testing.T) {
	requireEtcd(t)
	c := newClusterWith(t, devcluster.Options{Nodes: 1, Hypervisors: []string{"fake"}, WatcherEvery: time.Hour,
		Store: storecfg.BackendEtcd, EtcdMembers: 3, Masters: 3, NoForward: true, CorraldArgs: []string{"--election-ttl", failoverTTL}})
	ctx := context.Background()
	if n := len(c.st.Candidates()); n != 3 {
		t.Fatalf("%d corrald candidates recorded, want 3", n)
	}
	first := c.leader(30 * time.Second)
	if first.Proc != "corrald" {
		t.Fatalf("the first master is %s, want the first corrald", first.Proc)
	}
	for _, cand := range c.st.Candidates()[1:] {
		c.wantStandby(cand, first.Name)
	}

	c.mustSucceed(createOp("f1", "", 8))
	c.mustSucceed(createOp("f2", "node2", 8))
	// Instance operations are spread among the delays around where the
	// kill comes (after the 40th job), so some are running at that moment.
	instOps := []map[string]any{
		{"OP_ID": "OP_INSTANCE_SHUTDOWN", "instance_name": "f1"},
		createOp("f3", "node2", 8),
		{"OP_ID": "OP_INSTANCE_SHUTDOWN", "instance_name": "f2"},
		{"OP_ID": "OP_INSTANCE_STARTUP", "instance_name": "f1"},
		createOp("f4", "", 8),
		{"OP_ID": "OP_INSTANCE_SHUTDOWN", "instance_name": "f3"},
		{"OP_ID": "OP_INSTANCE_STARTUP", "instance_name": "f2"},
		{"OP_ID": "OP_INSTANCE_SHUTDOWN", "instance_name": "f4"},
		{"OP_ID": "OP_INSTANCE_STARTUP", "instance_name": "f3"},
		{"OP_ID": "OP_INSTANCE_SHUTDOWN", "instance_name": "f1"},
	}
	jobs := make([][]any, 0, 200)
	for i := range 200 {
		if k := i - 30; k >= 0 && k%5 == 0 && k/5 < len(instOps) {
			jobs = append(jobs, []any{instOps[k/5]})
			continue
		}
		jobs = append(jobs, []any{map[string]any{"OP_ID": "OP_TEST_DELAY", "duration": float64(i%5) * 0.5}})
	}
	sctx, cancel := context.WithTimeout(ctx, time.Minute)
	res, err := c.luxi.SubmitManyJobs(sctx, jobs)
	cancel()
	if err != nil {
		t.Fatalf("submitting %d jobs: %v", len(jobs), err)
	}
	// The crash loop's record and invariants: acknowledged jobs, finished
	// jobs that must not change, serial numbers that must not go back.
	l := &crashLoop{t: t, c: c, seed: 0, socket: first.Socket, nodes: slices.Clone(c.st.Nodes),
		jobs: map[int64]ackedJob{}, final: map[int64]string{}, wasRunning: map[int64]int{}}
	ids := make([]int64, len(res))
	for i, r := range res {
		if !r.OK {
			t.Fatalf("job %d of %d refused: %v", i, len(jobs), r.Err)
		}
		ids[i] = r.JobID
		l.ack(r.JobID, 0, fmt.Sprintf("job %d of the batch", i))
	}
	// Kill the master once some jobs have finished and others run.
	waitFor(t, time.Minute, "the first jobs to finish", func() bool {
		rows, err := queryJobs(ctx, c.luxi, ids[:40], []string{"status"})
		return err == nil && rows[39] != nil && finalStatus(fmt.Sprint(rows[39][0]))
	})
	rows, err := queryJobs(ctx, c.luxi, ids, []string{"status"})
	if err != nil {
		t.Fatal(err)
	}
	running := 0
	for _, r := range rows {
		if r != nil && !finalStatus(fmt.Sprint(r[0])) {
			running++
		}
	}
	pre := l.snapshot(1)
	logOff := l.logSize()
	c.killDaemon(first.Proc)
	l.gen.Add(1)
	c.luxi.Close()
	c.luxi = nil
	t.Logf("master %s killed with %d of %d jobs unfinished", first.Name, running, len(ids))
	if running == 0 {
		t.Fatal("every job had finished before the kill: the test proves nothing")
	}

	second := c.leader(30 * time.Second)
	if second.Proc == first.Proc {
		t.Fatalf("%s leads again after its SIGKILL", second.Proc)
	}
	c.useMaster(second)
	l.socket = second.Socket
	// The new master announced its epoch to every node before it resumed
	// any job: each node has recorded it, so the old master's calls would
	// be refused everywhere.
	info, err := c.luxi.QueryClusterInfo(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range c.st.Nodes {
		b, err := os.ReadFile(filepath.Join(bootstrap.Layout{StateDir: c.st.StateDir}.NodeDir(n), "rpc", "epoch"))
		if err != nil {
			t.Fatalf("node %s's recorded epoch: %v", n, err)
		}
		if got, want := strings.TrimSpace(string(b)), fmt.Sprint(int64(info["epoch"].(float64))); got != want {
			t.Errorf("node %s has epoch %s recorded, the new master's is %s", n, got, want)
		}
	}
	// The supervisor's part: the killed corrald comes back, as a standby.
	if _, err := devcluster.Restart(c.st, first.Proc); err != nil {
		t.Fatal(err)
	}
	c.wantStandby(first, second.Name)

	// Every acknowledged job ends: success, or an error that says why.
	waitFor(t, time.Minute, fmt.Sprintf("%d jobs to end", len(ids)), func() bool {
		rows, err := queryJobs(ctx, c.luxi, ids, []string{"status"})
		if err != nil {
			t.Fatalf("querying jobs: %v", err)
		}
		for i, r := range rows {
			if r == nil {
				t.Fatalf("job %d is lost", ids[i])
			}
			if !finalStatus(fmt.Sprint(r[0])) {
				return false
			}
		}
		return true
	})
	l.check(1, pre, logOff)
	rows, err = queryJobs(ctx, c.luxi, ids, []string{"id", "status", "opresult", "ops", "oplog"})
	if err != nil {
		t.Fatal(err)
	}
	failed, resumed := 0, 0
	at := map[string]int{}
	for i, r := range rows {
		// An op taken over resumes at its last committed step, never before.
		if l.checkResume(ids[i], r[3], r[4], at) {
			resumed++
		}
		switch r[1] {
		case "success":
		case "error":
			failed++
			if b, _ := json.Marshal(r[2]); len(b) < 10 || !strings.Contains(string(b), "Error") {
				t.Errorf("job %d failed without a reason: %s", ids[i], b)
			}
		default:
			t.Errorf("job %d ended %v", ids[i], r[1])
		}
	}
	t.Logf("after the takeover: %d jobs succeeded, %d failed with a reason; %d resumed by the new master (ops by step: %v)", len(ids)-failed, failed, resumed, at)
	if resumed == 0 {
		t.Error("no job was resumed by the new master: the kill caught nothing running")
	}
	if id := c.submitOne(map[string]any{"OP_ID": "OP_TEST_DELAY", "duration": 0}); slices.Contains(ids, id) || id <= slices.Max(ids) {
		t.Fatalf("new job id %d reuses or precedes the ids before the failover (max %d)", id, slices.Max(ids))
	}
	c.checkFakeInstances(ctx)

	// The role moves on purpose, to the candidate that has not led yet.
	var third devcluster.Candidate
	for _, cand := range c.st.Candidates() {
		if cand.Proc != first.Proc && cand.Proc != second.Proc {
			third = cand
		}
	}
	oldPID := c.proc(second.Proc).PID
	oldLogOff := c.logSize(second.Proc)
	out, err := c.corralAt(second.Socket, "cluster", "master-failover", "--to", third.Name)
	if err != nil {
		t.Fatalf("master-failover: %v\n%s", err, out)
	}
	if !strings.Contains(out, "handed the master role over to "+third.Name) {
		t.Fatalf("master-failover printed %q", out)
	}
	if got := c.leader(30 * time.Second); got.Proc != third.Proc {
		t.Fatalf("after master-failover --to %s, %s leads", third.Name, got.Proc)
	}
	c.useMaster(third)
	// The old master says why its term ended and stands by again, in the
	// same process: a candidate never leaves for good.
	waitFor(t, 30*time.Second, "the old master to log that its term ended", func() bool {
		return strings.Contains(c.logSince(second.Proc, oldLogOff), "master term ended")
	})
	if gone(oldPID) {
		t.Fatalf("the old master (pid %d) exited after handing over", oldPID)
	}
	c.wantStandby(second, third.Name)
	out, err = c.corralAt(second.Socket, "cluster", "info")
	if err == nil || !strings.Contains(out, "this corrald is a standby; the master is "+third.Name) {
		t.Fatalf("corral cluster info on a standby: %v\n%s", err, out)
	}
	c.mustSucceed(map[string]any{"OP_ID": "OP_INSTANCE_STARTUP", "instance_name": "f4"})
	c.checkFakeInstances(ctx)
}

// leader waits, bounded, for a corrald to answer as master.
func (c *cluster) leader(limit time.Duration) devcluster.Candidate {
	c.t.Helper()
	l, err := devcluster.WaitLeader(context.Background(), c.st, limit)
	if err != nil {
		c.dumpLogs()
		c.t.Fatalf("no master: %v", err)
	}
	return l
}

// useMaster points c.luxi at cand's socket.
func (c *cluster) useMaster(cand devcluster.Candidate) {
	c.t.Helper()
	if c.luxi != nil {
		c.luxi.Close()
	}
	cl, err := luxi.Dial(context.Background(), cand.Socket)
	if err != nil {
		c.t.Fatal(err)
	}
	c.luxi = cl
}

// wantStandby waits, bounded, until cand answers as a standby naming the
// master.
func (c *cluster) wantStandby(cand devcluster.Candidate, master string) {
	c.t.Helper()
	want := "this corrald is a standby; the master is " + master + " at "
	var last error
	waitFor(c.t, 30*time.Second, cand.Proc+" to stand by", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		cl, err := luxi.Dial(ctx, cand.Socket)
		if err != nil {
			last = err
			return false
		}
		defer cl.Close()
		_, last = cl.SubmitJob(ctx, []any{map[string]any{"OP_ID": "OP_TEST_DELAY", "duration": 0}})
		return last != nil && strings.Contains(last.Error(), want)
	})
	if last == nil || !devcluster.IsStandbyError(last) {
		c.t.Fatalf("%s: %v", cand.Proc, last)
	}
}

// corralAt runs the CLI against the corrald on sock.
func (c *cluster) corralAt(sock string, args ...string) (string, error) {
	cmd := exec.Command(filepath.Join(binDir, "corral"), args...)
	cmd.Env = append(os.Environ(), "CORRAL_STATE_DIR="+c.st.StateDir, "CORRAL_RUN_DIR="+c.st.RunDir, "CORRAL_SOCKET="+sock)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// checkFakeInstances compares the configuration with the fake hypervisors:
// an instance that is up runs on its primary node and nowhere else; one
// that is down runs nowhere.
func (c *cluster) checkFakeInstances(ctx context.Context) {
	c.t.Helper()
	rows, err := c.luxi.QueryInstances(ctx, nil, []string{"name", "admin_state", "pnode"}, false)
	if err != nil {
		c.t.Fatal(err)
	}
	where := map[string][]string{}
	for _, node := range c.st.Nodes {
		for _, ri := range c.nodeInstances(node) {
			if ri.State == hypervisor.StateRunning {
				where[ri.Name] = append(where[ri.Name], node)
			}
		}
	}
	for _, r := range rows {
		name, admin, pnode := fmt.Sprint(r[0]), fmt.Sprint(r[1]), fmt.Sprint(r[2])
		var want []string
		if admin == "up" {
			want = []string{pnode}
		}
		if got := where[name]; !slices.Equal(got, want) {
			c.t.Errorf("instance %s is %s with primary %s, but runs on %v", name, admin, pnode, got)
		}
		delete(where, name)
	}
	for name, nodes := range where {
		c.t.Errorf("%s runs on %v but is not in the configuration", name, nodes)
	}
}
