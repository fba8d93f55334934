package e2e

import (
	"testing"
	"time"
)

// TestAutoFailoverOfflineNodeOnly: with auto_failover, the watcher fails
// over a running instance of a node declared offline, and starts it on
// another node; a node that only stops answering is never reason enough,
// and without auto_failover (the default) nothing moves.
func TestAutoFailoverOfflineNodeOnly(t *testing.T) {
	c := newCluster(t, clusterOpts{nodes: 2, hypervisors: []string{"fake"}, watcher: time.Second})
	nodes := c.nodeNames()
	dead := nodes[2]
	op := disklessOp("af1", dead)
	op["start"] = true
	c.mustSucceed(op)
	corral := func(args ...string) {
		t.Helper()
		if out, err := c.corral(args...); err != nil {
			t.Fatalf("corral %v: %v\n%s", args, err, out)
		}
	}
	stays := func(why string) {
		t.Helper()
		time.Sleep(4 * time.Second) // four watcher rounds
		if p := c.primaries()["af1"]; p != dead {
			t.Fatalf("af1 moved to %s while %s", p, why)
		}
	}
	corral("cluster", "modify", "--auto-failover", "yes")
	c.stopDaemon("corral-node " + dead)
	stays("its node only stopped answering")
	corral("cluster", "modify", "--auto-failover", "no")
	corral("node", "modify", dead, "--offline", "yes")
	stays("auto_failover was off")
	corral("cluster", "modify", "--auto-failover", "yes")
	deadline := time.Now().Add(60 * time.Second)
	for {
		p := c.primaries()["af1"]
		if p != dead {
			running := false
			for _, r := range c.nodeInstances(p) {
				if r.Name == "af1" {
					running = true
				}
			}
			if running {
				t.Logf("af1 failed over to %s and runs there", p)
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("af1 still on %s (or not running on its new node) 60 s after auto_failover was enabled", p)
		}
		time.Sleep(500 * time.Millisecond)
	}
}
