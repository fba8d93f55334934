package config

import (
	"reflect"
	"strings"
	"testing"
)

// TestMergeStaticState follows Ganeti's MergeAndVerifyHvState and
// MergeAndVerifyDiskState: figure-by-figure updates, Python int()
// conversions, and the stored value left untouched by a failed merge.
func TestMergeStaticState(t *testing.T) {
	old := HVState{"kvm": {"cpu_total": 4, "mem_total": 1024}}
	got, err := MergeHVState(old, map[string]any{"kvm": map[string]any{"mem_total": nil, "cpu_node": " 2 ", "mem_hv": 7.9, "mem_node": true}})
	if err != nil {
		t.Fatal(err)
	}
	if want := (HVState{"kvm": {"cpu_total": 4, "cpu_node": 2, "mem_hv": 7, "mem_node": 1}}); !reflect.DeepEqual(got, want) {
		t.Errorf("merged %v, want %v", got, want)
	}
	if old["kvm"]["mem_total"] != 1024 {
		t.Errorf("the merge changed the stored state: %v", old)
	}
	if same, err := MergeHVState(old, map[string]any{}); err != nil || !reflect.DeepEqual(same, old) {
		t.Errorf("an empty update gave %v, %v", same, err)
	}
	for _, bad := range []struct {
		upd  any
		want string
	}{
		{map[string]any{"kvm": map[string]any{"cpu_total": "1.5"}}, "is not a valid integer"},
		{map[string]any{"kvm": map[string]any{"cpu_total": []any{1}}}, "is not a valid integer"},
		{map[string]any{"kvm": 3}, "expected a dictionary"},
		{map[string]any{"xen-hvm": map[string]any{}, "vmware": map[string]any{}}, "Invalid hypervisor(s) in hypervisor state: vmware"},
	} {
		if _, err := MergeHVState(old, bad.upd); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%v: error %v, want %q", bad.upd, err, bad.want)
		}
	}
	disk, err := MergeDiskState(nil, map[string]any{"plain": map[string]any{"vg1": map[string]any{"disk_total": 10}, "vg2": map[string]any{}}})
	if err != nil {
		t.Fatal(err)
	}
	if want := (DiskState{"plain": {"vg1": {"disk_total": 10}, "vg2": {}}}); !reflect.DeepEqual(disk, want) {
		t.Errorf("disk state %v, want %v", disk, want)
	}
	if _, err := MergeDiskState(nil, map[string]any{"plain": map[string]any{"vg1": "x"}}); err == nil {
		t.Error("a storage unit that is no dictionary was accepted")
	}
	filled := FillHVState(HVState{"fake": {"mem_hv": 3}})
	if want := (HVState{"fake": {"cpu_node": 1, "cpu_total": 1, "mem_hv": 3, "mem_node": 0, "mem_total": 0}}); !reflect.DeepEqual(filled, want) {
		t.Errorf("filled %v, want %v", filled, want)
	}
}
