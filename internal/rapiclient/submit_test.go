package rapiclient

import (
	"context"
	"encoding/json"
	"net/url"
	"reflect"
	"strings"
	"testing"

	"github.com/corral/corral/internal/ecode"
)

func TestSubmitRequest(t *testing.T) {
	for _, tc := range []struct {
		name   string
		op     map[string]any
		method string
		path   string
		query  url.Values
		body   any
	}{
		{"create", map[string]any{"OP_ID": "OP_INSTANCE_CREATE", "instance_name": "web1", "disk_template": "file", "dry_run": true, "reason": []any{}},
			"POST", "/2/instances", url.Values{"dry-run": {"1"}},
			map[string]any{"__version__": 1, "instance_name": "web1", "disk_template": "file"}},
		{"multi-alloc", map[string]any{"OP_ID": "OP_INSTANCE_MULTI_ALLOC", "iallocator": "hail", "dry_run": true,
			"instances": []any{map[string]any{"OP_ID": "OP_INSTANCE_CREATE", "instance_name": "web1", "disks": []any{}}}},
			"POST", "/2/instances-multi-alloc", url.Values{"dry-run": {"1"}},
			map[string]any{"iallocator": "hail", "instances": []any{map[string]any{"instance_name": "web1", "disks": []any{}}}}},
		{"remove", map[string]any{"OP_ID": "OP_INSTANCE_REMOVE", "instance_name": "web1", "shutdown_timeout": 30.0, "dry_run": false},
			"DELETE", "/2/instances/web1", nil, map[string]any{"shutdown_timeout": 30.0}},
		{"startup", map[string]any{"OP_ID": "OP_INSTANCE_STARTUP", "instance_name": "web1", "force": true, "hvparams": map[string]any{}},
			"PUT", "/2/instances/web1/startup", url.Values{"force": {"1"}}, nil},
		{"shutdown", map[string]any{"OP_ID": "OP_INSTANCE_SHUTDOWN", "instance_name": "web1", "timeout": 5.0, "no_remember": true},
			"PUT", "/2/instances/web1/shutdown", url.Values{"no_remember": {"1"}}, map[string]any{"timeout": 5.0}},
		{"reboot", map[string]any{"OP_ID": "OP_INSTANCE_REBOOT", "instance_name": "web1", "reboot_type": "soft"},
			"POST", "/2/instances/web1/reboot", url.Values{"type": {"soft"}}, nil},
		{"reinstall", map[string]any{"OP_ID": "OP_INSTANCE_REINSTALL", "instance_name": "web1", "os_type": "debootstrap"},
			"POST", "/2/instances/web1/reinstall", nil, map[string]any{"os": "debootstrap", "start": false}},
		{"rename", map[string]any{"OP_ID": "OP_INSTANCE_RENAME", "instance_name": "web1", "new_name": "web9"},
			"PUT", "/2/instances/web1/rename", nil, map[string]any{"new_name": "web9"}},
		{"modify", map[string]any{"OP_ID": "OP_INSTANCE_SET_PARAMS", "instance_name": "web1", "beparams": map[string]any{"vcpus": 2.0}},
			"PUT", "/2/instances/web1/modify", nil, map[string]any{"beparams": map[string]any{"vcpus": 2.0}}},
		{"info", map[string]any{"OP_ID": "OP_INSTANCE_QUERY_DATA", "instances": []any{"web1"}, "static": true},
			"GET", "/2/instances/web1/info", url.Values{"static": {"1"}}, nil},
		{"grow", map[string]any{"OP_ID": "OP_INSTANCE_GROW_DISK", "instance_name": "web1", "disk": 1.0, "amount": 512.0},
			"POST", "/2/instances/web1/disk/1/grow", nil, map[string]any{"amount": 512.0}},
		{"node modify", map[string]any{"OP_ID": "OP_NODE_SET_PARAMS", "node_name": "node2", "drained": true, "auto_promote": true},
			"POST", "/2/nodes/node2/modify", nil, map[string]any{"drained": true, "auto_promote": true}},
		{"node powercycle", map[string]any{"OP_ID": "OP_NODE_POWERCYCLE", "node_name": "node2", "force": true},
			"POST", "/2/nodes/node2/powercycle", url.Values{"force": {"1"}}, nil},
		{"group rename", map[string]any{"OP_ID": "OP_GROUP_RENAME", "group_name": "g1", "new_name": "g2", "dry_run": true},
			"PUT", "/2/groups/g1/rename", url.Values{"dry-run": {"1"}}, map[string]any{"new_name": "g2"}},
		{"cluster tags", map[string]any{"OP_ID": "OP_TAGS_SET", "kind": "cluster", "name": nil, "tags": []any{"a", "b c"}},
			"PUT", "/2/tags", url.Values{"tag": {"a", "b c"}}, nil},
		{"instance tags", map[string]any{"OP_ID": "OP_TAGS_DEL", "kind": "instance", "name": "web1", "tags": []any{"a"}},
			"DELETE", "/2/instances/web1/tags", url.Values{"tag": {"a"}}, nil},
		{"cluster modify", map[string]any{"OP_ID": "OP_CLUSTER_SET_PARAMS", "candidate_pool_size": 3.0},
			"PUT", "/2/modify", nil, map[string]any{"candidate_pool_size": 3.0}},
		{"storage", map[string]any{"OP_ID": "OP_NODE_QUERY_STORAGE", "nodes": []any{"node2"}, "storage_type": "file", "output_fields": []any{"name", "free"}, "name": nil},
			"GET", "/2/nodes/node2/storage", url.Values{"storage_type": {"file"}, "output_fields": {"name,free"}}, nil},
		{"storage default type", map[string]any{"OP_ID": "OP_NODE_QUERY_STORAGE", "nodes": []any{"node2"}, "storage_type": nil, "output_fields": []any{"name"}},
			"GET", "/2/nodes/node2/storage", url.Values{"output_fields": {"name"}}, nil},
		{"storage modify", map[string]any{"OP_ID": "OP_NODE_MODIFY_STORAGE", "node_name": "node2", "storage_type": "lvm-pv", "name": "/dev/sdb1", "changes": map[string]any{"allocatable": false}},
			"PUT", "/2/nodes/node2/storage/modify", url.Values{"storage_type": {"lvm-pv"}, "name": {"/dev/sdb1"}, "allocatable": {"0"}}, nil},
		{"storage repair", map[string]any{"OP_ID": "OP_REPAIR_NODE_STORAGE", "node_name": "node2", "storage_type": "lvm-vg", "name": "xenvg", "ignore_consistency": false},
			"PUT", "/2/nodes/node2/storage/repair", url.Values{"storage_type": {"lvm-vg"}, "name": {"xenvg"}}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, err := SubmitRequest([]map[string]any{tc.op})
			if err != nil {
				t.Fatal(err)
			}
			if req.Method != tc.method || req.Path != tc.path || !reflect.DeepEqual(req.Query, tc.query) || !reflect.DeepEqual(req.Body, tc.body) {
				t.Errorf("got %s %s ?%v body %#v\nwant %s %s ?%v body %#v", req.Method, req.Path, req.Query, req.Body,
					tc.method, tc.path, tc.query, tc.body)
			}
		})
	}
}

func TestSubmitRequestRefusals(t *testing.T) {
	for _, tc := range []struct {
		name  string
		ops   []map[string]any
		class ecode.Class
		msg   string
	}{
		{"no opcode", nil, ecode.Environ, "a job of 0 opcodes is not available over RAPI"},
		{"two opcodes", []map[string]any{{"OP_ID": "OP_INSTANCE_STARTUP", "instance_name": "a"}, {"OP_ID": "OP_INSTANCE_STARTUP", "instance_name": "b"}},
			ecode.Environ, "a job of 2 opcodes"},
		{"no route", []map[string]any{{"OP_ID": "OP_NODE_ADD", "node_name": "n"}}, ecode.Environ, "OP_NODE_ADD is not available over RAPI; run it on the master"},
		{"no OP_ID", []map[string]any{{"instance_name": "a"}}, ecode.Inval, "without OP_ID"},
		{"startup overrides", []map[string]any{{"OP_ID": "OP_INSTANCE_STARTUP", "instance_name": "a", "beparams": map[string]any{"maxmem": 1.0}, "startup_paused": true}},
			ecode.Environ, "OP_INSTANCE_STARTUP with beparams, startup_paused is not available"},
		{"reinstall force_variant", []map[string]any{{"OP_ID": "OP_INSTANCE_REINSTALL", "instance_name": "a", "force_variant": true}},
			ecode.Environ, "with force_variant"},
		{"info of all", []map[string]any{{"OP_ID": "OP_INSTANCE_QUERY_DATA", "instances": []any{}}}, ecode.Environ, "one named instance"},
		{"missing name", []map[string]any{{"OP_ID": "OP_INSTANCE_SHUTDOWN"}}, ecode.Inval, "missing parameter instance_name"},
		{"storage of every node", []map[string]any{{"OP_ID": "OP_NODE_QUERY_STORAGE", "nodes": []any{}, "output_fields": []any{"name"}}}, ecode.Environ, "the storage units of anything but one named node"},
		{"storage name filter", []map[string]any{{"OP_ID": "OP_NODE_QUERY_STORAGE", "nodes": []any{"n"}, "output_fields": []any{"name"}, "name": "/srv"}}, ecode.Environ, "OP_NODE_QUERY_STORAGE with name"},
		{"storage change", []map[string]any{{"OP_ID": "OP_NODE_MODIFY_STORAGE", "node_name": "n", "storage_type": "file", "name": "x", "changes": map[string]any{"size": 1.0}}}, ecode.Environ, "a storage change of size"},
		{"repair ignoring consistency", []map[string]any{{"OP_ID": "OP_REPAIR_NODE_STORAGE", "node_name": "n", "storage_type": "lvm-vg", "name": "x", "ignore_consistency": true}}, ecode.Environ, "with ignore_consistency"},
		{"node tag without name", []map[string]any{{"OP_ID": "OP_TAGS_SET", "kind": "node", "tags": []any{"a"}}}, ecode.Inval, "needs the object's name"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := SubmitRequest(tc.ops)
			e, ok := ecode.As(err)
			if !ok || e.Class != tc.class || !strings.Contains(e.Msg, tc.msg) {
				t.Fatalf("got %v, want class %s and %q", err, tc.class, tc.msg)
			}
		})
	}
}

// Each opcode, sent as RAPI builds it and decoded by the real handler,
// reaches corrald as the same opcode (the handler adds the reason trail).
func TestSubmitRoundTrip(t *testing.T) {
	s := newTestServer(t)
	c := s.client(t, "admin", "secret")
	for _, op := range []map[string]any{
		{"OP_ID": "OP_INSTANCE_CREATE", "instance_name": "web3", "disk_template": "file", "os_type": "debootstrap",
			"disks": []any{map[string]any{"size": 1024.0}}, "nics": []any{}, "start": false, "dry_run": true},
		{"OP_ID": "OP_INSTANCE_REMOVE", "instance_name": "web1", "shutdown_timeout": 30.0},
		{"OP_ID": "OP_INSTANCE_STARTUP", "instance_name": "web1", "force": true},
		{"OP_ID": "OP_INSTANCE_SHUTDOWN", "instance_name": "web1", "timeout": 5.0, "no_remember": true},
		{"OP_ID": "OP_INSTANCE_REBOOT", "instance_name": "web1", "reboot_type": "hard", "shutdown_timeout": 10.0},
		{"OP_ID": "OP_INSTANCE_RENAME", "instance_name": "web1", "new_name": "web9"},
		{"OP_ID": "OP_INSTANCE_SET_PARAMS", "instance_name": "web1", "beparams": map[string]any{"vcpus": 2.0}},
		{"OP_ID": "OP_NODE_SET_PARAMS", "node_name": "node2", "drained": true},
		{"OP_ID": "OP_INSTANCE_QUERY_DATA", "instances": []any{"web1"}, "static": true},
		{"OP_ID": "OP_INSTANCE_ACTIVATE_DISKS", "instance_name": "web1", "ignore_size": true},
		{"OP_ID": "OP_INSTANCE_DEACTIVATE_DISKS", "instance_name": "web1", "force": true},
		{"OP_ID": "OP_INSTANCE_GROW_DISK", "instance_name": "web1", "disk": 0.0, "amount": 512.0, "wait_for_sync": false},
		{"OP_ID": "OP_GROUP_ADD", "group_name": "g1", "alloc_policy": "preferred", "dry_run": true},
		{"OP_ID": "OP_GROUP_REMOVE", "group_name": "g1"},
		{"OP_ID": "OP_GROUP_SET_PARAMS", "group_name": "g1", "alloc_policy": "last_resort"},
		{"OP_ID": "OP_GROUP_RENAME", "group_name": "g1", "new_name": "g2"},
		{"OP_ID": "OP_GROUP_ASSIGN_NODES", "group_name": "g1", "nodes": []any{"node1"}, "force": true},
		{"OP_ID": "OP_TAGS_SET", "kind": "cluster", "tags": []any{"a", "b"}},
		{"OP_ID": "OP_TAGS_DEL", "kind": "instance", "name": "web1", "tags": []any{"a"}},
		{"OP_ID": "OP_CLUSTER_SET_PARAMS", "candidate_pool_size": 3.0},
	} {
		t.Run(op["OP_ID"].(string), func(t *testing.T) {
			var id int64
			raw, err := c.Call(context.Background(), "SubmitJob", []any{[]any{op}})
			if err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(raw, &id); err != nil {
				t.Fatalf("job id %s: %v", raw, err)
			}
			got := s.be.lastOps()
			if len(got) != 1 {
				t.Fatalf("corrald got %v", got)
			}
			// Compared as JSON, which is how corrald receives them.
			var m map[string]any
			b, _ := json.Marshal(got[0])
			if err := json.Unmarshal(b, &m); err != nil {
				t.Fatal(err)
			}
			if m["reason"] == nil {
				t.Errorf("no reason trail in %v", m)
			}
			delete(m, "reason")
			if !reflect.DeepEqual(m, op) {
				t.Errorf("corrald got  %v\nsent         %v", m, op)
			}
		})
	}
}
