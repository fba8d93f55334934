package cmdlib

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/corral/corral/internal/jobqueue"
	"github.com/corral/corral/internal/nodeapi"
)

// nodeDelay is an OP_TEST_DELAY whose step waits on a node RPC (which the
// node double can hold), with the BGL and the node lock taken shared.
func nodeDelay(unsafe bool) map[string]any {
	return map[string]any{"OP_ID": "OP_TEST_DELAY", "duration": 0.01, "on_master": false, "on_nodes": []any{"n1"},
		"no_locks": false, "unsafe_to_repeat": unsafe}
}

func (e *env) submitOp(t *testing.T, op map[string]any) int64 {
	t.Helper()
	raw, _ := json.Marshal(op)
	id, err := e.q.Submit(context.Background(), []json.RawMessage{raw})
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// TestStopInStep stops the master while the delay step runs and starts a
// new one on the same store. Declared unsafe to repeat, the step is not run
// again: the op fails with a message naming it, and its locks are free for
// the next job, which needs the BGL exclusively. Declared safe, the step
// runs again and the op succeeds.
func TestStopInStep(t *testing.T) {
	cases := []struct {
		unsafe   bool
		status   string
		reruns   int
		messages []string
	}{
		{unsafe: true, status: "error", reruns: 0, messages: []string{
			`OP_TEST_DELAY: step 0 (\"delay\") was interrupted`, "may or may not have taken effect",
			"Check nothing: an OP_TEST_DELAY only sleeps"}},
		{unsafe: false, status: "success", reruns: 1},
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("unsafe=%v", c.unsafe), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "s.db")
			node := newNodeDouble()
			node.block[nodeapi.TestDelay] = make(chan struct{})
			e := openEnv(t, path, node, true)
			id := e.submitOp(t, nodeDelay(c.unsafe))
			select {
			case <-node.entered:
			case <-time.After(10 * time.Second):
				t.Fatal("the delay never reached its node")
			}
			e.close()

			node2 := newNodeDouble()
			e2 := openEnv(t, path, node2, false)
			defer e2.close()
			st, res := e2.wait(t, id)
			b, _ := json.Marshal(res)
			if st != c.status {
				t.Fatalf("job after the restart: %s %s, want %s", st, b, c.status)
			}
			if got := node2.count(nodeapi.TestDelay); got != c.reruns {
				t.Errorf("the step ran %d times after the restart, want %d", got, c.reruns)
			}
			for _, m := range c.messages {
				if !strings.Contains(string(b), m) {
					t.Errorf("result %s lacks %q", b, m)
				}
			}
			if st, res := e2.run(t, map[string]any{"OP_ID": "OP_CLUSTER_SET_PARAMS", "candidate_pool_size": 7}); st != "success" {
				t.Fatalf("a job needing the BGL exclusively after the interrupted op: %s %v", st, res)
			}
			if got := e2.cfg.Cluster().CandidatePoolSize; got != 7 {
				t.Errorf("candidate pool size %d after the set-params job, want 7", got)
			}
		})
	}
}

// TestUnsafeStepCostsOneWrite: an uninterrupted unsafe step succeeds as a
// safe one does, with exactly one store write more (its begin record), and
// leaves no begun step in the finished job's record.
func TestUnsafeStepCostsOneWrite(t *testing.T) {
	e := openEnv(t, filepath.Join(t.TempDir(), "s.db"), newNodeDouble(), true)
	defer e.close()
	ctx := context.Background()
	writes := func(unsafe bool) (int64, int64) {
		t.Helper()
		before, err := e.st.Revision(ctx)
		if err != nil {
			t.Fatal(err)
		}
		id := e.submitOp(t, nodeDelay(unsafe))
		if st, res := e.wait(t, id); st != "success" {
			t.Fatalf("delay (unsafe=%v): %s %v", unsafe, st, res)
		}
		after, err := e.st.Revision(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return id, after - before
	}
	writes(false) // the first job also allocates the id block
	_, safe := writes(false)
	id, unsafe := writes(true)
	if unsafe != safe+1 {
		t.Errorf("an unsafe step cost %d writes, a safe one %d; want exactly one more", unsafe, safe)
	}
	kv, err := e.st.Get(ctx, fmt.Sprintf("%sjobs/%020d", jobqueue.DefaultPrefix, id))
	if err != nil || kv == nil {
		t.Fatalf("job record: %v %v", kv, err)
	}
	if strings.Contains(string(kv.Value), `"began"`) {
		t.Errorf("finished job still records a begun step: %s", kv.Value)
	}
}
