package cmdlib

import (
	"encoding/json"
	"path/filepath"
	"slices"
	"testing"
)

// TestInstanceQueryDataShape checks OP_INSTANCE_QUERY_DATA answers with
// Ganeti 3.0's keys and shapes: NICs as 9-item tuples with null for an
// absent name and IP, disks as full status dicts, [] for no NICs or disks.
func TestInstanceQueryDataShape(t *testing.T) {
	e := openEnv(t, filepath.Join(t.TempDir(), "s.db"), newNodeDouble(), true)
	defer e.close()
	if st, res := e.run(t, create("i1", map[string]any{"nics": []any{map[string]any{"mac": "aa:00:00:11:22:33"}}})); st != "success" {
		t.Fatalf("create i1: %s %v", st, res)
	}
	if st, res := e.run(t, create("i2", map[string]any{"disk_template": "diskless", "disks": []any{}, "nics": []any{}})); st != "success" {
		t.Fatalf("create i2: %s %v", st, res)
	}
	st, res := e.run(t, map[string]any{"OP_ID": "OP_INSTANCE_QUERY_DATA", "instances": []any{"i1", "i2"}, "static": false})
	if st != "success" {
		t.Fatalf("query data: %s %v", st, res)
	}
	raw, _ := json.Marshal(res[0])
	var out map[string]map[string]any
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatal(err)
	}
	keys := []string{"name", "config_state", "run_state", "pnode", "pnode_group_uuid", "pnode_group_name",
		"snodes", "snodes_group_uuids", "snodes_group_names", "os", "nics", "disk_template", "disks",
		"hypervisor", "network_port", "hv_instance", "hv_actual", "be_instance", "be_actual",
		"os_instance", "os_actual", "serial_no", "mtime", "ctime", "uuid"}
	for _, name := range []string{"i1", "i2"} {
		for _, k := range keys {
			if _, ok := out[name][k]; !ok {
				t.Errorf("%s: key %q missing", name, k)
			}
		}
		for _, k := range []string{"hv_instance", "be_instance", "os_instance", "hv_actual", "be_actual", "os_actual"} {
			if _, ok := out[name][k].(map[string]any); !ok {
				t.Errorf("%s: %s = %#v, want a dict", name, k, out[name][k])
			}
		}
	}
	i1 := out["i1"]
	if i1["pnode_group_name"] != "default" || i1["run_state"] != "up" || i1["network_port"] != nil {
		t.Errorf("i1 group/run_state/port = %v %v %v", i1["pnode_group_name"], i1["run_state"], i1["network_port"])
	}
	nics, _ := i1["nics"].([]any)
	if len(nics) != 1 {
		t.Fatalf("i1 nics = %#v", i1["nics"])
	}
	nic, _ := nics[0].([]any)
	if len(nic) != 9 || nic[0] != nil || nic[2] != nil || nic[3] != "aa:00:00:11:22:33" ||
		nic[4] != "bridged" || nic[5] != "br0" || nic[6] != "" || nic[7] != nil || nic[8] != nil {
		t.Errorf("i1 nic = %#v, want [null, uuid, null, mac, bridged, br0, \"\", null, null]", nic)
	}
	if u, _ := nic[1].(string); u == "" {
		t.Errorf("i1 nic uuid empty: %#v", nic)
	}
	disks, _ := i1["disks"].([]any)
	if len(disks) != 1 {
		t.Fatalf("i1 disks = %#v", i1["disks"])
	}
	d, _ := disks[0].(map[string]any)
	var dkeys []string
	for k := range d {
		dkeys = append(dkeys, k)
	}
	slices.Sort(dkeys)
	want := []string{"children", "dev_type", "drbd_info", "iv_name", "logical_id", "mode", "name", "pstatus", "size", "spindles", "sstatus", "uuid"}
	if !slices.Equal(dkeys, want) {
		t.Errorf("disk keys = %v, want %v", dkeys, want)
	}
	if d["iv_name"] != "disk/0" || d["size"] != float64(100) || d["dev_type"] != "file" || d["name"] != nil {
		t.Errorf("disk = %#v", d)
	}
	if c, ok := d["children"].([]any); !ok || len(c) != 0 {
		t.Errorf("disk children = %#v, want []", d["children"])
	}
	i2 := out["i2"]
	for _, k := range []string{"nics", "disks", "snodes"} {
		if l, ok := i2[k].([]any); !ok || len(l) != 0 {
			t.Errorf("i2 %s = %#v, want []", k, i2[k])
		}
	}
}
