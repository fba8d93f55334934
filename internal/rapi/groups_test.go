package rapi

import (
	"reflect"
	"testing"
)

// TestGroupWrites checks each node group write: status, and the opcode
// parameters the submitted job carries (reason trail left out).
func TestGroupWrites(t *testing.T) {
	tests := []routeCase{
		{"add", "POST", "/2/groups", `{"group_name":"g1","alloc_policy":"last_resort"}`, asAdmin, 200, `101`,
			map[string]any{"OP_ID": "OP_GROUP_ADD", "group_name": "g1", "alloc_policy": "last_resort"}},
		{"add legacy name", "POST", "/2/groups?dry-run=1", `{"name":"g1","alloc_policy":null}`, asAdmin, 200, `101`,
			map[string]any{"OP_ID": "OP_GROUP_ADD", "group_name": "g1", "alloc_policy": nil, "dry_run": true}},
		{"add version 1", "POST", "/2/groups", `{"__version__":1,"group_name":"g1","ndparams":{"ssh_port":22}}`, asAdmin, 200, `101`,
			map[string]any{"OP_ID": "OP_GROUP_ADD", "group_name": "g1", "ndparams": map[string]any{"ssh_port": 22.0}}},
		{"add version 2", "POST", "/2/groups", `{"__version__":2,"group_name":"g1"}`, asAdmin, 400, `Unsupported request data version`, nil},
		{"add both names", "POST", "/2/groups", `{"name":"a","group_name":"b"}`, asAdmin, 400, `renamed`, nil},
		{"add no name", "POST", "/2/groups", `{"alloc_policy":"preferred"}`, asAdmin, 400, `group_name`, nil},
		{"add no body", "POST", "/2/groups", ``, asAdmin, 400, `not a dictionary`, nil},
		{"add bad key", "POST", "/2/groups", `{"group_name":"g","bogus":1}`, asAdmin, 400, `bogus`, nil},
		{"add dry_run in body", "POST", "/2/groups?dry-run=1", `{"group_name":"g","dry_run":false}`, asAdmin, 400, `static parameters dry_run`, nil},
		{"add read user", "POST", "/2/groups", `{"group_name":"g"}`, asViewer, 403, `Forbidden`, nil},
		{"remove", "DELETE", "/2/groups/g1?dry-run=1", ``, asAdmin, 200, `101`,
			map[string]any{"OP_ID": "OP_GROUP_REMOVE", "group_name": "g1", "dry_run": true}},
		{"remove anonymous", "DELETE", "/2/groups/g1", ``, nil, 401, `Unauthorized`, nil},
		{"modify", "PUT", "/2/groups/g1/modify", `{"alloc_policy":"unallocable","custom_ndparams":{"ssh_port":2}}`, asAdmin, 200, `101`,
			map[string]any{"OP_ID": "OP_GROUP_SET_PARAMS", "group_name": "g1", "alloc_policy": "unallocable", "ndparams": map[string]any{"ssh_port": 2.0}}},
		{"modify both names", "PUT", "/2/groups/g1/modify", `{"custom_ipolicy":{},"ipolicy":{}}`, asAdmin, 400, `renamed`, nil},
		{"modify name clash", "PUT", "/2/groups/g1/modify", `{"group_name":"g2"}`, asAdmin, 400, `static parameters group_name`, nil},
		{"modify POST", "POST", "/2/groups/g1/modify", `{}`, asAdmin, 501, `Method POST`, nil},
		{"rename", "PUT", "/2/groups/g1/rename?dry-run=1", `{"new_name":"g2"}`, asAdmin, 200, `101`,
			map[string]any{"OP_ID": "OP_GROUP_RENAME", "group_name": "g1", "new_name": "g2", "dry_run": true}},
		{"rename no name", "PUT", "/2/groups/g1/rename", `{}`, asAdmin, 400, `new_name`, nil},
		{"assign", "PUT", "/2/groups/g1/assign-nodes?force=1", `{"nodes":["node1"]}`, asAdmin, 200, `101`,
			map[string]any{"OP_ID": "OP_GROUP_ASSIGN_NODES", "group_name": "g1", "nodes": []any{"node1"}, "force": true}},
		{"assign not list", "PUT", "/2/groups/g1/assign-nodes", `{"nodes":"node1"}`, asAdmin, 400, `nodes`, nil},
		{"assign bad force", "PUT", "/2/groups/g1/assign-nodes?force=yes", `{"nodes":[]}`, asAdmin, 400, `force`, nil},
	}
	// The opcode carries exactly op's parameters, and a reason trail.
	runRoutes(t, tests, func(t *testing.T, tc routeCase, op map[string]any) {
		if op == nil {
			return
		}
		for k := range op {
			if _, ok := tc.op[k]; !ok && k != "reason" {
				t.Errorf("submitted %v with %s, want %v", op, k, tc.op)
			}
		}
		for k := range tc.op {
			if _, ok := op[k]; !ok {
				t.Errorf("submitted %v without %s, want %v", op, k, tc.op)
			}
		}
		if r, _ := op["reason"].([]any); len(r) == 0 {
			t.Errorf("no reason trail in %v", op)
		}
	})
}

func TestRenameKeys(t *testing.T) {
	in := map[string]any{"name": "a", "x": 1.0}
	out, err := renameKeys(in, map[string]string{"name": "group_name"})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(out, map[string]any{"group_name": "a", "x": 1.0}) {
		t.Fatalf("renamed %v", out)
	}
	if _, ok := in["group_name"]; ok {
		t.Fatal("the caller's body was changed")
	}
	if out, err := renameKeys(nil, map[string]string{"a": "b"}); out != nil || err != nil {
		t.Fatalf("nil body: %v %v", out, err)
	}
}
