package cmdlib

import (
	"path/filepath"
	"reflect"
	"testing"

	"github.com/corral/corral/internal/config"
)

// TestStaticStateStored sets hv_state and disk_state on a group, a node
// and the cluster through their opcodes, as Ganeti merges them: figures
// are updated one by one, "default" removes one, and the cluster's are
// filled with Ganeti's defaults.
func TestStaticStateStored(t *testing.T) {
	e := openEnv(t, filepath.Join(t.TempDir(), "s.db"), newNodeDouble(), true)
	defer e.close()
	mustRun := func(op map[string]any) {
		t.Helper()
		if st, res := e.run(t, op); st != "success" {
			t.Fatalf("%v: %s %v", op, st, res)
		}
	}
	mustRun(groupOp("OP_GROUP_ADD", "rack2", map[string]any{
		"hv_state":   map[string]any{"kvm": map[string]any{"cpu_total": "16", "mem_total": 65536}},
		"disk_state": map[string]any{"plain": map[string]any{"xenvg": map[string]any{"disk_total": 1000}}},
	}))
	g, _ := e.cfg.Group("rack2")
	if want := (config.HVState{"kvm": {"cpu_total": 16, "mem_total": 65536}}); !reflect.DeepEqual(g.HVStateStatic, want) {
		t.Fatalf("group hv_state %v, want %v", g.HVStateStatic, want)
	}
	mustRun(groupOp("OP_GROUP_SET_PARAMS", "rack2", map[string]any{
		"hv_state":   map[string]any{"kvm": map[string]any{"mem_total": "default", "mem_node": 2048}},
		"disk_state": map[string]any{"plain": map[string]any{"xenvg": map[string]any{"disk_reserved": 10}}},
	}))
	g, _ = e.cfg.Group("rack2")
	if want := (config.HVState{"kvm": {"cpu_total": 16, "mem_node": 2048}}); !reflect.DeepEqual(g.HVStateStatic, want) {
		t.Errorf("group hv_state after modify %v, want %v", g.HVStateStatic, want)
	}
	if want := (config.DiskState{"plain": {"xenvg": {"disk_total": 1000, "disk_reserved": 10}}}); !reflect.DeepEqual(g.DiskStateStatic, want) {
		t.Errorf("group disk_state after modify %v, want %v", g.DiskStateStatic, want)
	}

	mustRun(map[string]any{"OP_ID": "OP_NODE_SET_PARAMS", "node_name": "n1", "hv_state": map[string]any{"fake": map[string]any{"cpu_node": 2}}})
	n, _ := e.cfg.Node("n1")
	if want := (config.HVState{"fake": {"cpu_node": 2}}); !reflect.DeepEqual(n.HVStateStatic, want) {
		t.Errorf("node hv_state %v, want %v", n.HVStateStatic, want)
	}
	if st, _ := e.run(t, map[string]any{"OP_ID": "OP_NODE_SET_PARAMS", "node_name": "n1", "disk_state": map[string]any{"plain": map[string]any{"vg": map[string]any{"disk_total": 1.5e300}}}}); st != "error" {
		t.Errorf("an out of range figure was accepted: %s", st)
	}

	mustRun(map[string]any{"OP_ID": "OP_CLUSTER_SET_PARAMS", "hv_state": map[string]any{"kvm": map[string]any{"mem_hv": 512}},
		"disk_state": map[string]any{"plain": map[string]any{"xenvg": map[string]any{"disk_total": 50}}}})
	c := e.cfg.Cluster()
	if want := (config.HVState{"kvm": {"cpu_node": 1, "cpu_total": 1, "mem_hv": 512, "mem_node": 0, "mem_total": 0}}); !reflect.DeepEqual(c.HVStateStatic, want) {
		t.Errorf("cluster hv_state %v, want %v", c.HVStateStatic, want)
	}
	if want := (config.DiskState{"plain": {"xenvg": {"disk_overhead": 0, "disk_reserved": 0, "disk_total": 50}}}); !reflect.DeepEqual(c.DiskStateStatic, want) {
		t.Errorf("cluster disk_state %v, want %v", c.DiskStateStatic, want)
	}
}
