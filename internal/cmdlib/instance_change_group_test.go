package cmdlib

import (
	"testing"

	"github.com/corral/corral/internal/ecode"
)

func TestInstanceChangeGroup(t *testing.T) {
	e := evacEnv(t) // web1..3 (diskless) on n1, data1 (file) on n2; all in default
	defer e.close()
	shutdown(t, e, "web1")
	st, res := e.run(t, map[string]any{"OP_ID": "OP_INSTANCE_CHANGE_GROUP", "instance_name": "web1"})
	checkErr(t, st, res, ecode.Inval, "There are no possible target groups")

	for _, op := range []map[string]any{groupOp("OP_GROUP_ADD", "rack2", nil),
		{"OP_ID": "OP_GROUP_ASSIGN_NODES", "group_name": "rack2", "nodes": []any{"n3"}}} {
		if st, res := e.run(t, op); st != "success" {
			t.Fatalf("%v: %s %v", op["OP_ID"], st, res)
		}
	}
	for _, c := range []struct {
		op    map[string]any
		class ecode.Class
		msg   string
	}{
		{map[string]any{"OP_ID": "OP_INSTANCE_CHANGE_GROUP", "instance_name": "web1", "target_groups": []any{"default"}}, ecode.Inval, "Can't use group(s) '"},
		{map[string]any{"OP_ID": "OP_INSTANCE_CHANGE_GROUP", "instance_name": "web1", "target_groups": []any{"nosuch"}}, ecode.NoEnt, "Node group 'nosuch' not known"},
		{map[string]any{"OP_ID": "OP_INSTANCE_CHANGE_GROUP", "instance_name": "ghost"}, ecode.NoEnt, "ghost"},
		{map[string]any{"OP_ID": "OP_INSTANCE_CHANGE_GROUP", "instance_name": "data1"}, execError, "Unable to evacuate instances data1"},
	} {
		st, res := e.run(t, c.op)
		checkErr(t, st, res, c.class, c.msg)
	}

	st, res = e.run(t, map[string]any{"OP_ID": "OP_INSTANCE_CHANGE_GROUP", "instance_name": "web1", "target_groups": []any{"rack2"}})
	if st != "success" {
		t.Fatalf("change group: %s %v", st, res)
	}
	ids := jobIDs(t, res)
	if len(ids) != 1 {
		t.Fatalf("%d jobs, want one", len(ids))
	}
	e.runChildren(t, ids)
	if p := e.primaries()["web1"]; p != "n3" {
		t.Fatalf("web1 on %s after change-group, want n3 (rack2's only node)", p)
	}
	for _, n := range []string{"web2", "web3"} {
		if p := e.primaries()[n]; p != "n1" {
			t.Errorf("%s moved to %s: change-group moves only its instance", n, p)
		}
	}
	// And back, to every group but its own.
	st, res = e.run(t, map[string]any{"OP_ID": "OP_INSTANCE_CHANGE_GROUP", "instance_name": "web1"})
	if st != "success" {
		t.Fatalf("change group back: %s %v", st, res)
	}
	e.runChildren(t, jobIDs(t, res))
	if p := e.primaries()["web1"]; p == "n3" {
		t.Fatalf("web1 still on %s after a change-group to the other groups", p)
	}
}
