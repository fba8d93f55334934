package cmdlib

import (
	"encoding/json"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/corral/corral/internal/config"
	"github.com/corral/corral/internal/ecode"
)

func groupOp(id, name string, extra map[string]any) map[string]any {
	op := map[string]any{"OP_ID": id, "group_name": name}
	for k, v := range extra {
		op[k] = v
	}
	return op
}

// TestGroupLifecycle adds, modifies, renames, fills and empties a group and
// checks the configuration after each step.
func TestGroupLifecycle(t *testing.T) {
	e := openEnv(t, filepath.Join(t.TempDir(), "s.db"), newNodeDouble(), true)
	defer e.close()
	mustRun := func(op map[string]any) []any {
		t.Helper()
		st, res := e.run(t, op)
		if st != "success" {
			t.Fatalf("%v: %s %v", op, st, res)
		}
		return res
	}
	mustRun(groupOp("OP_GROUP_ADD", "rack2", map[string]any{"ndparams": map[string]any{"spindle_count": "2", "ssh_port": 2222}}))
	g, ok := e.cfg.Group("rack2")
	if !ok {
		t.Fatal("group not added")
	}
	if g.AllocPolicy != "preferred" || g.NDParams["spindle_count"] != 2.0 || g.NDParams["ssh_port"] != 2222.0 {
		t.Fatalf("new group: %+v", g)
	}

	// A dry run checks and changes nothing.
	mustRun(groupOp("OP_GROUP_ADD", "rack3", map[string]any{"dry_run": true}))
	if _, ok := e.cfg.Group("rack3"); ok {
		t.Fatal("dry run added a group")
	}

	res := mustRun(groupOp("OP_GROUP_SET_PARAMS", "rack2", map[string]any{
		"alloc_policy": "last_resort", "ndparams": map[string]any{"spindle_count": "default", "exclusive_storage": "yes"},
		"ipolicy": map[string]any{"vcpu-ratio": 2, "disk-templates": []any{"file"}},
	}))
	g, _ = e.cfg.Group("rack2")
	wantND := map[string]any{"ssh_port": 2222.0, "exclusive_storage": true}
	if g.AllocPolicy != "last_resort" || !reflect.DeepEqual(map[string]any(g.NDParams), wantND) || g.IPolicy["vcpu-ratio"] != 2.0 {
		t.Fatalf("after modify: %+v", g)
	}
	b, _ := json.Marshal(res)
	if !strings.Contains(string(b), `["alloc_policy","last_resort"]`) || !strings.Contains(string(b), `exclusive_storage`) {
		t.Fatalf("modify result %s", b)
	}

	res = mustRun(groupOp("OP_GROUP_RENAME", "rack2", map[string]any{"new_name": "rack9"}))
	if b, _ := json.Marshal(res); string(b) != `["rack9"]` {
		t.Fatalf("rename result %v", res)
	}
	if _, ok := e.cfg.Group("rack2"); ok {
		t.Fatal("old name still known")
	}
	if r9, ok := e.cfg.Group("rack9"); !ok || r9.UUID != g.UUID {
		t.Fatal("rename lost the group")
	}

	mustRun(map[string]any{"OP_ID": "OP_NODE_ADD", "node_name": "n2", "primary_ip": "127.0.0.3"})
	def, _ := e.cfg.Group("default")
	serial := def.Serial
	mustRun(groupOp("OP_GROUP_ASSIGN_NODES", "rack9", map[string]any{"nodes": []any{"n2"}}))
	if n2, _ := e.cfg.Node("n2"); n2.Group != g.UUID {
		t.Fatalf("n2 in group %s, want %s", n2.Group, g.UUID)
	}
	if def, _ = e.cfg.Group("default"); def.Serial == serial {
		t.Fatal("the source group's serial did not change")
	}
	// Non-empty groups stay.
	st, out := e.run(t, groupOp("OP_GROUP_REMOVE", "rack9", nil))
	checkErr(t, st, out, ecode.State, "not empty, has the following nodes: n2")

	mustRun(groupOp("OP_GROUP_ASSIGN_NODES", "default", map[string]any{"nodes": []any{"n2"}}))
	mustRun(groupOp("OP_GROUP_REMOVE", "rack9", nil))
	if _, ok := e.cfg.Group(g.UUID); ok {
		t.Fatal("group not removed")
	}
	// The last group always holds the master, so emptiness refuses it
	// first, as in Ganeti.
	st, out = e.run(t, groupOp("OP_GROUP_REMOVE", "default", nil))
	checkErr(t, st, out, ecode.State, "not empty, has the following nodes: n1, n2")
}

func checkErr(t *testing.T, st string, res []any, class ecode.Class, msg string) {
	t.Helper()
	b, _ := json.Marshal(res)
	if st != "error" || !strings.Contains(string(b), string(class)) || !strings.Contains(string(b), msg) {
		t.Fatalf("got %s %s, want error %s containing %q", st, b, class, msg)
	}
}

// TestGroupValidationChangesNothing submits bad requests: each fails with
// Ganeti's error class and leaves the configuration as it was.
func TestGroupValidationChangesNothing(t *testing.T) {
	e := openEnv(t, filepath.Join(t.TempDir(), "s.db"), newNodeDouble(), true)
	defer e.close()
	if st, res := e.run(t, groupOp("OP_GROUP_ADD", "g2", nil)); st != "success" {
		t.Fatalf("add: %s %v", st, res)
	}
	cases := []struct {
		op    map[string]any
		class ecode.Class
		msg   string
	}{
		{groupOp("OP_GROUP_ADD", "g2", nil), ecode.Exists, "already exists as a node group"},
		{groupOp("OP_GROUP_ADD", "bad/name", nil), ecode.Inval, "Invalid node group name"},
		{groupOp("OP_GROUP_ADD", "g3", map[string]any{"alloc_policy": "sometimes"}), ecode.Inval, "Invalid allocation policy"},
		{groupOp("OP_GROUP_ADD", "g3", map[string]any{"ndparams": map[string]any{"nosuch": 1}}), ecode.Inval, "Unknown node parameter"},
		{groupOp("OP_GROUP_ADD", "g3", map[string]any{"ndparams": map[string]any{"ssh_port": "x"}}), ecode.Inval, "must be an integer"},
		{groupOp("OP_GROUP_ADD", "g3", map[string]any{"ndparams": "x"}), ecode.Inval, "must be a dict"},
		{groupOp("OP_GROUP_ADD", "g3", map[string]any{"diskparams": map[string]any{"file": map[string]any{"x": 1}}}), ecode.Inval, "Unknown file disk parameter"},
		{groupOp("OP_GROUP_ADD", "g3", map[string]any{"diskparams": map[string]any{"tape": map[string]any{}}}), ecode.Inval, "Unknown disk template"},
		{groupOp("OP_GROUP_ADD", "g3", map[string]any{"ipolicy": map[string]any{"std": map[string]any{}}}), ecode.Inval, "only be set for the cluster"},
		{groupOp("OP_GROUP_ADD", "g3", map[string]any{"ipolicy": map[string]any{"disk-templates": []any{"drbd"}}}), ecode.Inval, "not enabled on the cluster"},
		{groupOp("OP_GROUP_ADD", "g3", map[string]any{"hv_state": map[string]any{"xen": map[string]any{}}}), ecode.Inval, "Invalid hypervisor(s) in hypervisor state: xen"},
		{groupOp("OP_GROUP_ADD", "g3", map[string]any{"hv_state": map[string]any{"kvm": map[string]any{"cpu_total": "many"}}}), ecode.Inval, "'cpu_total' (value many) is not a valid integer"},
		{groupOp("OP_GROUP_ADD", "g3", map[string]any{"hv_state": map[string]any{"kvm": map[string]any{"cpus": 4}}}), ecode.Inval, "Unknown parameter 'cpus'"},
		{groupOp("OP_GROUP_ADD", "g3", map[string]any{"hv_state": "kvm"}), ecode.Inval, "expected a dictionary"},
		{groupOp("OP_GROUP_ADD", "g3", map[string]any{"disk_state": map[string]any{"lvm": map[string]any{}}}), ecode.Inval, "Invalid storage type(s) in disk state: lvm"},
		{groupOp("OP_GROUP_ADD", "g3", map[string]any{"disk_state": map[string]any{"plain": map[string]any{"xenvg": map[string]any{"disk_free": 1}}}}), ecode.Inval, "Unknown parameter 'disk_free'"},
		{groupOp("OP_GROUP_SET_PARAMS", "g2", nil), ecode.Inval, "at least one modification"},
		{groupOp("OP_GROUP_SET_PARAMS", "nope", map[string]any{"alloc_policy": "preferred"}), ecode.NoEnt, "not known"},
		{groupOp("OP_GROUP_RENAME", "g2", map[string]any{"new_name": "default"}), ecode.Exists, "clashes with existing node group"},
		{groupOp("OP_GROUP_RENAME", "nope", map[string]any{"new_name": "x"}), ecode.NoEnt, "not known"},
		{groupOp("OP_GROUP_ASSIGN_NODES", "g2", map[string]any{"nodes": []any{"ghost"}}), ecode.NoEnt, "not known"},
		{groupOp("OP_GROUP_ASSIGN_NODES", "g2", map[string]any{"nodes": []any{}}), ecode.Inval, "No nodes given"},
		{groupOp("OP_GROUP_REMOVE", "nope", nil), ecode.NoEnt, "not known"},
	}
	serial := e.cfg.Serial()
	before, _ := json.Marshal(e.cfg.Groups())
	for _, c := range cases {
		st, res := e.run(t, c.op)
		b, _ := json.Marshal(res)
		if st != "error" || !strings.Contains(string(b), string(c.class)) || !strings.Contains(string(b), c.msg) {
			t.Errorf("%v: got %s %s, want error %s containing %q", c.op, st, b, c.class, c.msg)
		}
	}
	after, _ := json.Marshal(e.cfg.Groups())
	if string(before) != string(after) || e.cfg.Serial() != serial {
		t.Fatalf("failed ops changed the configuration:\n%s\n%s", before, after)
	}
}

func TestSplitInstances(t *testing.T) {
	nodeGroup := map[string]string{"a": "g1", "b": "g1", "c": "g2", "d": "g2"}
	inst := map[string][]string{
		"whole":   {"a", "b"}, // split when a moves
		"split":   {"a", "c"}, // already split, stays split when b moves
		"healed":  {"b", "c"}, // already split, healed when b joins g2
		"primary": {"d"},      // one node never splits
	}
	cases := []struct {
		moves       map[string]string
		newS, still []string
	}{
		{map[string]string{"a": "g2"}, []string{"whole"}, []string{"healed"}},
		{map[string]string{"b": "g2"}, []string{"whole"}, []string{"split"}},
		{map[string]string{"a": "g2", "b": "g2"}, nil, nil},
		{map[string]string{"d": "g1"}, nil, []string{"healed", "split"}},
	}
	for _, c := range cases {
		n, s := splitInstances(c.moves, nodeGroup, inst)
		if !reflect.DeepEqual(n, c.newS) || !reflect.DeepEqual(s, c.still) {
			t.Errorf("moves %v: new %v still %v, want %v %v", c.moves, n, s, c.newS, c.still)
		}
	}
}

func FuzzCoerce(f *testing.F) {
	for _, s := range []string{"1", "1.5", "yes", "no", "x", "", "NaN", "Inf", " 7 ", "1e400"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		for _, k := range []paramKind{kindString, kindInt, kindBool, kindFloat} {
			v, err := coerce("p", k, s)
			if err != nil {
				if ecode.ClassOf(err) != ecode.Inval {
					t.Fatalf("error class %s", ecode.ClassOf(err))
				}
				continue
			}
			switch k {
			case kindInt, kindFloat:
				if _, ok := v.(float64); !ok {
					t.Fatalf("%q as number gave %T", s, v)
				}
			case kindBool:
				if _, ok := v.(bool); !ok {
					t.Fatalf("%q as bool gave %T", s, v)
				}
			}
		}
	})
}

// FuzzGroupParams feeds JSON dicts to the ndparams, diskparams and ipolicy
// checks: they must never panic, and refuse only with ECODE_INVAL.
func FuzzGroupParams(f *testing.F) {
	for _, s := range []string{
		`{"ssh_port":"22","exclusive_storage":"yes"}`,
		`{"drbd":{"resync-rate":1000,"protocol":"C"},"file":{}}`,
		`{"minmax":[{"min":{"cpu-count":1,"disk-count":1,"disk-size":1,"memory-size":1,"nic-count":1,"spindle-use":1},"max":{"cpu-count":2,"disk-count":2,"disk-size":2,"memory-size":2,"nic-count":2,"spindle-use":2}}]}`,
		`{"vcpu-ratio":"default","disk-templates":["file"]}`,
		`{"minmax":[{"min":{},"max":{}}]}`, `{"std":{}}`, `{}`, `{"x":null}`,
	} {
		f.Add(s)
	}
	c := &config.Cluster{EnabledDiskTemplates: []string{"file", "diskless"}}
	f.Fuzz(func(t *testing.T, s string) {
		var m map[string]any
		if json.Unmarshal([]byte(s), &m) != nil || m == nil {
			return
		}
		check := func(what string, err error) {
			if err != nil && ecode.ClassOf(err) != ecode.Inval {
				t.Fatalf("%s(%s): error class %s: %v", what, s, ecode.ClassOf(err), err)
			}
		}
		_, err := checkNDParams(config.Params{"ssh_port": 22.0}, m)
		check("ndparams", err)
		_, err = checkDiskParams(nil, m)
		check("diskparams", err)
		p, err := checkGroupIPolicy(c, nil, m)
		check("ipolicy", err)
		if err == nil {
			if _, bad := p["std"]; bad {
				t.Fatalf("ipolicy %s kept a std spec", s)
			}
		}
	})
}
