package e2e

import (
	"context"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/corral/corral/internal/failpoint"
)

// TestNodeKillAfterDiskCreate kills the node daemon right after it created
// a create's disk, before it answers. The create fails naming the node and
// cannot remove the disk; once the node daemon is back, the watcher removes
// it, so no disk file is left that no instance owns.
func TestNodeKillAfterDiskCreate(t *testing.T) {
	c := newCluster(t, clusterOpts{nodes: 1, hypervisors: []string{"fake"}, watcher: time.Second})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	storageDir := filepath.Join(c.dir, nkNode, "storage", "file")

	c.stopDaemon(nkDaemon)
	off := c.logSize(nkDaemon)
	p := c.startDaemon(nkDaemon, failpoint.EnvVar+"="+failpoint.NodeDiskCreated+"=1")
	id, err := c.luxi.SubmitJob(ctx, []any{createOp("nk-disk", nkNode, 8)})
	if err != nil {
		t.Fatal(err)
	}
	c.waitInjectedCrash(nkDaemon, p.PID, off, failpoint.NodeDiskCreated, 1)
	status, res := c.waitJob(id, nkJobMax)
	nkCheckOutcome(t, id, "OP_INSTANCE_CREATE nk-disk", status, res, false)
	if files := diskFiles(t, storageDir); len(files) != 1 {
		t.Fatalf("the node created %d disk files before it died, want 1: %v", len(files), files)
	}
	rows, err := c.luxi.QueryInstances(ctx, []string{"nk-disk"}, []string{"name"}, false)
	if err == nil && len(rows) > 0 {
		t.Fatalf("the failed create left its instance in the configuration: %v", rows)
	}

	// While the node is down, its status says what it still holds.
	nodeInfo := func() string {
		out, err := c.corral("node", "info", nkNode)
		if err != nil {
			t.Fatalf("node info: %v\n%s", err, out)
		}
		return out
	}
	waitFor(t, 30*time.Second, "node info to report the disk left on "+nkNode, func() bool {
		return strings.Contains(nodeInfo(), "- DisksLeft: True (RemovalFailed) since ")
	})

	corraldOff := c.logSize("corrald")
	c.startDaemon(nkDaemon)
	waitFor(t, 30*time.Second, "the watcher to remove the disk the failed create left", func() bool {
		return len(diskFiles(t, storageDir)) == 0
	})
	waitFor(t, 10*time.Second, "the watcher to log the removal", func() bool {
		return strings.Contains(c.logSince("corrald", corraldOff), `msg="watcher: removed a disk left by a failed change" node=`+nkNode+` instance=nk-disk`)
	})
	waitFor(t, 10*time.Second, "node info to report the disk removed", func() bool {
		return strings.Contains(nodeInfo(), "- DisksLeft: False (AllRemoved) since ")
	})
	// The reconciler removed it through a job, marked as its own.
	out, err := c.corral("job", "list", "--no-headers", "--separator", " ", "-o", "id,summary")
	if err != nil {
		t.Fatalf("job list: %v\n%s", err, out)
	}
	jobs := jobsNamed(t, out, "CLUSTER_REMOVE_LEFT_DISKS")
	if len(jobs) == 0 {
		t.Fatalf("no removal job in the queue:\n%s", out)
	}
	if info, err := c.corral("job", "info", jobs[len(jobs)-1]); err != nil || !strings.Contains(info, "reconciler:left-disk-removal") {
		t.Errorf("job info %s: %v\n%s", jobs[len(jobs)-1], err, info)
	}
	// Removed once: the record is gone, so later rounds do not try again.
	time.Sleep(3 * time.Second)
	if n := strings.Count(c.logSince("corrald", corraldOff), "left by a failed change"); n != 1 {
		t.Errorf("the watcher reported %d removals or failures of the left disk, want 1:\n%s", n, c.logSince("corrald", corraldOff))
	}
}

// diskFiles lists the disk images under a node's file storage directory.
func diskFiles(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.HasSuffix(path, ".raw") {
			out = append(out, path)
		}
		return nil
	})
	if err != nil && !strings.Contains(err.Error(), "no such file") {
		t.Fatalf("listing %s: %v", dir, err)
	}
	return out
}
