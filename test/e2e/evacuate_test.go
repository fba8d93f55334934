package e2e

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strings"
	"testing"
	"time"
)

// disklessOp creates a stopped diskless fake instance with one NIC (hail
// holds instances to the policy's minimum of one) on node: its data is
// nowhere, so it may move by failover.
func disklessOp(name, node string) map[string]any {
	return map[string]any{"OP_ID": "OP_INSTANCE_CREATE", "instance_name": name, "disk_template": "diskless",
		"disks": []any{}, "nics": []any{map[string]any{}}, "os_type": "tiny+default", "hypervisor": "fake",
		"beparams": map[string]any{"memory": 128}, "pnode": node, "start": false}
}

// primaries maps instance name -> primary node.
func (c *cluster) primaries() map[string]string {
	c.t.Helper()
	rows, err := c.luxi.QueryInstances(context.Background(), nil, []string{"name", "pnode"}, false)
	if err != nil {
		c.t.Fatal(err)
	}
	out := map[string]string{}
	for _, r := range rows {
		out[r[0].(string)] = r[1].(string)
	}
	return out
}

func (c *cluster) nodeNames() []string {
	c.t.Helper()
	rows, err := c.luxi.QueryNodes(context.Background(), nil, []string{"name"}, false)
	if err != nil {
		c.t.Fatal(err)
	}
	var out []string
	for _, r := range rows {
		out = append(out, r[0].(string))
	}
	sort.Strings(out)
	return out
}

// TestNodeEvacuateBuiltinAndHail: three nodes, three instances on one;
// `corral node evacuate` moves them with the built-in allocator, never to
// the drained node, then `-I hail` (Debian's hail, unchanged) moves them
// again. The instances move by failover of stopped fake instances: live
// migration is not part of this build.
func TestNodeEvacuateBuiltinAndHail(t *testing.T) {
	if _, err := os.Stat("/usr/lib/ganeti/iallocators/hail"); err != nil {
		t.Skipf("hail (ganeti-htools) is not installed: %v", err)
	}
	c := newCluster(t, clusterOpts{nodes: 2, hypervisors: []string{"fake"}})
	nodes := c.nodeNames()
	if len(nodes) != 3 {
		t.Fatalf("nodes %v, want 3", nodes)
	}
	a, b, drained := nodes[0], nodes[1], nodes[2]
	names := []string{"ev1", "ev2", "ev3"}
	for _, n := range names {
		c.mustSucceed(disklessOp(n, a))
	}
	if out, err := c.corral("node", "modify", drained, "--drained", "yes"); err != nil {
		t.Fatalf("drain: %v\n%s", err, out)
	}
	out, err := c.corral("node", "evacuate", "--primary-only", a)
	if err != nil {
		t.Fatalf("evacuate %s: %v\n%s", a, err, out)
	}
	t.Logf("built-in evacuation:\n%s", out)
	for _, n := range names {
		if p := c.primaries()[n]; p != b {
			t.Errorf("%s on %s after evacuating %s with %s drained, want %s", n, p, a, drained, b)
		}
	}
	out, err = c.corral("node", "evacuate", "-p", "-I", "hail", b)
	if err != nil {
		t.Fatalf("evacuate %s with hail: %v\n%s", b, err, out)
	}
	t.Logf("hail evacuation:\n%s", out)
	if strings.Count(out, ": success") != 3 {
		t.Errorf("want three successful child jobs in:\n%s", out)
	}
	for _, n := range names {
		if p := c.primaries()[n]; p != a {
			t.Errorf("%s on %s after hail evacuated %s (%s drained), want %s", n, p, b, drained, a)
		}
	}
	// An instance whose disk lives on its node stops the evacuation
	// before anything moves.
	c.mustSucceed(createOp("local1", a, 16))
	if out, err := c.corral("node", "evacuate", "-p", a); err == nil || !strings.Contains(out, "Unable to evacuate instances local1") {
		t.Errorf("evacuating a node with a file instance: %v\n%s", err, out)
	}
	for _, n := range names {
		if p := c.primaries()[n]; p != a {
			t.Errorf("%s moved to %s by a refused evacuation", n, p)
		}
	}
	// node failover: one failover job per primary instance.
	c.mustSucceed(map[string]any{"OP_ID": "OP_INSTANCE_REMOVE", "instance_name": "local1"})
	if out, err := c.corral("node", "failover", a); err != nil {
		t.Fatalf("node failover: %v\n%s", err, out)
	}
	for _, n := range names {
		if p := c.primaries()[n]; p != b {
			t.Errorf("%s on %s after node failover of %s, want %s", n, p, a, b)
		}
	}
}

// TestEvacuationTime measures `corral node evacuate` of ten stopped fake
// diskless instances (BENCHMARKS.md): run with
// CORRAL_BENCH_EVACUATE=1 go test -run TestEvacuationTime -v ./test/e2e/
func TestEvacuationTime(t *testing.T) {
	if os.Getenv("CORRAL_BENCH_EVACUATE") == "" {
		t.Skip("a measurement: set CORRAL_BENCH_EVACUATE=1")
	}
	c := newCluster(t, clusterOpts{nodes: 2, hypervisors: []string{"fake"}})
	nodes := c.nodeNames()
	from := nodes[0]
	for i := 0; i < 10; i++ {
		c.mustSucceed(disklessOp(fmt.Sprintf("bench%d", i), from))
	}
	for round, alloc := range []string{"", "hail", ""} {
		args := []string{"node", "evacuate", "-p", from}
		if alloc != "" {
			args = append(args, "-I", alloc)
		}
		start := time.Now()
		if out, err := c.corral(args...); err != nil {
			t.Fatalf("evacuate: %v\n%s", err, out)
		}
		el := time.Since(start)
		name := alloc
		if name == "" {
			name = "built-in"
		}
		t.Logf("round %d: evacuating 10 instances off %s with the %s allocator took %v", round, from, name, el)
		for _, p := range c.primaries() {
			if p == from {
				t.Fatalf("an instance is still on %s", from)
			}
		}
		// Bring them back for the next round.
		for n := range c.primaries() {
			c.mustSucceed(map[string]any{"OP_ID": "OP_INSTANCE_FAILOVER", "instance_name": n, "target_node": from})
		}
	}
}
