package rapi

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestTagsChange(t *testing.T) {
	tests := []routeCase{
		{"cluster add", "PUT", "/2/tags?tag=a&tag=b:c", ``, asAdmin, 200, `101`,
			map[string]any{"OP_ID": "OP_TAGS_SET", "kind": "cluster", "tags": []any{"a", "b:c"}}},
		{"cluster del", "DELETE", "/2/tags?tag=a", ``, asAdmin, 200, `101`,
			map[string]any{"OP_ID": "OP_TAGS_DEL", "kind": "cluster", "tags": []any{"a"}}},
		{"instance add dry run", "PUT", "/2/instances/web1/tags?tag=x&dry-run=1", ``, asAdmin, 200, `101`,
			map[string]any{"OP_ID": "OP_TAGS_SET", "kind": "instance", "name": "web1", "tags": []any{"x"}, "dry_run": true}},
		{"instance del", "DELETE", "/2/instances/web1/tags?tag=x&tag=y", ``, asAdmin, 200, `101`,
			map[string]any{"OP_ID": "OP_TAGS_DEL", "kind": "instance", "name": "web1", "tags": []any{"x", "y"}}},
		{"node add", "PUT", "/2/nodes/node1/tags?tag=rack:1", ``, asAdmin, 200, `101`,
			map[string]any{"OP_ID": "OP_TAGS_SET", "kind": "node", "name": "node1", "tags": []any{"rack:1"}}},
		{"group del", "DELETE", "/2/groups/default/tags?tag=z", ``, asAdmin, 200, `101`,
			map[string]any{"OP_ID": "OP_TAGS_DEL", "kind": "nodegroup", "name": "default", "tags": []any{"z"}}},
		// The object's existence is the job's business, as in Ganeti.
		{"unknown instance", "PUT", "/2/instances/ghost/tags?tag=x", ``, asAdmin, 200, `101`,
			map[string]any{"OP_ID": "OP_TAGS_SET", "kind": "instance", "name": "ghost"}},
		{"no tag add", "PUT", "/2/instances/web1/tags", ``, asAdmin, 400, `Please specify tag(s) to add`, nil},
		{"empty tag dropped", "PUT", "/2/instances/web1/tags?tag=", ``, asAdmin, 400, `Please specify tag(s)`, nil},
		{"no tag del", "DELETE", "/2/tags", ``, asAdmin, 400, `Cannot delete all tags`, nil},
		{"bad tag", "PUT", "/2/nodes/node1/tags?tag=ok&tag=bad%20tag", ``, asAdmin, 400, `Tag contains invalid characters`, nil},
		{"long tag", "DELETE", "/2/groups/default/tags?tag=" + strings.Repeat("x", 129), ``, asAdmin, 400, `Tag too long`, nil},
		{"bad dry-run", "PUT", "/2/tags?tag=a&dry-run=maybe", ``, asAdmin, 400, `dry-run`, nil},
		{"body ignored", "PUT", "/2/tags?tag=a", `{"tags":["other"]}`, asAdmin, 200, `101`,
			map[string]any{"OP_ID": "OP_TAGS_SET", "kind": "cluster"}},
		{"read user", "PUT", "/2/tags?tag=a", ``, asViewer, 403, `Forbidden`, nil},
		{"anonymous", "DELETE", "/2/instances/web1/tags?tag=a", ``, nil, 401, `Unauthorized`, nil},
		{"network tags", "PUT", "/2/networks/net1/tags?tag=a", ``, asAdmin, 200, `101`,
			map[string]any{"OP_ID": "OP_TAGS_SET", "kind": "network", "name": "net1"}},
	}
	runRoutes(t, tests, func(t *testing.T, tc routeCase, op map[string]any) {
		if op == nil {
			return
		}
		if _, ok := tc.op["name"]; !ok && op["name"] != nil {
			t.Errorf("cluster op carries a name: %v", op["name"])
		}
		if _, ok := tc.op["dry_run"]; !ok && op["dry_run"] == true {
			t.Error("dry_run set without ?dry-run")
		}
		if tc.name == "body ignored" {
			if tags, _ := json.Marshal(op["tags"]); string(tags) != `["a"]` {
				t.Errorf("body leaked into the op: %s", tags)
			}
		}
	})
}
