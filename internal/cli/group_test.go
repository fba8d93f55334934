package cli

import (
	"strings"
	"testing"
)

// TestGroupOpcodes checks the opcode each group command submits.
func TestGroupOpcodes(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string // the opcode, as JSON
	}{
		{"add", []string{"group", "add", "g1"}, `{"OP_ID":"OP_GROUP_ADD","group_name":"g1"}`},
		{"add params", []string{"group", "add", "g1", "--alloc-policy", "unallocable", "-N", "ssh_port=22",
			"-D", "drbd:resync-rate=100", "--ipolicy-vcpu-ratio", "2.5", "--ipolicy-disk-templates", "file,diskless", "--dry-run"},
			`{"OP_ID":"OP_GROUP_ADD","group_name":"g1","alloc_policy":"unallocable","ndparams":{"ssh_port":"22"},
			"diskparams":{"drbd":{"resync-rate":"100"}},"ipolicy":{"vcpu-ratio":2.5,"disk-templates":["file","diskless"]},"dry_run":true}`},
		{"modify reset", []string{"group", "modify", "g1", "-N", "-ssh_port"},
			`{"OP_ID":"OP_GROUP_SET_PARAMS","group_name":"g1","ndparams":{"ssh_port":"default"}}`},
		{"modify state", []string{"group", "modify", "g1", "--hypervisor-state", "kvm:cpu_total=16,-mem_node",
			"--disk-state", "plain/xenvg:disk_total=100", "--disk-state", "plain/other:disk_reserved=5"},
			`{"OP_ID":"OP_GROUP_SET_PARAMS","group_name":"g1","hv_state":{"kvm":{"cpu_total":"16","mem_node":"default"}},
			"disk_state":{"plain":{"xenvg":{"disk_total":"100"},"other":{"disk_reserved":"5"}}}}`},
		{"rename", []string{"group", "rename", "g1", "g2", "--priority", "high"},
			`{"OP_ID":"OP_GROUP_RENAME","group_name":"g1","new_name":"g2","priority":-10}`},
		{"assign", []string{"group", "assign-nodes", "g1", "node1", "node2", "--force"},
			`{"OP_ID":"OP_GROUP_ASSIGN_NODES","group_name":"g1","nodes":["node1","node2"],"force":true}`},
		{"remove", []string{"group", "rm", "g1"}, `{"OP_ID":"OP_GROUP_REMOVE","group_name":"g1"}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake(t)
			r := f.run(t, tc.args...)
			ops := f.submitted()
			if len(ops) != 1 {
				t.Fatalf("%d jobs submitted (exit %d, stderr %s)", len(ops), r.code, r.stderr)
			}
			if !sameJSON(t, ops[0], tc.want) {
				t.Errorf("submitted %v, want %s", ops[0], tc.want)
			}
		})
	}
}

// TestGroupBadFlags checks that bad flags are refused before anything is
// submitted.
func TestGroupBadFlags(t *testing.T) {
	tests := []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"group", "add", "g1", "-N", "-ssh_port"}, 2, "cannot be reset"},
		{[]string{"group", "add", "g1", "--ipolicy-vcpu-ratio", "-1"}, 2, "positive number"},
		{[]string{"group", "add", "g1", "-D", "drbd:a=1", "-D", "drbd:b=2"}, 2, "more than once"},
		{[]string{"group", "modify", "g1"}, 2, "at least one parameter"},
		{[]string{"group", "rename", "g1"}, 2, "new name"},
		{[]string{"group", "assign-nodes", "g1"}, 2, "at least one node"},
	}
	for _, tc := range tests {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			f := newFake(t)
			r := f.run(t, tc.args...)
			if r.code != tc.code || !strings.Contains(r.stderr, tc.msg) {
				t.Errorf("exit %d, stderr %q; want %d containing %q", r.code, r.stderr, tc.code, tc.msg)
			}
			if n := len(f.submitted()); n != 0 {
				t.Errorf("%d jobs submitted", n)
			}
		})
	}
}
