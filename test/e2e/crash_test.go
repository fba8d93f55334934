package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/corral/corral/internal/luxi"
)

// TestMasterKillLosesNoJob kills corrald with SIGKILL in the middle of a
// batch of jobs, restarts it, and checks that every acknowledged job is
// still there and finishes, and the configuration is intact.
func TestMasterKillLosesNoJob(t *testing.T) {
	c := newCluster(t, clusterOpts{nodes: 2, hypervisors: []string{"fake"}})
	ctx := context.Background()
	for i := 0; i < 3; i++ {
		c.mustSucceed(createOp(fmt.Sprintf("keep%d", i), "", 8))
	}
	var jobs [][]any
	for i := 0; i < 40; i++ {
		jobs = append(jobs, []any{map[string]any{"OP_ID": "OP_TEST_DELAY", "duration": 0.3}})
	}
	for i := 0; i < 4; i++ {
		jobs = append(jobs, []any{createOp(fmt.Sprintf("crash%d", i), "", 8)})
	}
	res, err := c.luxi.SubmitManyJobs(ctx, jobs)
	if err != nil {
		t.Fatal(err)
	}
	var ids []int64
	for _, r := range res {
		if !r.OK {
			t.Fatalf("submission refused: %v", r.Err)
		}
		ids = append(ids, r.JobID)
	}
	time.Sleep(700 * time.Millisecond) // let some run, some finish, some wait
	c.killCorrald()
	c.restartCorrald()

	rows, err := c.luxi.QueryJobs(ctx, ids, []string{"id", "status"})
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range rows {
		if r == nil {
			t.Fatalf("acknowledged job %d lost after SIGKILL", ids[i])
		}
	}
	deadline, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	for _, id := range ids {
		status, out, err := luxi.WaitForJob(deadline, c.luxi, id, nil)
		if err != nil && status == "" {
			t.Fatalf("job %d: %v", id, err)
		}
		if status != "success" {
			t.Errorf("job %d ended %s after the restart: %v", id, status, out)
		}
	}
	// Every instance is present exactly once with its disks.
	insts, err := c.luxi.QueryInstances(ctx, nil, []string{"name", "status", "disk.sizes"}, false)
	if err != nil {
		t.Fatal(err)
	}
	if len(insts) != 7 {
		t.Fatalf("want 7 instances after the restart, got %v", insts)
	}
	for _, r := range insts {
		if r[1] != "running" {
			t.Errorf("instance %v: status %v", r[0], r[1])
		}
	}
	// New ids are above the old ones: none reused.
	id, err := c.luxi.SubmitJob(ctx, []any{map[string]any{"OP_ID": "OP_TEST_DELAY", "duration": 0}})
	if err != nil {
		t.Fatal(err)
	}
	if id <= ids[len(ids)-1] {
		t.Fatalf("job id %d reused (last before crash %d)", id, ids[len(ids)-1])
	}
}
