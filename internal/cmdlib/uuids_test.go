package cmdlib

import (
	"path/filepath"
	"testing"

	"github.com/corral/corral/internal/ecode"
)

// TestUUIDParamsHonoured: uuid parameters are checked against the names as
// Ganeti's ExpandNames does (a mismatch is resource_not_unique), and a
// uuid alone finds its object.
func TestUUIDParamsHonoured(t *testing.T) {
	e := openEnv(t, filepath.Join(t.TempDir(), "s.db"), newNodeDouble(), true)
	defer e.close()
	n1, _ := e.cfg.Node("n1")
	if st, res := e.run(t, create("web1", map[string]any{"start": false, "pnode_uuid": n1.UUID})); st != "success" {
		t.Fatalf("create with pnode_uuid alone: %s %v", st, res)
	}
	web1, ok := e.cfg.Instance("web1")
	if !ok || web1.PrimaryNode != n1.UUID {
		t.Fatalf("web1: %+v", web1)
	}
	if st, res := e.run(t, create("web2", map[string]any{"start": false, "pnode": "n1", "pnode_uuid": "0000-not-n1"})); st == "success" {
		t.Fatalf("create with a pnode_uuid of another node: %v", res)
	} else {
		checkErr(t, st, res, ecode.NotUnique, "does not match the expected uuid '0000-not-n1'")
	}
	st, res := e.run(t, create("web3", map[string]any{"start": false, "pnode_uuid": "0000-nowhere"}))
	checkErr(t, st, res, ecode.NoEnt, "uuid '0000-nowhere' (pnode_uuid) not known")
	// A uuid parameter holding a name does not find the object by name.
	st, res = e.run(t, create("web4", map[string]any{"start": false, "pnode_uuid": "n1"}))
	checkErr(t, st, res, ecode.NoEnt, "(pnode_uuid) not known")

	st, res = e.run(t, map[string]any{"OP_ID": "OP_INSTANCE_RENAME", "instance_name": "web1", "instance_uuid": n1.UUID, "new_name": "web9"})
	checkErr(t, st, res, ecode.NotUnique, "does not match")
	if st, res := e.run(t, map[string]any{"OP_ID": "OP_INSTANCE_RENAME", "instance_name": "web1", "instance_uuid": web1.UUID, "new_name": "web9"}); st != "success" {
		t.Fatalf("rename with the right uuid: %s %v", st, res)
	}
	st, res = e.run(t, map[string]any{"OP_ID": "OP_NODE_SET_PARAMS", "node_name": "n1", "node_uuid": web1.UUID, "drained": false})
	checkErr(t, st, res, ecode.NotUnique, "does not match")
	if _, ok := e.cfg.Instance("web2"); ok {
		t.Fatal("a refused create left an instance")
	}
}

// TestCreateGaneti30Defaults: a create as Ganeti's client sends it without
// a disk template takes the cluster's first enabled one; group_name and
// iallocator are honoured or refused.
func TestCreateGaneti30Defaults(t *testing.T) {
	e := openEnv(t, filepath.Join(t.TempDir(), "s.db"), newNodeDouble(), true)
	defer e.close()
	op := create("web1", map[string]any{"start": false, "disk_template": nil, "group_name": "default",
		"iallocator": ".", "forthcoming": false, "commit": false, "name_check": true, "ip_check": true})
	if st, res := e.run(t, op); st != "success" {
		t.Fatalf("create: %s %v", st, res)
	}
	if i, _ := e.cfg.Instance("web1"); i.DiskTemplate != "file" {
		t.Fatalf("disk template %q, want the cluster's first enabled (file)", i.DiskTemplate)
	}
	st, res := e.run(t, create("web2", map[string]any{"start": false, "group_name": "nosuch"}))
	checkErr(t, st, res, ecode.NoEnt, "Node group 'nosuch' not known")
	if st, res := e.run(t, groupOp("OP_GROUP_ADD", "rack2", nil)); st != "success" {
		t.Fatalf("group add: %s %v", st, res)
	}
	st, res = e.run(t, create("web2", map[string]any{"start": false, "group_name": "rack2", "pnode": "n1"}))
	checkErr(t, st, res, ecode.Inval, "not in node group 'rack2'")
	st, res = e.run(t, create("web2", map[string]any{"start": false, "group_name": "rack2"}))
	checkErr(t, st, res, ecode.NoRes, "Can't find a node")
	st, res = e.run(t, create("web2", map[string]any{"start": false, "iallocator": "dumb"}))
	checkErr(t, st, res, ecode.Inval, "Iallocator 'dumb' not found in the iallocator search path")
	st, res = e.run(t, create("web2", map[string]any{"start": false, "forthcoming": true}))
	checkErr(t, st, res, ecode.Inval, `parameter \"forthcoming\"`)
	if _, ok := e.cfg.Instance("web2"); ok {
		t.Fatal("a refused create left an instance")
	}
}
