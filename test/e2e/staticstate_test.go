package e2e

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestStaticHVAndDiskState declares hypervisor and disk state on a group
// and a node with corral's and Ganeti's own commands (drop-in mode): the
// figures are stored merged, shown by info and queries, and a bad
// hypervisor is refused with Ganeti's message.
func TestStaticHVAndDiskState(t *testing.T) {
	c := newDropinCluster(t, 0)
	if out, err := c.corral("group", "modify", "default", "--hypervisor-state", "kvm:cpu_total=8,mem_total=4096"); err != nil {
		t.Fatalf("corral group modify: %v\n%s", err, out)
	}
	c.mustGnt("gnt-group", "modify", "--hypervisor-state", "kvm:mem_total=8192", "--hypervisor-state", "fake:cpu_node=2", "default")
	rows := c.queryRows("group", []string{"hv_state"}, []any{"=", "name", "default"})
	got, _ := json.Marshal(rows[0][0])
	if want := `{"fake":{"cpu_node":2},"kvm":{"cpu_total":8,"mem_total":8192}}`; string(got) != want {
		t.Errorf("group hv_state %s, want %s", got, want)
	}
	info, err := c.corral("group", "info", "default")
	if err != nil || !strings.Contains(info, "cpu_total") || !strings.Contains(info, "8192") {
		t.Errorf("group info lacks the hypervisor state (%v):\n%s", err, info)
	}

	c.mustGnt("gnt-node", "modify", "--disk-state", "plain/xenvg:disk_total=100,disk_reserved=10", "node1")
	got, _ = json.Marshal(c.nodeField("node1", "disk_state"))
	if want := `{"plain":{"xenvg":{"disk_reserved":10,"disk_total":100}}}`; string(got) != want {
		t.Errorf("node disk_state %s, want %s", got, want)
	}
	if out, err := c.corral("node", "info", "node1"); err != nil || !strings.Contains(out, "disk_total") {
		t.Errorf("node info lacks the disk state (%v):\n%s", err, out)
	}

	out, err := c.corral("group", "modify", "default", "--hypervisor-state", "xen:cpu_total=1")
	if err == nil || !strings.Contains(out, "Invalid hypervisor(s) in hypervisor state: xen") {
		t.Errorf("an unknown hypervisor was not refused as Ganeti refuses it (%v):\n%s", err, out)
	}
}
