package e2e

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestRAPIModifyDevices: Ganeti's own RAPI client adds, changes and
// removes a disk and a NIC through PUT /2/instances/{name}/modify, in its
// [op, index, params] shape; hotplug on a hypervisor without it fails as
// Ganeti's does, hotplug_if_possible falls back to a cold change.
func TestRAPIModifyDevices(t *testing.T) {
	requireRoot(t)
	requireRAPIClient(t)
	c := newCluster(t, clusterOpts{nodes: 1, hypervisors: []string{"fake"}})
	s := devRAPI(t, c)
	c.mustSucceed(map[string]any{"OP_ID": "OP_INSTANCE_CREATE", "instance_name": "web1", "disk_template": "file",
		"disks": []any{map[string]any{"size": 64}}, "nics": []any{map[string]any{}}, "os_type": "tiny+default",
		"hypervisor": "fake", "start": false})
	r := s.py(t, "devices", "web1")
	js := func(v any) string {
		b, _ := json.Marshal(v)
		return string(b)
	}
	for _, step := range []string{"add", "modify", "remove", "startup", "hotplug_if_possible"} {
		if v, _ := r[step].(map[string]any); v["ok"] != true || v["status"] != "success" {
			t.Errorf("%s: job did not succeed: %v", step, r[step])
		}
	}
	added, _ := r["after_add"].(map[string]any)
	macs, _ := added["macs"].([]any)
	if js(added["sizes"]) != `[64,32]` || js(added["names"]) != `[null,"data"]` || len(macs) != 2 || macs[0] == macs[1] ||
		!strings.HasPrefix(macs[1].(string), "aa:00:00:") {
		t.Errorf("after the add: %s", js(added))
	}
	if js(r["modify_result"]) != `[[["disk.mode/1","ro"]]]` {
		t.Errorf("the modify's result: %s", js(r["modify_result"]))
	}
	removed, _ := r["after_remove"].(map[string]any)
	if js(removed["sizes"]) != `[64]` || js(removed["macs"]) != js([]any{macs[0]}) {
		t.Errorf("after the remove: %s (the first NIC was %v)", js(removed), macs[0])
	}
	if v, _ := r["hotplug"].(map[string]any); v["status"] != "error" || !strings.Contains(js(r["hotplug_error"]), "Hotplug is not possible") {
		t.Errorf("hotplug on the fake hypervisor: %v %s", r["hotplug"], js(r["hotplug_error"]))
	}
	if r["nic_count"] != 2.0 {
		t.Errorf("NICs after the cold add: %v", r["nic_count"])
	}
	if out, err := c.corral("instance", "modify", "--net", "1:remove", "web1"); err != nil || !strings.Contains(out, "nic/1 -> remove") {
		t.Errorf("corral instance modify --net 1:remove: %v\n%s", err, out)
	}
}
