package cmdlib

import (
	"strings"
	"testing"

	"github.com/corral/corral/internal/ecode"
	"github.com/corral/corral/internal/nodeapi"
)

func recreateOp(extra map[string]any) map[string]any {
	op := map[string]any{"OP_ID": "OP_INSTANCE_RECREATE_DISKS", "instance_name": "web1"}
	for k, v := range extra {
		op[k] = v
	}
	return op
}

// callsOn lists the node calls of method made on node since call number from.
func callsOn(n *diskNode, from int, node, method string) int {
	n.mu.Lock()
	defer n.mu.Unlock()
	c := 0
	for _, call := range n.calls[from:] {
		if strings.HasPrefix(call, node+" "+method+" ") {
			c++
		}
	}
	return c
}

func TestRecreateDisksRefusesRunningInstance(t *testing.T) {
	e, node, _ := diskEnv(t)
	defer e.close()
	before := len(node.calls)
	st, res := e.run(t, recreateOp(nil))
	checkErr(t, st, res, ecode.State, "Instance 'web1' is marked to be up, cannot recreate disks")
	if n := callsOn(node, before, "n1", nodeapi.DiskRemove) + callsOn(node, before, "n1", nodeapi.DiskCreate); n != 0 {
		t.Fatalf("%d disk calls for a refused recreate", n)
	}
	// Stopped in the configuration but still running on its node.
	inst, _ := e.cfg.Instance("web1")
	inst.AdminState = "down"
	setInstance(t, e, inst)
	st, res = e.run(t, recreateOp(nil))
	checkErr(t, st, res, ecode.State, "Instance web1 is running, cannot recreate disks")
}

func TestRecreateDisksRemovesAndCreatesWithNewSize(t *testing.T) {
	e, node, inst := diskEnv(t)
	defer e.close()
	shutdown(t, e, "web1")
	node.setSize(inst, 0, 37) // a disk that is not what the configuration says

	before := len(node.calls)
	if st, res := e.run(t, recreateOp(nil)); st != "success" {
		t.Fatalf("recreate: %s %v", st, res)
	}
	if node.size(inst, 0) != 100 {
		t.Fatalf("disk is %d MiB on the node after recreate, want the recorded 100", node.size(inst, 0))
	}
	if r, c := callsOn(node, before, "n1", nodeapi.DiskRemove), callsOn(node, before, "n1", nodeapi.DiskCreate); r != 1 || c != 1 {
		t.Fatalf("%d removes and %d creates, want one each", r, c)
	}

	st, res := e.run(t, recreateOp(map[string]any{"disks": []any{[]any{0, map[string]any{"size": 300, "mode": "ro"}}}}))
	if st != "success" {
		t.Fatalf("recreate with a new size: %s %v", st, res)
	}
	got, _ := e.cfg.Instance("web1")
	if got.Disks[0].SizeMiB != 300 || got.Disks[0].Mode != "ro" || node.size(inst, 0) != 300 {
		t.Fatalf("after recreate with size 300 ro: config %d MiB %s, node %d MiB", got.Disks[0].SizeMiB, got.Disks[0].Mode, node.size(inst, 0))
	}
	// The older form: a list of indices.
	if st, res := e.run(t, recreateOp(map[string]any{"disks": []any{0}})); st != "success" {
		t.Fatalf("recreate by index list: %s %v", st, res)
	}
}

func TestRecreateDisksRefusals(t *testing.T) {
	e, node, inst := diskEnv(t)
	defer e.close()
	shutdown(t, e, "web1")
	must := func(op map[string]any) {
		t.Helper()
		if st, res := e.run(t, op); st != "success" {
			t.Fatalf("%v: %s %v", op["OP_ID"], st, res)
		}
	}
	must(map[string]any{"OP_ID": "OP_NODE_ADD", "node_name": "n2", "primary_ip": "127.0.0.3"})
	cases := []struct {
		name  string
		op    map[string]any
		class ecode.Class
		msg   string
	}{
		{"bad index", recreateOp(map[string]any{"disks": []any{3}}), ecode.Inval, "Invalid disk index '3'"},
		{"duplicate", recreateOp(map[string]any{"disks": []any{[]any{0, map[string]any{}}, []any{0, map[string]any{"size": 5}}}}), ecode.Inval, "specified more than once: 0"},
		{"unmodifiable", recreateOp(map[string]any{"disks": []any{[]any{0, map[string]any{"name": "x"}}}}), ecode.Inval, "unmodifyable parameter(s): name"},
		{"spindles", recreateOp(map[string]any{"disks": []any{[]any{0, map[string]any{"spindles": 2}}}}), ecode.Inval, "exclusive storage is not active"},
		{"bad mode", recreateOp(map[string]any{"disks": []any{[]any{0, map[string]any{"mode": "rx"}}}}), ecode.Inval, "invalid mode"},
		{"both", recreateOp(map[string]any{"nodes": []any{"n2"}, "iallocator": "hail"}), ecode.Inval, "Do not specify both, iallocator and node"},
		{"two nodes", recreateOp(map[string]any{"nodes": []any{"n1", "n2"}}), ecode.Inval, "currently has 1 nodes, but 2 replacement nodes"},
		{"no room", recreateOp(map[string]any{"disks": []any{[]any{0, map[string]any{"size": 900000}}}}), ecode.NoRes, "Not enough disk space"},
	}
	before := len(node.calls)
	for _, c := range cases {
		st, res := e.run(t, c.op)
		checkErr(t, st, res, c.class, c.msg)
	}
	if n := callsOn(node, before, "n1", nodeapi.DiskRemove) + callsOn(node, before, "n2", nodeapi.DiskCreate); n != 0 {
		t.Fatalf("%d disk calls for refused recreates", n)
	}
	if got, _ := e.cfg.Instance("web1"); got.Disks[0].SizeMiB != 100 || node.size(inst, 0) != 100 {
		t.Fatalf("refusals changed the disk: config %d, node %d", got.Disks[0].SizeMiB, node.size(inst, 0))
	}
	// A diskless instance has nothing to recreate.
	must(create("bare", map[string]any{"disk_template": "diskless", "disks": []any{}, "start": false}))
	st, res := e.run(t, map[string]any{"OP_ID": "OP_INSTANCE_RECREATE_DISKS", "instance_name": "bare"})
	checkErr(t, st, res, ecode.Inval, "Instance 'bare' has no disks")
}

func TestRecreateDisksOnNewNode(t *testing.T) {
	e, node, inst := diskEnv(t)
	defer e.close()
	shutdown(t, e, "web1")
	if st, res := e.run(t, map[string]any{"OP_ID": "OP_NODE_ADD", "node_name": "n2", "primary_ip": "127.0.0.3"}); st != "success" {
		t.Fatalf("node add: %s %v", st, res)
	}
	if st, res := e.run(t, create("two", map[string]any{"disks": []any{map[string]any{"size": 10}, map[string]any{"size": 20}}, "start": false})); st != "success" {
		t.Fatalf("create two: %s %v", st, res)
	}
	st, res := e.run(t, map[string]any{"OP_ID": "OP_INSTANCE_RECREATE_DISKS", "instance_name": "two", "nodes": []any{"n2"}, "disks": []any{1}})
	checkErr(t, st, res, ecode.Inval, "Can't recreate disks partially and change the nodes")

	before := len(node.calls)
	if st, res := e.run(t, recreateOp(map[string]any{"nodes": []any{"n2"}})); st != "success" {
		t.Fatalf("recreate on n2: %s %v", st, res)
	}
	if p := e.primaries()["web1"]; p != "n2" {
		t.Fatalf("web1 on %s after recreate on n2", p)
	}
	if c, old := callsOn(node, before, "n2", nodeapi.DiskCreate), callsOn(node, before, "n1", nodeapi.DiskRemove); c != 1 || old != 0 {
		t.Fatalf("%d creates on n2 and %d removes on n1, want 1 and 0 (the old node's disks are left, as Ganeti)", c, old)
	}
	if node.size(inst, 0) != 100 {
		t.Fatalf("disk %d MiB", node.size(inst, 0))
	}
	// The built-in allocator chooses a node in the instance's group.
	if st, res := e.run(t, recreateOp(map[string]any{"iallocator": "."})); st != "success" {
		t.Fatalf("recreate with the allocator: %s %v", st, res)
	}
}

// TestRecreateDisksFromOfflineNode: with the old primary offline, its
// instance's state cannot be asked, and as in Ganeti a new node may be
// given even for an instance marked up; without one the offline node is
// refused.
func TestRecreateDisksFromOfflineNode(t *testing.T) {
	e, node, _ := diskEnv(t)
	defer e.close()
	for _, op := range []map[string]any{
		{"OP_ID": "OP_NODE_ADD", "node_name": "n2", "primary_ip": "127.0.0.3"},
		create("lost", map[string]any{"pnode": "n2"}),
		{"OP_ID": "OP_NODE_SET_PARAMS", "node_name": "n2", "offline": true},
	} {
		if st, res := e.run(t, op); st != "success" {
			t.Fatalf("%v: %s %v", op["OP_ID"], st, res)
		}
	}
	st, res := e.run(t, map[string]any{"OP_ID": "OP_INSTANCE_RECREATE_DISKS", "instance_name": "lost"})
	checkErr(t, st, res, ecode.State, "offline node n2")

	before := len(node.calls)
	if st, res := e.run(t, map[string]any{"OP_ID": "OP_INSTANCE_RECREATE_DISKS", "instance_name": "lost", "nodes": []any{"n1"}}); st != "success" {
		t.Fatalf("recreate away from the offline node: %s %v", st, res)
	}
	if p := e.primaries()["lost"]; p != "n1" {
		t.Fatalf("lost on %s, want n1", p)
	}
	if c, off := callsOn(node, before, "n1", nodeapi.DiskCreate), callsOn(node, before, "n2", nodeapi.DiskRemove); c != 1 || off != 0 {
		t.Fatalf("%d creates on n1, %d calls to remove on the offline n2; want 1 and 0", c, off)
	}
}
