package cmdlib

import (
	"maps"
	"slices"
	"testing"

	"github.com/corral/corral/internal/config"
)

// TestIPolicyViewIsWhatChecksUse checks the ipolicy queries show has
// Ganeti's keys and the bounds the allocation checks enforce, and that a
// group's custom keys replace the cluster's.
func TestIPolicyViewIsWhatChecksUse(t *testing.T) {
	c := &config.Cluster{EnabledDiskTemplates: []string{"file", "diskless"}}
	pol := ClusterIPolicy(c)
	keys := slices.Sorted(maps.Keys(pol))
	if want := []string{"disk-templates", "minmax", "spindle-ratio", "std", "vcpu-ratio"}; !slices.Equal(keys, want) {
		t.Fatalf("cluster ipolicy keys = %v, want %v", keys, want)
	}
	mm := pol["minmax"].([]any)[0].(map[string]any)
	checks := clusterPolicy(c)
	for _, side := range []struct {
		name string
		spec map[string]float64
	}{{"min", checks.minMax[0].min}, {"max", checks.minMax[0].max}} {
		shown := mm[side.name].(map[string]any)
		if len(shown) != len(ispecParams) {
			t.Errorf("%s spec has %d keys, want %v", side.name, len(shown), ispecParams)
		}
		for _, k := range ispecParams {
			if shown[k] != int64(side.spec[k]) {
				t.Errorf("%s %s = %v, checks use %v", side.name, k, shown[k], side.spec[k])
			}
		}
	}
	if pol["vcpu-ratio"] != checks.vcpuRatio || !slices.Equal(pol["disk-templates"].([]string), c.EnabledDiskTemplates) {
		t.Errorf("vcpu-ratio %v disk-templates %v", pol["vcpu-ratio"], pol["disk-templates"])
	}

	custom := config.Params{"vcpu-ratio": 2.0, "minmax": []any{map[string]any{"min": map[string]any{"cpu-count": 1.0}, "max": map[string]any{"cpu-count": 2.0}}}}
	g := GroupIPolicy(c, custom)
	if g["vcpu-ratio"] != 2.0 || g["spindle-ratio"] != defaultSpindleRatio {
		t.Errorf("group ratios = %v %v", g["vcpu-ratio"], g["spindle-ratio"])
	}
	gmm := g["minmax"].([]any)[0].(map[string]any)["max"].(map[string]any)
	if gmm["cpu-count"] != 2.0 || groupPolicy(c, &config.NodeGroup{IPolicy: custom}).minMax[0].max["cpu-count"] != 2 {
		t.Errorf("group minmax max = %v", gmm)
	}
}

// TestDiskParamDefaultsMatchKinds keeps the shown defaults and the checked
// parameter names in step.
func TestDiskParamDefaultsMatchKinds(t *testing.T) {
	if !slices.Equal(slices.Sorted(maps.Keys(diskParamDefaults)), slices.Sorted(maps.Keys(diskParamKinds))) {
		t.Fatalf("templates differ: %v vs %v", slices.Sorted(maps.Keys(diskParamDefaults)), slices.Sorted(maps.Keys(diskParamKinds)))
	}
	for tmpl, kinds := range diskParamKinds {
		if !slices.Equal(slices.Sorted(maps.Keys(diskParamDefaults[tmpl])), slices.Sorted(maps.Keys(kinds))) {
			t.Errorf("%s: defaults %v, kinds %v", tmpl, slices.Sorted(maps.Keys(diskParamDefaults[tmpl])), slices.Sorted(maps.Keys(kinds)))
		}
	}
	got := GroupDiskParams(map[string]config.Params{"plain": {"stripes": 2.0}})
	if got["plain"]["stripes"] != 2.0 || got["drbd"]["protocol"] != "C" || diskParamDefaults["plain"]["stripes"] != float64(1) {
		t.Errorf("filled = %v", got)
	}
}

// TestNodeParamDefaultsMatchKinds keeps the node parameter defaults and the
// checked names in step (but Corral's machine, which has no default, so
// that nodes without it show Ganeti's set), and the fill order node >
// group > cluster.
func TestNodeParamDefaultsMatchKinds(t *testing.T) {
	kinds := maps.Clone(ndParamKinds)
	delete(kinds, NDMachine)
	if !slices.Equal(slices.Sorted(maps.Keys(nodeParamDefaults)), slices.Sorted(maps.Keys(kinds))) {
		t.Fatalf("defaults %v, kinds %v", slices.Sorted(maps.Keys(nodeParamDefaults)), slices.Sorted(maps.Keys(kinds)))
	}
	if _, ok := nodeParamDefaults[NDMachine]; ok || ndParamKinds[NDMachine] != kindString {
		t.Errorf("machine: a string without a default")
	}
	c := &config.Cluster{NDParams: config.Params{"ssh_port": 2222.0, "ovs": true}}
	g := &config.NodeGroup{NDParams: config.Params{"ssh_port": 2200.0}}
	n := &config.Node{NDParams: config.Params{"spindle_count": 4.0}}
	p := NodeNDParams(c, g, n)
	if p["ssh_port"] != 2200.0 || p["ovs"] != true || p["spindle_count"] != 4.0 || p["cpu_speed"] != 1.0 || len(p) != len(nodeParamDefaults) {
		t.Errorf("filled = %v", p)
	}
}
