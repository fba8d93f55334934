package rapi

import (
	"encoding/json"
	"testing"
)

func TestModifyResources(t *testing.T) {
	tests := []routeCase{
		{"cluster", "PUT", "/2/modify", `{"candidate_pool_size":5,"mac_prefix":"aa:00:01"}`, asAdmin, 200, `101`,
			map[string]any{"OP_ID": "OP_CLUSTER_SET_PARAMS", "candidate_pool_size": 5.0, "mac_prefix": "aa:00:01"}},
		{"cluster dry-run", "PUT", "/2/modify?dry-run=1", `{"max_running_jobs":3}`, asAdmin, 200, `101`,
			map[string]any{"OP_ID": "OP_CLUSTER_SET_PARAMS", "dry_run": true, "max_running_jobs": 3.0}},
		{"cluster body dry_run", "PUT", "/2/modify", `{"dry_run":true,"enabled_hypervisors":["fake"]}`, asAdmin, 200, `101`,
			map[string]any{"OP_ID": "OP_CLUSTER_SET_PARAMS", "dry_run": true, "enabled_hypervisors": []any{"fake"}}},
		{"cluster empty body", "PUT", "/2/modify", ``, asAdmin, 200, `101`,
			map[string]any{"OP_ID": "OP_CLUSTER_SET_PARAMS"}},
		{"cluster unknown key", "PUT", "/2/modify", `{"bogus_param":1}`, asAdmin, 400, `bogus_param`, nil},
		{"cluster wrong type", "PUT", "/2/modify", `{"candidate_pool_size":"many"}`, asAdmin, 400, `Invalid body parameters`, nil},
		{"cluster not a dict", "PUT", "/2/modify", `[1]`, asAdmin, 400, `not a dictionary`, nil},
		{"cluster compression tools", "PUT", "/2/modify", `{"compression_tools":["gzip"]}`, asAdmin, 403, `compression_tools cannot be set via RAPI`, nil},
		{"cluster static clash", "PUT", "/2/modify?dry-run=1", `{"dry_run":false}`, asAdmin, 400, `overwrite static parameters dry_run`, nil},
		{"cluster reason in body", "PUT", "/2/modify", `{"reason":[]}`, asAdmin, 400, `overwrite static parameters reason`, nil},
		{"cluster read user", "PUT", "/2/modify", `{}`, asViewer, 403, `Forbidden`, nil},
		{"cluster anonymous", "PUT", "/2/modify", `{}`, nil, 401, `Unauthorized`, nil},
		{"cluster GET", "GET", "/2/modify", ``, asAdmin, 501, `Method GET`, nil},
		{"node", "POST", "/2/nodes/node1/modify", `{"drained":true,"auto_promote":true}`, asAdmin, 200, `101`,
			map[string]any{"OP_ID": "OP_NODE_SET_PARAMS", "node_name": "node1", "drained": true, "auto_promote": true}},
		{"node force", "POST", "/2/nodes/node1/modify", `{"master_candidate":false,"force":true}`, asAdmin, 200, `101`,
			map[string]any{"OP_ID": "OP_NODE_SET_PARAMS", "node_name": "node1", "master_candidate": false, "force": true}},
		{"node master_capable", "POST", "/2/nodes/node1/modify", `{"master_capable":false}`, asAdmin, 403, `master_capable cannot be changed via RAPI`, nil},
		{"node ndparams", "POST", "/2/nodes/node2/modify", `{"ndparams":{"spindle_count":2}}`, asAdmin, 200, `101`,
			map[string]any{"OP_ID": "OP_NODE_SET_PARAMS", "node_name": "node2", "ndparams": map[string]any{"spindle_count": 2.0}}},
		{"node name in body", "POST", "/2/nodes/node1/modify", `{"node_name":"node2"}`, asAdmin, 400, `overwrite static parameters node_name`, nil},
		{"node unknown key", "POST", "/2/nodes/node1/modify", `{"bogus_flag":true}`, asAdmin, 400, `bogus_flag`, nil},
		{"node wrong type", "POST", "/2/nodes/node1/modify", `{"auto_promote":"yes"}`, asAdmin, 400, `Invalid body parameters`, nil},
		{"node not a dict", "POST", "/2/nodes/node1/modify", `"drained"`, asAdmin, 400, `not a dictionary`, nil},
		{"node read user", "POST", "/2/nodes/node1/modify", `{"drained":true}`, asViewer, 403, `Forbidden`, nil},
		{"node PUT", "PUT", "/2/nodes/node1/modify", `{"drained":true}`, asAdmin, 501, `Method PUT`, nil},
	}
	runRoutes(t, tests, func(t *testing.T, tc routeCase, op map[string]any) {
		if _, ok := tc.op["dry_run"]; !ok && op["dry_run"] != nil {
			t.Errorf("dry_run = %v without asking", op["dry_run"])
		}
	})
}

func TestModifyReasonTrail(t *testing.T) {
	for _, tc := range []struct{ method, path, res string }{
		{"PUT", "/2/modify?reason=resize", "cluster_modify"},
		{"POST", "/2/nodes/node1/modify?reason=resize", "nodes_name_modify"},
	} {
		be := newFakeBackend()
		rec := do(t, newTestHandler(t, be, false), tc.method, tc.path, `{}`, asAdmin)
		if rec.Code != 200 {
			t.Fatalf("%s: status %d: %s", tc.path, rec.Code, rec.Body)
		}
		trail, _ := json.Marshal(be.lastOp()["reason"])
		want := `[["gnt:user","resize",100000000005],["gnt:library:rlib2:` + tc.res + `","",100000000005]]`
		if string(trail) != want {
			t.Errorf("%s: reason trail %s, want %s", tc.path, trail, want)
		}
	}
}
