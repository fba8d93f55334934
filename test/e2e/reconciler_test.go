package e2e

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/corral/corral/internal/failpoint"
)

// TestReconcilerPauseAndLeftDiskJob leaves a disk on a node the way
// TestNodeKillAfterDiskCreate does, pauses the left-disk-removal
// reconciler with the CLI, restarts corrald and sees it still paused: the
// node is back but the disk stays and no job is submitted. Resumed, the
// reconciler hands the removal to a job that `corral job list` and
// `corral job info` show, marked as the reconciler's in its reason trail.
func TestReconcilerPauseAndLeftDiskJob(t *testing.T) {
	c := newCluster(t, clusterOpts{nodes: 1, hypervisors: []string{"fake"}, watcher: time.Second})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	storageDir := filepath.Join(c.dir, nkNode, "storage", "file")
	must := func(args ...string) string {
		t.Helper()
		out, err := c.corral(args...)
		if err != nil {
			t.Fatalf("corral %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return out
	}

	c.stopDaemon(nkDaemon)
	off := c.logSize(nkDaemon)
	p := c.startDaemon(nkDaemon, failpoint.EnvVar+"="+failpoint.NodeDiskCreated+"=1")
	id, err := c.luxi.SubmitJob(ctx, []any{createOp("rc-disk", nkNode, 8)})
	if err != nil {
		t.Fatal(err)
	}
	c.waitInjectedCrash(nkDaemon, p.PID, off, failpoint.NodeDiskCreated, 1)
	status, res := c.waitJob(id, nkJobMax)
	nkCheckOutcome(t, id, "OP_INSTANCE_CREATE rc-disk", status, res, false)
	waitFor(t, 30*time.Second, "node info to report the disk left on "+nkNode, func() bool {
		return strings.Contains(must("node", "info", nkNode), "- DisksLeft: True (RemovalFailed) since ")
	})

	if out := must("cluster", "reconciler", "pause", "left-disk-removal"); out != "Reconciler left-disk-removal is paused until resumed.\n" {
		t.Fatalf("pause: %q", out)
	}
	if out, err := c.corral("cluster", "reconciler", "pause", "left-disks"); err == nil || !strings.Contains(out, "Unknown reconciler 'left-disks'; the reconcilers are: coe-autoheal, coe-autoscale, coe-health, instance-restart, ") {
		t.Fatalf("pausing an unknown reconciler: %v\n%s", err, out)
	}
	c.killCorrald()
	c.restartCorrald()
	line := reconcilerLine(t, must("cluster", "reconciler", "list"), "left-disk-removal")
	if f := strings.Fields(line); len(f) < 3 || f[1] != "1s" || f[2] != "resumed" {
		t.Fatalf("after a restart the reconciler list shows %q, want left-disk-removal paused until resumed", line)
	}
	if f := strings.Fields(reconcilerLine(t, must("cluster", "reconciler", "list"), "instance-restart")); f[2] != "-" {
		t.Fatalf("instance-restart is paused too: %v", f)
	}

	c.startDaemon(nkDaemon)
	// Rounds are due every second: give several the chance to run.
	time.Sleep(4 * time.Second)
	if files := diskFiles(t, storageDir); len(files) != 1 {
		t.Fatalf("while the reconciler is paused %d disk files are on %s, want the 1 left", len(files), nkNode)
	}
	if ids := jobsNamed(t, must("job", "list", "--no-headers", "--separator", " ", "-o", "id,summary"), "CLUSTER_REMOVE_LEFT_DISKS"); len(ids) != 0 {
		t.Fatalf("jobs %v submitted while the reconciler is paused", ids)
	}

	if out := must("cluster", "reconciler", "resume", "left-disk-removal"); out != "Reconciler left-disk-removal is no longer paused.\n" {
		t.Fatalf("resume: %q", out)
	}
	waitFor(t, 30*time.Second, "the left disk to be removed", func() bool { return len(diskFiles(t, storageDir)) == 0 })
	var jobs []string
	waitFor(t, 10*time.Second, "the removal job to be listed as succeeded", func() bool {
		jobs = jobsNamed(t, must("job", "list", "--finished", "--no-headers", "--separator", " ", "-o", "id,summary"), "CLUSTER_REMOVE_LEFT_DISKS")
		return len(jobs) > 0
	})
	info := must("job", "info", jobs[0])
	for _, want := range []string{"Status: success", "- OP_CLUSTER_REMOVE_LEFT_DISKS", "reconciler:left-disk-removal",
		"Removed disk 0 of removed instance rc-disk from node " + nkNode} {
		if !strings.Contains(info, want) {
			t.Errorf("job info %s lacks %q:\n%s", jobs[0], want, info)
		}
	}
	waitFor(t, 10*time.Second, "node info to report the disk removed", func() bool {
		return strings.Contains(must("node", "info", nkNode), "- DisksLeft: False (AllRemoved) since ")
	})
	// Nothing left: later rounds submit no job.
	time.Sleep(3 * time.Second)
	if again := jobsNamed(t, must("job", "list", "--no-headers", "--separator", " ", "-o", "id,summary"), "CLUSTER_REMOVE_LEFT_DISKS"); len(again) != len(jobs) {
		t.Errorf("jobs %v after the disk was removed, want only %v", again, jobs)
	}
	f := strings.Fields(reconcilerLine(t, must("cluster", "reconciler", "list"), "left-disk-removal"))
	if len(f) < 7 || f[2] != "-" || f[len(f)-1] != "1" {
		t.Errorf("left-disk-removal in the list: %v, want unpaused with 1 job submitted", f)
	}
}

// reconcilerLine is the named reconciler's row of `corral cluster
// reconciler list`.
func reconcilerLine(t *testing.T, list, name string) string {
	t.Helper()
	for _, l := range strings.Split(list, "\n") {
		if strings.HasPrefix(l, name+" ") {
			return l
		}
	}
	t.Fatalf("no reconciler %s in:\n%s", name, list)
	return ""
}

// jobsNamed picks the ids of the jobs whose summary is summary from the
// rows "ID SUMMARY" of `corral job list`.
func jobsNamed(t *testing.T, list, summary string) []string {
	t.Helper()
	var ids []string
	for _, l := range strings.Split(strings.TrimSpace(list), "\n") {
		if f := strings.Fields(l); len(f) == 2 && f[1] == summary {
			ids = append(ids, f[0])
		}
	}
	return ids
}
