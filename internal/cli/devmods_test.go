package cli

import (
	"strings"
	"testing"
)

// TestInstanceModifyDevices checks the opcode "instance modify" submits for
// --disk, --net, --hotplug and -m, in Ganeti's option syntax.
func TestInstanceModifyDevices(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"disk add", []string{"--disk", "add:size=1G,mode=ro", "--hotplug"},
			`{"disks":[["add",-1,{"size":1024,"mode":"ro"}]],"hotplug":true}`},
		{"disk remove by index", []string{"--disk", "1:remove"}, `{"disks":[["remove",1,{}]]}`},
		{"disk remove last", []string{"--disk", "remove"}, `{"disks":[["remove",-1,{}]]}`},
		{"disk add at index", []string{"--disk", "0:add,size=512"}, `{"disks":[["add",0,{"size":512}]]}`},
		{"disk modify by name", []string{"--disk", "data:mode=ro"}, `{"disks":[["modify","data",{"mode":"ro"}]]}`},
		{"net add", []string{"--net", "add:mode=bridged,link=br0"}, `{"nics":[["add",-1,{"mode":"bridged","link":"br0"}]]}`},
		{"net add defaults", []string{"--net", "add", "--hotplug-if-possible"}, `{"nics":[["add",-1,{}]],"hotplug_if_possible":true}`},
		{"net modify", []string{"--net", "0:modify,ip=192.0.2.7"}, `{"nics":[["modify",0,{"ip":"192.0.2.7"}]]}`},
		{"runtime memory", []string{"-m", "512M"}, `{"runtime_mem":512}`},
		{"new primary", []string{"--new-primary", "node2"}, `{"pnode":"node2"}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake(t)
			r := f.run(t, append([]string{"instance", "modify", "web1"}, tc.args...)...)
			ops := f.submitted()
			if len(ops) != 1 {
				t.Fatalf("%d jobs submitted (exit %d, stderr %s)", len(ops), r.code, r.stderr)
			}
			want := `{"OP_ID":"OP_INSTANCE_SET_PARAMS","instance_name":"web1",` + strings.TrimPrefix(tc.want, "{")
			if !sameJSON(t, ops[0], want) {
				t.Errorf("submitted %v, want %s", ops[0], want)
			}
		})
	}
	for _, bad := range []struct {
		args []string
		msg  string
	}{
		{[]string{"--disk", "1:remove,size=1G"}, "Not accepting parameters on removal/detach"},
		{[]string{"--disk", "1:add,remove"}, "Cannot do more than one of the following operations"},
		{[]string{"--disk", "add:size=lots"}, "size"},
		{[]string{"-m", "x"}, "runtime-memory"},
	} {
		f := newFake(t)
		r := f.run(t, append([]string{"instance", "modify", "web1"}, bad.args...)...)
		if r.code != 2 || !strings.Contains(r.stderr, bad.msg) || len(f.submitted()) != 0 {
			t.Errorf("%v: exit %d, stderr %q; want 2 and %q", bad.args, r.code, r.stderr, bad.msg)
		}
	}
}
