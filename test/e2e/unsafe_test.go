package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/corral/corral/internal/devcluster"
	"github.com/corral/corral/internal/failpoint"
	"github.com/corral/corral/internal/storecfg"
)

// unsafeDelay is an OP_TEST_DELAY on the master that takes the BGL (shared),
// its one step declared unsafe to repeat or not.
func unsafeDelay(secs float64, unsafe bool) map[string]any {
	return map[string]any{"OP_ID": "OP_TEST_DELAY", "duration": secs, "no_locks": false, "unsafe_to_repeat": unsafe}
}

// bglJob needs the BGL exclusively: it can run only once no op holds it.
func bglJob() map[string]any {
	return map[string]any{"OP_ID": "OP_CLUSTER_SET_PARAMS", "candidate_pool_size": 10}
}

// interruptedMsg are the parts of the failure of an op whose unsafe delay
// step was cut off.
var interruptedMsg = []string{`OP_TEST_DELAY: step 0 (\"delay\") was interrupted`, "may or may not have taken effect",
	"Check nothing: an OP_TEST_DELAY only sleeps"}

// TestUnsafeStepMasterCrash kills corrald at step-began, the point where a
// step is about to run (for an unsafe step, once its begin is durable), and
// restarts it without failpoints: an op cut off in a step declared unsafe
// to repeat fails with a message naming the step, and its locks go back;
// one cut off in a safe step, or after its unsafe step committed, resumes
// and succeeds as before.
func TestUnsafeStepMasterCrash(t *testing.T) {
	c := newCluster(t, clusterOpts{nodes: 1, hypervisors: []string{"fake"}, watcher: time.Hour})
	cases := []struct {
		name   string
		ops    []map[string]any
		hit    int
		status string
		result []string // in the job's result
		log    string   // in the job's log
	}{
		{name: "unsafe", ops: []map[string]any{unsafeDelay(0.2, true)}, hit: 1, status: "error",
			result: interruptedMsg, log: "may or may not have taken effect"},
		{name: "safe", ops: []map[string]any{unsafeDelay(0.2, false)}, hit: 1, status: "success",
			log: "resumed after a master restart at step 0"},
		// Killed before the second op's (safe) step: the first op's unsafe
		// step committed with the op's success and is not in doubt.
		{name: "unsafe-committed", ops: []map[string]any{unsafeDelay(0.2, true), unsafeDelay(0.2, false)}, hit: 2,
			status: "success", log: "resumed after a master restart at step 0"},
	}
	for _, tc := range cases {
		spec := fmt.Sprintf("%s=%d", failpoint.StepBegan, tc.hit)
		c.stopDaemon("corrald")
		off := c.logSize("corrald")
		p := c.startDaemon("corrald", failpoint.EnvVar+"="+spec)
		ops := make([]any, len(tc.ops))
		for i, o := range tc.ops {
			ops[i] = o
		}
		id, err := c.luxi.SubmitJob(context.Background(), ops)
		if err != nil {
			t.Fatalf("%s: submit: %v", tc.name, err)
		}
		c.waitInjectedCrash("corrald", p.PID, off, failpoint.StepBegan, tc.hit)

		off = c.logSize("corrald")
		c.startDaemon("corrald")
		status, res := c.waitJob(id, time.Minute)
		if status != tc.status {
			t.Fatalf("%s: job %d ended %s after the restart, want %s: %s", tc.name, id, status, tc.status, toJSON(res))
		}
		for _, want := range tc.result {
			if !strings.Contains(toJSON(res), want) {
				t.Errorf("%s: job %d's result lacks %q: %s", tc.name, id, want, toJSON(res))
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		rows, err := queryJobs(ctx, c.luxi, []int64{id}, []string{"oplog"})
		cancel()
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if logs := toJSON(rows[0][0]); !strings.Contains(logs, tc.log) {
			t.Errorf("%s: job %d's log lacks %q: %s", tc.name, id, tc.log, logs)
		}
		interrupted := strings.Contains(c.logSince("corrald", off), "interrupted in a step that is unsafe to repeat")
		if interrupted != (tc.status == "error") {
			t.Errorf("%s: corrald logged an interrupted unsafe step: %v, want %v", tc.name, interrupted, tc.status == "error")
		}
		// The op's locks were given back: a job needing the BGL
		// exclusively runs.
		c.mustSucceed(bglJob())
		t.Logf("%s: %s killed corrald in job %d, which then ended %s", tc.name, spec, id, status)
	}
}

// TestUnsafeStepTakeover kills the master of a two-candidate cluster while
// an unsafe step sleeps: the standby that takes over fails the op with the
// same message instead of sleeping again, and then runs other jobs.
func TestUnsafeStepTakeover(t *testing.T) {
	requireEtcd(t)
	c := newClusterWith(t, devcluster.Options{Nodes: 0, Hypervisors: []string{"fake"}, WatcherEvery: time.Hour,
		Store: storecfg.BackendEtcd, EtcdMembers: 1, Masters: 2, CorraldArgs: []string{"--election-ttl", failoverTTL}})
	first := c.leader(30 * time.Second)
	// Two rounds: the first round's log entry is written inside the step,
	// so once it shows, the step's begin is durable.
	op := unsafeDelay(60, true)
	op["repeat"] = 2
	id := c.submitOne(op)
	waitFor(t, 30*time.Second, "the unsafe step to start", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		rows, err := queryJobs(ctx, c.luxi, []int64{id}, []string{"oplog"})
		return err == nil && strings.Contains(toJSON(rows[0][0]), "Test delay iteration 1/2")
	})
	c.killDaemon(first.Proc)
	c.luxi.Close()
	c.luxi = nil
	second := c.leader(30 * time.Second)
	if second.Proc == first.Proc {
		t.Fatalf("%s leads again after its SIGKILL", second.Proc)
	}
	c.useMaster(second)
	// Well under the 120 s the step would sleep if it ran again.
	status, res := c.waitJob(id, 45*time.Second)
	if status != "error" {
		t.Fatalf("job %d ended %s after the takeover, want error: %s", id, status, toJSON(res))
	}
	for _, want := range interruptedMsg {
		if !strings.Contains(toJSON(res), want) {
			t.Errorf("job %d's result lacks %q: %s", id, want, toJSON(res))
		}
	}
	c.mustSucceed(bglJob())
	c.mustSucceed(unsafeDelay(0, true))
	t.Logf("job %d failed on %s after %s died in its unsafe step", id, second.Name, first.Name)
}
