package master

import (
	"slices"
	"testing"

	"github.com/corral/corral/internal/config"
)

func TestPruneHVParams(t *testing.T) {
	c := &config.Cluster{
		HVParams: map[string]config.Params{
			"fake": {"kernel_path": "/boot/vmlinuz", "migration_mode": "live"},
			"kvm":  {"kernel_path": "/boot/vmlinuz", "no_such": "x"},
			"xen":  {"anything": "kept"},
		},
		OSHVParams: map[string]map[string]config.Params{"tiny": {"fake": {"kernel_args": "ro", "migration_downtime": 40}}},
	}
	got := pruneHVParams(c)
	slices.Sort(got)
	want := []string{"fake/kernel_path", "tiny:fake/kernel_args"}
	if !slices.Equal(got, want) {
		t.Fatalf("dropped %v, want %v", got, want)
	}
	if len(c.HVParams["fake"]) != 1 || len(c.HVParams["kvm"]) != 2 || c.HVParams["xen"]["anything"] != "kept" ||
		len(c.OSHVParams["tiny"]["fake"]) != 1 {
		t.Fatalf("after pruning: %v %v", c.HVParams, c.OSHVParams)
	}
	if again := pruneHVParams(c); len(again) != 0 {
		t.Fatalf("a second pass dropped %v", again)
	}
}
