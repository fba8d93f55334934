package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
)

// ganetiFieldList is internal/query/testdata/ganeti-3.0-fields.json: per
// resource, [name, title, kind] of every field Ganeti 3.0.2 declares.
func ganetiFieldList(t *testing.T) map[string][][3]string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(repoDir, "internal", "query", "testdata", "ganeti-3.0-fields.json"))
	if err != nil {
		t.Fatal(err)
	}
	var all map[string]json.RawMessage
	if err := json.Unmarshal(raw, &all); err != nil {
		t.Fatal(err)
	}
	out := map[string][][3]string{}
	for res, v := range all {
		if res == "_source" {
			continue
		}
		var l [][3]string
		if err := json.Unmarshal(v, &l); err != nil {
			t.Fatal(err)
		}
		out[res] = l
	}
	return out
}

type fieldDef struct {
	Name  string `json:"name"`
	Title string `json:"title"`
	Kind  string `json:"kind"`
}

// valueFits reports whether a value with status normal has the JSON type
// its field kind promises (text may be null, as in Ganeti).
func valueFits(kind string, v any) bool {
	switch kind {
	case "text":
		_, ok := v.(string)
		return ok || v == nil
	case "bool":
		_, ok := v.(bool)
		return ok
	case "number", "unit", "timestamp", "float":
		_, ok := v.(float64)
		return ok
	case "other":
		return true
	}
	return false
}

// TestQueryEveryGanetiField asks a running cluster, through LUXI, for
// every field of every resource Ganeti 3.0 knows: QueryFields must list
// each with Ganeti's kind, and Query must answer each with a known status
// and a value of that kind.
func TestQueryEveryGanetiField(t *testing.T) {
	c := newCluster(t, clusterOpts{nodes: 1, hypervisors: []string{"fake"}})
	ctx := context.Background()
	op := createOp("q1", "", 16)
	op["nics"] = []any{map[string]any{"mac": "aa:00:00:12:34:56", "name": "eth0"}}
	c.mustSucceed(op)

	// nodes: 1 is one node besides the master.
	wantRows := map[string]int{"instance": 1, "node": 2, "group": 1, "cluster": 1, "network": 0, "export": 0}
	for res, want := range ganetiFieldList(t) {
		var fr struct {
			Fields []fieldDef `json:"fields"`
		}
		if err := c.luxi.Call(ctx, "QueryFields", []any{res, nil}, &fr); err != nil {
			t.Errorf("QueryFields %s: %v", res, err)
			continue
		}
		kinds := map[string]string{}
		for _, f := range fr.Fields {
			kinds[f.Name] = f.Kind
		}
		var names []string
		for _, w := range want {
			names = append(names, w[0])
			if kinds[w[0]] != w[2] {
				t.Errorf("%s: field %s has kind %q, Ganeti's is %q", res, w[0], kinds[w[0]], w[2])
			}
		}
		var qr struct {
			Fields []fieldDef `json:"fields"`
			Data   [][][2]any `json:"data"`
		}
		if err := c.luxi.Call(ctx, "Query", []any{res, names, nil}, &qr); err != nil {
			t.Errorf("Query %s: %v", res, err)
			continue
		}
		if n, ok := wantRows[res]; ok && len(qr.Data) != n {
			t.Errorf("Query %s: %d rows, want %d", res, len(qr.Data), n)
		}
		for _, row := range qr.Data {
			if len(row) != len(names) {
				t.Fatalf("Query %s: row of %d cells for %d fields", res, len(row), len(names))
			}
			for i, cell := range row {
				st, _ := cell[0].(float64)
				switch {
				case st < 0 || st > 4 || st == 1:
					t.Errorf("%s.%s: status %v", res, names[i], cell[0])
				case st == 0 && !valueFits(want[i][2], cell[1]):
					t.Errorf("%s.%s: value %#v is not of kind %s", res, names[i], cell[1], want[i][2])
				case st != 0 && cell[1] != nil:
					t.Errorf("%s.%s: status %v with value %#v", res, names[i], st, cell[1])
				}
			}
		}
	}

	// The NIC fields of the one instance, by list and by index.
	rows, err := c.luxi.QueryInstances(ctx, []string{"q1"}, []string{"nic.names", "nic.macs", "nic.vlans", "mac", "nic.name/0", "ip", "nic.mode/1", "pnode.group"}, false)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(rows[0])
	if string(b) != `[["eth0"],["aa:00:00:12:34:56"],[""],"aa:00:00:12:34:56","eth0",null,null,"default"]` {
		t.Errorf("NIC fields = %s", b)
	}
}

// TestQueryShapesGanetiClientsRead checks the answers Ganeti's tools unpack
// whole: QueryClusterInfo (gnt-cluster info), the filled group ipolicy
// (gnt-group info) and OP_INSTANCE_QUERY_DATA's NIC tuples (gnt-instance
// info, move-instance).
func TestQueryShapesGanetiClientsRead(t *testing.T) {
	c := newCluster(t, clusterOpts{nodes: 1, hypervisors: []string{"fake"}})
	ctx := context.Background()
	op := createOp("s1", "", 16)
	op["nics"] = []any{map[string]any{"mac": "aa:00:00:12:34:57"}}
	c.mustSucceed(op)

	var info map[string]any
	if err := c.luxi.Call(ctx, "QueryClusterInfo", []any{}, &info); err != nil {
		t.Fatal(err)
	}
	// The keys of Ganeti 3.0's answer (src/Ganeti/Query/Server.hs).
	for _, k := range []string{"software_version", "protocol_version", "config_version", "os_api_version",
		"export_version", "vcs_version", "architecture", "name", "master", "default_hypervisor",
		"enabled_hypervisors", "hvparams", "os_hvp", "beparams", "osparams", "ipolicy", "nicparams",
		"ndparams", "diskparams", "candidate_pool_size", "max_running_jobs", "max_tracked_jobs",
		"mac_prefix", "master_netdev", "master_netmask", "use_external_mip_script", "volume_group_name",
		"drbd_usermode_helper", "file_storage_dir", "shared_file_storage_dir", "gluster_storage_dir",
		"maintain_node_health", "ctime", "mtime", "uuid", "tags", "uid_pool", "default_iallocator",
		"default_iallocator_params", "reserved_lvs", "primary_ip_version", "prealloc_wipe_disks",
		"hidden_os", "blacklisted_os", "enabled_disk_templates", "install_image",
		"instance_communication_network", "zeroing_image", "compression_tools", "enabled_user_shutdown",
		"enabled_data_collectors", "data_collector_interval", "modify_ssh_setup", "ssh_key_type", "ssh_key_bits"} {
		if _, ok := info[k]; !ok {
			t.Errorf("QueryClusterInfo: key %s missing", k)
		}
	}
	checkPolicy := func(where string, pol any) {
		t.Helper()
		m, _ := pol.(map[string]any)
		for _, k := range []string{"minmax", "std", "disk-templates", "vcpu-ratio", "spindle-ratio"} {
			if _, ok := m[k]; !ok {
				t.Errorf("%s ipolicy: key %s missing in %v", where, k, pol)
			}
		}
		mm, _ := m["minmax"].([]any)
		if len(mm) != 1 {
			t.Fatalf("%s ipolicy minmax = %v", where, m["minmax"])
		}
		if max, _ := mm[0].(map[string]any)["max"].(map[string]any); max["memory-size"] != float64(32768) {
			t.Errorf("%s ipolicy max = %v", where, max)
		}
	}
	checkPolicy("cluster", info["ipolicy"])
	if dp, _ := info["diskparams"].(map[string]any); dp["drbd"] == nil || dp["file"] == nil {
		t.Errorf("cluster diskparams = %v", info["diskparams"])
	}
	groups, err := c.luxi.QueryGroups(ctx, nil, []string{"ipolicy", "custom_ipolicy"}, false)
	if err != nil {
		t.Fatal(err)
	}
	checkPolicy("group", groups[0][0])
	if b, _ := json.Marshal(groups[0][1]); string(b) != "{}" {
		t.Errorf("group custom_ipolicy = %s", b)
	}

	res := c.mustSucceed(map[string]any{"OP_ID": "OP_INSTANCE_QUERY_DATA", "instances": []any{"s1"}, "static": true})
	d, _ := res[0].(map[string]any)["s1"].(map[string]any)
	nics, _ := d["nics"].([]any)
	if len(nics) != 1 {
		t.Fatalf("nics = %#v", d["nics"])
	}
	nic, _ := nics[0].([]any)
	if len(nic) != 9 || nic[0] != nil || nic[2] != nil || nic[3] != "aa:00:00:12:34:57" || nic[7] != nil || nic[8] != nil {
		t.Errorf("nic = %#v, want Ganeti's 9 items", nic)
	}
	if _, ok := nic[4].(string); !ok {
		t.Errorf("nic mode = %#v, want text", nic[4])
	}
	if d["pnode_group_name"] != "default" {
		t.Errorf("pnode_group_name = %v", d["pnode_group_name"])
	}

	var nets, exps []any
	if err := c.luxi.Call(ctx, "QueryNetworks", []any{nil, []string{"name", "network"}, false}, &nets); err != nil || len(nets) != 0 {
		t.Errorf("QueryNetworks = %v, %v", nets, err)
	}
	if err := c.luxi.Call(ctx, "QueryExports", []any{nil, false}, &exps); err != nil || len(exps) != 0 {
		t.Errorf("QueryExports = %v, %v", exps, err)
	}
	if !slices.Contains([]string{"64bit", "32bit"}, info["architecture"].([]any)[0].(string)) {
		t.Errorf("architecture = %v", info["architecture"])
	}
}

// TestGanetiToolsPrintCorralInfo feeds QueryClusterInfo's and instance
// info's answers to Ganeti 3.0's own gnt-cluster info and gnt-instance
// info formatting (testdata/ganeti_info_print.py), which unpack every key
// and fail on a missing one or a wrong shape.
func TestGanetiToolsPrintCorralInfo(t *testing.T) {
	if err := exec.Command("/usr/bin/python3", "-c", "import sys; sys.path.insert(0, '/usr/share/ganeti/3.0'); import ganeti.client.gnt_cluster").Run(); err != nil {
		t.Skipf("Debian's ganeti 3.0 is not installed: %v", err)
	}
	c := newCluster(t, clusterOpts{nodes: 1, hypervisors: []string{"fake"}})
	ctx := context.Background()
	op := createOp("p1", "", 16)
	op["nics"] = []any{map[string]any{"mac": "aa:00:00:12:34:58", "name": "eth0"}}
	c.mustSucceed(op)
	var info map[string]any
	if err := c.luxi.Call(ctx, "QueryClusterInfo", []any{}, &info); err != nil {
		t.Fatal(err)
	}
	res := c.mustSucceed(map[string]any{"OP_ID": "OP_INSTANCE_QUERY_DATA", "instances": []any{"p1"}, "static": false})
	in, _ := json.Marshal(map[string]any{"cluster_info": info, "instance": res[0].(map[string]any)["p1"]})
	cmd := exec.Command("/usr/bin/python3", filepath.Join("testdata", "ganeti_info_print.py"))
	cmd.Stdin = bytes.NewReader(in)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("Ganeti's formatting failed: %v\n%s", err, out)
	}
	t.Logf("Ganeti prints:\n%s", out)
	for _, want := range []string{"Instance policy - limits for instances:", "memory-size: 32768",
		"Default disk parameters:", "Instance name: p1", "nic/0:", "MAC: aa:00:00:12:34:58", "mode: bridged"} {
		if !bytes.Contains(out, []byte(want)) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}
