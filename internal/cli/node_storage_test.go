package cli

import (
	"reflect"
	"strings"
	"testing"
)

// storageFake answers OP_NODE_QUERY_STORAGE with rows of the fields asked,
// from two units, as corrald does.
func storageFake(t *testing.T) *fakeMaster {
	t.Helper()
	f := newFake(t)
	f.mu.Lock()
	defer f.mu.Unlock()
	units := []map[string]any{
		{"node": "node1", "type": "file", "name": "/var/lib/corral/storage/file", "size": 204800.0, "used": 512.0, "free": 102400.0, "allocatable": true},
		{"node": "node2", "type": "file", "name": "/srv/file", "size": 3145728.0, "used": 0.0, "free": 1536.0, "allocatable": true},
	}
	f.outcome = func(op map[string]any) jobOutcome {
		if op["OP_ID"] != "OP_NODE_QUERY_STORAGE" {
			return jobOutcome{status: "success"}
		}
		fields, _ := op["output_fields"].([]any)
		var rows []any
		for _, u := range units {
			row := make([]any, len(fields))
			for i, f := range fields {
				row[i] = u[f.(string)]
			}
			rows = append(rows, row)
		}
		return jobOutcome{status: "success", result: rows}
	}
	return f
}

func TestNodeStorageCommands(t *testing.T) {
	cases := []struct {
		name   string
		args   []string
		code   int
		stdout string // exact, when set
		stderr string
		op     map[string]any // nil: nothing submitted
		absent []string
	}{
		{name: "list", args: []string{"node", "list-storage"},
			stdout: "Node  Type Name                           Size Used   Free Allocatable\n" +
				"node1 file /var/lib/corral/storage/file 200.0G 512M 100.0G Y\n" +
				"node2 file /srv/file                      3.0T   0M   1.5G Y\n",
			op: map[string]any{"OP_ID": "OP_NODE_QUERY_STORAGE", "nodes": []any{}, "output_fields": []any{"node", "type", "name", "size", "used", "free", "allocatable"}}, absent: []string{"storage_type"}},
		{name: "list fields", args: []string{"node", "list-storage", "-t", "file", "--no-headers", "--separator", "|", "-o", "name,free", "node2"},
			stdout: "/var/lib/corral/storage/file|102400\n/srv/file|1536\n",
			op:     map[string]any{"nodes": []any{"node2"}, "storage_type": "file", "output_fields": []any{"name", "free"}}},
		{name: "list bad type", args: []string{"node", "list-storage", "-t", "nfs"}, code: 2, stderr: "Unknown storage type: nfs"},
		{name: "modify", args: []string{"node", "modify-storage", "--allocatable=no", "node2", "lvm-pv", "/dev/sdb1"},
			op: map[string]any{"OP_ID": "OP_NODE_MODIFY_STORAGE", "node_name": "node2", "storage_type": "lvm-pv", "name": "/dev/sdb1", "changes": map[string]any{"allocatable": false}}},
		{name: "modify nothing", args: []string{"node", "modify-storage", "node2", "lvm-pv", "/dev/sdb1"}, stderr: "No changes to perform, exiting."},
		{name: "modify bad flag", args: []string{"node", "modify-storage", "--allocatable=maybe", "node2", "lvm-pv", "/dev/sdb1"}, code: 2, stderr: "yes or no"},
		{name: "repair", args: []string{"node", "repair-storage", "--ignore-consistency", "node1", "lvm-vg", "xenvg"},
			op: map[string]any{"OP_ID": "OP_REPAIR_NODE_STORAGE", "node_name": "node1", "storage_type": "lvm-vg", "name": "xenvg", "ignore_consistency": true}},
		{name: "repair missing name", args: []string{"node", "repair-storage", "node1", "lvm-vg"}, code: 2, stderr: "expected the node name, the storage type and the unit name"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := storageFake(t)
			r := f.run(t, tc.args...)
			if r.code != tc.code {
				t.Fatalf("exit %d, want %d: %+v", r.code, tc.code, r)
			}
			if tc.stdout != "" && r.stdout != tc.stdout {
				t.Fatalf("stdout\n%s\nwant\n%s", r.stdout, tc.stdout)
			}
			if !strings.Contains(r.stderr, tc.stderr) {
				t.Fatalf("stderr %q does not contain %q", r.stderr, tc.stderr)
			}
			ops := f.submitted()
			if tc.op == nil {
				if len(ops) != 0 {
					t.Fatalf("submitted %v", ops)
				}
				return
			}
			if len(ops) != 1 {
				t.Fatalf("submitted %v", ops)
			}
			for k, v := range tc.op {
				if !reflect.DeepEqual(ops[0][k], v) {
					t.Errorf("%s = %#v, want %#v", k, ops[0][k], v)
				}
			}
			for _, k := range tc.absent {
				if _, ok := ops[0][k]; ok {
					t.Errorf("%s present in %v", k, ops[0])
				}
			}
		})
	}
}
