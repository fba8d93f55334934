package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/corral/corral/internal/failpoint"
)

// nkNode is the node whose daemon the test kills; corrald's own node stays up.
const (
	nkNode   = "node2"
	nkDaemon = "corral-node " + nkNode
	nkJobMax = time.Minute // a job on a dead node must end well within this
)

// TestNodeKillDuringInstanceStartStop kills the node daemon while it starts
// or stops an instance (at its failpoints, and once with a plain SIGKILL
// while a start job runs), restarts it, and checks that every job ended in a
// clear state naming the node, and that once the watcher has run each
// instance's recorded state matches what the node's hypervisor really runs.
func TestNodeKillDuringInstanceStartStop(t *testing.T) {
	c := newCluster(t, clusterOpts{nodes: 1, hypervisors: []string{"fake"}, watcher: time.Second})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	// The watcher waits until the node is back for good: a restart it
	// submitted would pass the armed failpoints and kill the node early.
	until := float64(time.Now().Add(time.Hour).Unix())
	if err := c.luxi.SetWatcherPause(ctx, &until); err != nil {
		t.Fatal(err)
	}

	create := func(name string, start bool) map[string]any {
		op := createOp(name, nkNode, 8)
		op["disk_template"], op["disks"], op["start"] = "diskless", []any{}, start
		return op
	}
	// nk-stop runs and gets stopped; the others are down and get started.
	c.mustSucceed(create("nk-stop", true), create("nk-start", false), create("nk-started", false),
		create("nk-sigkill", false))

	cases := []struct {
		point, inst string
		op          map[string]any
		// admin is the admin state the job leaves; the watcher then makes
		// the node agree with it.
		admin string
	}{
		// Shutdown records "down" first: the node stopped the instance and
		// died before answering.
		{failpoint.NodeInstanceStopped, "nk-stop", instOp("OP_INSTANCE_SHUTDOWN", "nk-stop"), "down"},
		// Startup records "up" first: the node died before starting it,
		// so the watcher starts it.
		{failpoint.NodeInstanceStart, "nk-start", instOp("OP_INSTANCE_STARTUP", "nk-start"), "up"},
		// The node started it and died before answering.
		{failpoint.NodeInstanceStarted, "nk-started", instOp("OP_INSTANCE_STARTUP", "nk-started"), "up"},
		// A create that starts the instance: the node started it and died
		// before answering. The create fails, and as it cannot stop the
		// instance it leaves it marked up.
		{failpoint.NodeInstanceStarted, "nk-create", create("nk-create", true), "up"},
	}
	want := map[string]string{}
	c.stopDaemon(nkDaemon)
	for _, tc := range cases {
		off := c.logSize(nkDaemon)
		p := c.startDaemon(nkDaemon, failpoint.EnvVar+"="+tc.point+"=1")
		id, err := c.luxi.SubmitJob(ctx, []any{tc.op})
		if err != nil {
			t.Fatal(err)
		}
		c.waitInjectedCrash(nkDaemon, p.PID, off, tc.point, 1)
		status, res := c.waitJob(id, nkJobMax)
		nkCheckOutcome(t, id, fmt.Sprint(tc.op["OP_ID"], " ", tc.inst), status, res, false)
		want[tc.inst] = tc.admin
	}

	// A plain SIGKILL while a start job runs: the job waits on the master
	// first, so the node dies while it is running, before its start.
	c.startDaemon(nkDaemon)
	id, err := c.luxi.SubmitJob(ctx, []any{map[string]any{"OP_ID": "OP_TEST_DELAY", "duration": 0.5}, instOp("OP_INSTANCE_STARTUP", "nk-sigkill")})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "the start job to run", func() bool {
		rows, err := queryJobs(ctx, c.luxi, []int64{id}, []string{"status"})
		return err == nil && rows[0] != nil && rows[0][0] != "queued" && rows[0][0] != "waiting"
	})
	c.killDaemon(nkDaemon)
	status, res := c.waitJob(id, nkJobMax)
	nkCheckOutcome(t, id, "OP_INSTANCE_STARTUP nk-sigkill", status, res, true)
	// As in Ganeti, a start first asks the node for its free memory, so on a
	// dead node it fails before it records the wish: the instance stays down.
	want["nk-sigkill"] = "down"

	// The node comes back; the watcher runs again and restarts what should
	// run. Its restart of nk-start shows it has run with the node up.
	c.startDaemon(nkDaemon)
	if err := c.luxi.SetWatcherPause(ctx, nil); err != nil {
		t.Fatal(err)
	}
	fields := []string{"name", "uuid", "admin_state", "oper_state", "status"}
	var rows [][]any
	waitFor(t, 30*time.Second, "the watcher to start nk-start again", func() bool {
		rows, err = c.luxi.QueryInstances(ctx, nil, fields, false)
		return err == nil && slices.ContainsFunc(rows, func(r []any) bool { return r[0] == "nk-start" && r[4] == "running" })
	})
	if !strings.Contains(c.logSince("corrald", 0), `msg="watcher: restarting instance" instance=nk-start`) {
		t.Errorf("nk-start runs again, but not through the watcher")
	}
	// Every up instance the watcher found down has its restart job done.
	waitFor(t, 30*time.Second, "the watcher's restarts to finish", func() bool {
		rows, err = c.luxi.QueryInstances(ctx, nil, fields, false)
		if err != nil {
			return false
		}
		for _, r := range rows {
			if r[2] == "up" && r[4] != "running" {
				return false
			}
		}
		return true
	})
	nkCheckAgree(t, c, rows, want)
}

// nkCheckOutcome checks that a job on a node that died ended in a clear
// state: an error naming the node, or (when the node may have answered
// before it died) success.
func nkCheckOutcome(t *testing.T, id int64, what, status string, res []any, mayWin bool) {
	t.Helper()
	msg := toJSON(res)
	switch {
	case status == "success" && mayWin:
		t.Logf("job %d (%s) finished before the node died", id, what)
	case status != "error":
		t.Errorf("job %d (%s) ended %s, want error: %s", id, what, status, msg)
	case !strings.Contains(msg, nkNode):
		t.Errorf("job %d (%s) failed without naming node %s: %s", id, what, nkNode, msg)
	default:
		t.Logf("job %d (%s) failed as expected: %s", id, what, msg)
	}
}

// nkCheckAgree compares every instance's recorded state with what the
// node's fake hypervisor runs.
func nkCheckAgree(t *testing.T, c *cluster, rows [][]any, want map[string]string) {
	t.Helper()
	running := map[string]string{} // name -> uuid on the node
	for _, r := range c.nodeInstances(nkNode) {
		running[r.Name] = r.UUID
	}
	if len(rows) != len(want) {
		t.Errorf("want %d instances, got %v", len(want), rows)
	}
	for _, r := range rows {
		name, uuid := fmt.Sprint(r[0]), fmt.Sprint(r[1])
		admin, oper, status := r[2], r[3], r[4]
		onNode, ok := running[name]
		switch {
		case admin != want[name]:
			t.Errorf("instance %s: admin state %v, want %s", name, admin, want[name])
		case admin == "up" && (!ok || onNode != uuid || oper != true || status != "running"):
			t.Errorf("instance %s should run: recorded oper_state %v status %v; node runs %q (uuid %s)", name, oper, status, onNode, uuid)
		case admin == "down" && (ok || oper != false || status != "ADMIN_down"):
			t.Errorf("instance %s should be down: recorded oper_state %v status %v; node runs %q", name, oper, status, onNode)
		}
		delete(running, name)
	}
	for name := range running {
		t.Errorf("node %s runs instance %s, which the configuration does not know", nkNode, name)
	}
	t.Logf("instances after the watcher: %s", toJSON(rows))
}
