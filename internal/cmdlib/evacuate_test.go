package cmdlib

import (
	"encoding/json"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/corral/corral/internal/config"
	"github.com/corral/corral/internal/ecode"
	"github.com/corral/corral/internal/nodeapi"
)

// execError matches an OpExecError in checkErr (it carries no class).
const execError = ecode.Class("OpExecError")

// evacEnv is a three-node cluster (n1, n2, n3) with three diskless
// instances on n1 (web1 running) and a file instance on n2.
func evacEnv(t *testing.T) *env {
	t.Helper()
	e := openEnv(t, filepath.Join(t.TempDir(), "s.db"), newNodeDouble(), true)
	must := func(op map[string]any) {
		t.Helper()
		if st, res := e.run(t, op); st != "success" {
			t.Fatalf("%v: %s %v", op["OP_ID"], st, res)
		}
	}
	must(map[string]any{"OP_ID": "OP_NODE_ADD", "node_name": "n2", "primary_ip": "127.0.0.3"})
	must(map[string]any{"OP_ID": "OP_NODE_ADD", "node_name": "n3", "primary_ip": "127.0.0.4"})
	for i, name := range []string{"web1", "web2", "web3"} {
		must(create(name, map[string]any{"pnode": "n1", "disk_template": "diskless", "disks": []any{}, "start": i == 0}))
	}
	must(create("data1", map[string]any{"pnode": "n2", "start": false}))
	return e
}

// jobIDs reads Ganeti's {"jobs": [[true, id], ...]} result.
func jobIDs(t *testing.T, res []any) []int64 {
	t.Helper()
	var m map[string]any
	switch v := res[0].(type) {
	case json.RawMessage:
		_ = json.Unmarshal(v, &m)
	case map[string]any:
		m = v
	}
	l, ok := m["jobs"].([]any)
	if !ok {
		t.Fatalf("result %v is not {\"jobs\": [...]}", res)
	}
	var ids []int64
	for _, j := range l {
		p, _ := j.([]any)
		if len(p) != 2 || p[0] != true {
			t.Fatalf("job entry %v is not [true, id]", j)
		}
		ids = append(ids, int64(p[1].(float64)))
	}
	return ids
}

// runChildren waits for every child job and requires success.
func (e *env) runChildren(t *testing.T, ids []int64) {
	t.Helper()
	for _, id := range ids {
		if st, res := e.wait(t, id); st != "success" {
			t.Fatalf("child job %d: %s %v", id, st, res)
		}
	}
}

// primaries maps instance name -> primary node name.
func (e *env) primaries() map[string]string {
	out := map[string]string{}
	for _, i := range e.cfg.Instances() {
		n, _ := e.cfg.Node(i.PrimaryNode)
		out[i.Name] = n.Name
	}
	return out
}

func TestNodeEvacuateMovesInstancesAwayFromDrainedAndEvacuatedNodes(t *testing.T) {
	e := evacEnv(t)
	defer e.close()
	// A running instance would migrate live, which the node double does
	// not do (the migration tests cover it): web1 is stopped first.
	shutdown(t, e, "web1")
	if st, res := e.run(t, map[string]any{"OP_ID": "OP_NODE_SET_PARAMS", "node_name": "n3", "drained": true}); st != "success" {
		t.Fatalf("drain: %s %v", st, res)
	}
	st, res := e.run(t, map[string]any{"OP_ID": "OP_NODE_EVACUATE", "node_name": "n1", "mode": "primary-only"})
	if st != "success" {
		t.Fatalf("evacuate: %s %v", st, res)
	}
	ids := jobIDs(t, res)
	if len(ids) != 3 {
		t.Fatalf("%d jobs, want one per instance of n1", len(ids))
	}
	e.runChildren(t, ids)
	for name, node := range e.primaries() {
		if strings.HasPrefix(name, "web") && node != "n2" {
			t.Errorf("%s is on %s, want n2 (n1 evacuated, n3 drained)", name, node)
		}
	}
	// A failover of a running instance stops it on its node and starts
	// it on the target.
	for _, op := range []map[string]any{
		{"OP_ID": "OP_INSTANCE_STARTUP", "instance_name": "web1"},
		{"OP_ID": "OP_NODE_SET_PARAMS", "node_name": "n3", "drained": false},
		{"OP_ID": "OP_INSTANCE_FAILOVER", "instance_name": "web1", "target_node": "n3"},
	} {
		if st, res := e.run(t, op); st != "success" {
			t.Fatalf("%v: %s %v", op["OP_ID"], st, res)
		}
	}
	web1, _ := e.cfg.Instance("web1")
	if p := e.primaries()["web1"]; p != "n3" || !e.node.running[web1.UUID] || e.node.count(nodeapi.InstanceShutdown) < 2 {
		t.Errorf("web1 not restarted on n3: on %s running=%v shutdowns=%d", p, e.node.running[web1.UUID], e.node.count(nodeapi.InstanceShutdown))
	}
	if web1.AdminState != config.AdminUp {
		t.Errorf("web1 admin state %s after a failover", web1.AdminState)
	}
}

func shutdown(t *testing.T, e *env, name string) {
	t.Helper()
	if st, res := e.run(t, map[string]any{"OP_ID": "OP_INSTANCE_SHUTDOWN", "instance_name": name}); st != "success" {
		t.Fatalf("shutdown %s: %s %v", name, st, res)
	}
}

func TestNodeEvacuateRefusesLocalDisks(t *testing.T) {
	e := evacEnv(t)
	defer e.close()
	st, res := e.run(t, map[string]any{"OP_ID": "OP_NODE_EVACUATE", "node_name": "n2", "mode": "primary-only"})
	checkErr(t, st, res, execError, "Unable to evacuate instances data1")
	if p := e.primaries()["data1"]; p != "n2" {
		t.Errorf("data1 moved to %s", p)
	}
	st, res = e.run(t, map[string]any{"OP_ID": "OP_NODE_EVACUATE", "node_name": "n2", "mode": "sideways"})
	checkErr(t, st, res, ecode.Inval, "Invalid evacuation mode")
	st, res = e.run(t, map[string]any{"OP_ID": "OP_NODE_EVACUATE", "node_name": "n2", "mode": "primary-only", "remote_node": "n3"})
	checkErr(t, st, res, ecode.Inval, "only secondary instances")
	// Corral's templates have no secondaries: nothing to do.
	st, res = e.run(t, map[string]any{"OP_ID": "OP_NODE_EVACUATE", "node_name": "n2", "mode": "secondary-only"})
	if st != "success" || len(jobIDs(t, res)) != 0 {
		t.Errorf("secondary-only: %s %v", st, res)
	}
}

func TestNodeEvacuateWithHail(t *testing.T) {
	if _, err := os.Stat("/usr/lib/ganeti/iallocators/hail"); err != nil {
		t.Skipf("hail is not installed: %v", err)
	}
	e := evacEnv(t)
	defer e.close()
	shutdown(t, e, "web1")
	st, res := e.run(t, map[string]any{"OP_ID": "OP_NODE_EVACUATE", "node_name": "n1", "mode": "primary-only", "iallocator": "hail"})
	if st != "success" {
		t.Fatalf("evacuate with hail: %s %v", st, res)
	}
	ids := jobIDs(t, res)
	if len(ids) != 3 {
		t.Fatalf("%d jobs from hail's answer, want 3", len(ids))
	}
	e.runChildren(t, ids)
	for name, node := range e.primaries() {
		if strings.HasPrefix(name, "web") && node == "n1" {
			t.Errorf("%s still on n1 after hail's evacuation", name)
		}
	}
}

func TestNodeMigrateAndGroupEvacuate(t *testing.T) {
	e := evacEnv(t)
	defer e.close()
	// As in Ganeti, node migrate makes one migration per instance, and a
	// stopped instance does not migrate ("please use failover"); node
	// evacuate fails them over.
	shutdown(t, e, "web1")
	st, res := e.run(t, map[string]any{"OP_ID": "OP_NODE_MIGRATE", "node_name": "n1", "target_node": "n3"})
	if st != "success" {
		t.Fatalf("node migrate: %s %v", st, res)
	}
	for _, id := range jobIDs(t, res) {
		st, res := e.wait(t, id)
		checkErr(t, st, res, ecode.State, "is not running, cannot migrate")
	}
	st, res = e.run(t, map[string]any{"OP_ID": "OP_NODE_EVACUATE", "node_name": "n1", "mode": "primary-only"})
	if st != "success" {
		t.Fatalf("node evacuate: %s %v", st, res)
	}
	e.runChildren(t, jobIDs(t, res))
	for _, n := range []string{"web1", "web2", "web3"} {
		if p := e.primaries()[n]; p == "n1" {
			t.Errorf("%s still on n1 after node evacuate", n)
		}
	}
	// A second group holding n1: evacuating the default group moves the
	// diskless instances there; the file instance cannot move.
	for _, op := range []map[string]any{groupOp("OP_GROUP_ADD", "rack2", nil),
		{"OP_ID": "OP_GROUP_ASSIGN_NODES", "group_name": "rack2", "nodes": []any{"n1"}}} {
		if st, res := e.run(t, op); st != "success" {
			t.Fatalf("%v: %s %v", op["OP_ID"], st, res)
		}
	}
	st, res = e.run(t, map[string]any{"OP_ID": "OP_GROUP_EVACUATE", "group_name": "default"})
	checkErr(t, st, res, execError, "Unable to evacuate instances data1")
	if st, res := e.run(t, map[string]any{"OP_ID": "OP_INSTANCE_REMOVE", "instance_name": "data1"}); st != "success" {
		t.Fatalf("remove: %s %v", st, res)
	}
	st, res = e.run(t, map[string]any{"OP_ID": "OP_GROUP_EVACUATE", "group_name": "default", "sequential": true, "force_failover": true})
	if st != "success" {
		t.Fatalf("group evacuate: %s %v", st, res)
	}
	ids := jobIDs(t, res)
	e.runChildren(t, ids)
	var where []string
	for _, n := range []string{"web1", "web2", "web3"} {
		where = append(where, e.primaries()[n])
	}
	sort.Strings(where)
	if strings.Join(where, ",") != "n1,n1,n1" {
		t.Errorf("after the group evacuation the instances are on %v, want all on n1 (rack2)", where)
	}
	st, res = e.run(t, map[string]any{"OP_ID": "OP_GROUP_EVACUATE", "group_name": "rack2", "target_groups": []any{"rack2"}})
	checkErr(t, st, res, ecode.Inval, "cannot be a target of its own evacuation")
}

func TestFailoverChecks(t *testing.T) {
	e := evacEnv(t)
	defer e.close()
	for _, c := range []struct {
		op    map[string]any
		class ecode.Class
		msg   string
	}{
		{map[string]any{"OP_ID": "OP_INSTANCE_FAILOVER", "instance_name": "data1", "target_node": "n3"}, ecode.State, "does not allow failover"},
		{map[string]any{"OP_ID": "OP_INSTANCE_FAILOVER", "instance_name": "web2", "target_node": "n1"}, ecode.Inval, "already on node n1"},
		{map[string]any{"OP_ID": "OP_INSTANCE_MIGRATE", "instance_name": "web2", "target_node": "n2"}, ecode.State, "is not running, cannot migrate"},
		{map[string]any{"OP_ID": "OP_INSTANCE_FAILOVER", "instance_name": "web2", "iallocator": "nosuch"}, ecode.Inval, "not found in the iallocator search path"},
	} {
		st, res := e.run(t, c.op)
		checkErr(t, st, res, c.class, c.msg)
	}
	if st, res := e.run(t, map[string]any{"OP_ID": "OP_NODE_SET_PARAMS", "node_name": "n3", "offline": true}); st != "success" {
		t.Fatalf("offline: %s %v", st, res)
	}
	st, res := e.run(t, map[string]any{"OP_ID": "OP_INSTANCE_FAILOVER", "instance_name": "web2", "target_node": "n3"})
	checkErr(t, st, res, ecode.State, "offline node n3")
	if st, res := e.run(t, map[string]any{"OP_ID": "OP_INSTANCE_FAILOVER", "instance_name": "web2"}); st != "success" {
		t.Fatalf("failover with the default allocator: %s %v", st, res)
	}
	if p := e.primaries()["web2"]; p != "n2" {
		t.Errorf("web2 on %s, want n2 (n1 its old primary, n3 offline)", p)
	}
}
