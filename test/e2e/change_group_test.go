package e2e

import (
	"strings"
	"testing"
)

// TestInstanceChangeGroup: two nodes in two groups; `corral instance
// change-group` moves a stopped diskless instance to the other group's
// node with the built-in allocator, and back without --to; an instance
// whose disk is on its node is refused before anything moves.
func TestInstanceChangeGroup(t *testing.T) {
	requireRoot(t)
	c := newCluster(t, clusterOpts{nodes: 1, hypervisors: []string{"fake"}})
	nodes := c.nodeNames()
	if len(nodes) != 2 {
		t.Fatalf("nodes %v, want 2", nodes)
	}
	a, b := nodes[0], nodes[1]
	for _, args := range [][]string{{"group", "add", "rack2"}, {"group", "assign-nodes", "rack2", b}} {
		if out, err := c.corral(args...); err != nil {
			t.Fatalf("corral %v: %v\n%s", args, err, out)
		}
	}
	c.mustSucceed(disklessOp("cg1", a))
	c.mustSucceed(disklessOp("cg2", a))

	if out, err := c.corral("instance", "change-group", "--to", "default", "cg1"); err == nil || !strings.Contains(out, "Can't use group(s)") {
		t.Errorf("change-group to the instance's own group: %v\n%s", err, out)
	}
	out, err := c.corral("instance", "change-group", "--to", "rack2", "cg1")
	if err != nil {
		t.Fatalf("change-group --to rack2: %v\n%s", err, out)
	}
	if strings.Count(out, ": success") != 1 {
		t.Errorf("want one successful child job in:\n%s", out)
	}
	if p := c.primaries(); p["cg1"] != b || p["cg2"] != a {
		t.Fatalf("after change-group cg1 is on %s and cg2 on %s, want %s and %s", p["cg1"], p["cg2"], b, a)
	}
	if out, err := c.corral("instance", "change-group", "cg1"); err != nil {
		t.Fatalf("change-group to every other group: %v\n%s", err, out)
	}
	if p := c.primaries()["cg1"]; p != a {
		t.Fatalf("cg1 on %s after changing back, want %s", p, a)
	}

	c.mustSucceed(createOp("local1", a, 16))
	if out, err := c.corral("instance", "change-group", "local1"); err == nil || !strings.Contains(out, "Unable to evacuate instances local1") {
		t.Errorf("change-group of a file instance: %v\n%s", err, out)
	}
	if p := c.primaries()["local1"]; p != a {
		t.Errorf("local1 moved to %s by a refused change-group", p)
	}
}
