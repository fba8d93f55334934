package e2e

import (
	"context"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestNetworksWithGanetiClients drives networks the way a Ganeti operator
// does, against real daemons: Ganeti's RAPI client creates a network,
// connects it to the default group and creates two instances with
// ip=pool, which get distinct addresses from the pool inside their
// creates; an address held externally is refused to a third; tags and
// modify work; gnt-network list and info (drop-in mode) and corral
// network info show the pool; removing an instance gives its address
// back; the network can go only once disconnected.
func TestNetworksWithGanetiClients(t *testing.T) {
	requireRAPIClient(t)
	c := newDropinCluster(t, 0)
	s := devRAPI(t, c)
	script := filepath.Join(repoDir, "test/e2e/testdata/rapi/networks.py")
	py := func(args ...string) map[string]any {
		t.Helper()
		cmd := exec.Command("/usr/bin/python3", append([]string{script}, args...)...)
		cmd.Env = s.vars
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("networks.py %v: %v\n%s", args, err, stderr.String())
		}
		var v map[string]any
		if err := json.Unmarshal(out, &v); err != nil {
			t.Fatalf("networks.py %v output %q: %v", args, out, err)
		}
		return v
	}
	status := func(r map[string]any, step string) string {
		j, _ := r[step].(map[string]any)
		st, _ := j["status"].(string)
		return st
	}
	errText := func(r map[string]any, step string) string {
		b, _ := json.Marshal(r[step])
		return string(b)
	}

	r := py("setup", "net1", "default")
	for _, step := range []string{"add", "connect", "inst1", "inst2", "tag", "modify"} {
		if status(r, step) != "success" {
			t.Fatalf("%s: %s", step, errText(r, step))
		}
	}
	if status(r, "add_again") != "error" || !strings.Contains(errText(r, "add_again"), "Desired network name 'net1' already exists as a network") {
		t.Errorf("second add: %s", errText(r, "add_again"))
	}
	if status(r, "clash") != "error" || !strings.Contains(errText(r, "clash"), "IP address 10.77.0.2 already in use or does not belong to network net1") {
		t.Errorf("externally reserved address: %s", errText(r, "clash"))
	}
	if status(r, "disconnect_in_use") != "error" || !strings.Contains(errText(r, "disconnect_in_use"), "Conflicting IP addresses found") {
		t.Errorf("disconnect while in use: %s", errText(r, "disconnect_in_use"))
	}

	// The addresses as corrald holds them, over LUXI.
	ctx := context.Background()
	rows, err := c.luxi.QueryInstances(ctx, []string{"netvm1", "netvm2"}, []string{"nic.ips", "nic.networks.names", "nic.modes", "nic.links"}, false)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := json.Marshal(rows)
	if string(got) != `[[["10.77.0.3"],["net1"],["bridged"],["br-corral77"]],[["10.77.0.4"],["net1"],["bridged"],["br-corral77"]]]` {
		t.Errorf("instances' NICs: %s", got)
	}

	// What Ganeti's client read back.
	if names, _ := json.Marshal(r["names"]); string(names) != `["net1"]` {
		t.Errorf("GetNetworks: %s", names)
	}
	bulk, _ := r["bulk"].([]any)
	one, _ := r["one"].(map[string]any)
	if len(bulk) != 1 || one["name"] != "net1" || one["network"] != "10.77.0.0/28" || one["gateway"] != "10.77.0.1" {
		t.Fatalf("GetNetworks(bulk=True) %v; GetNetwork %v", bulk, one)
	}
	for k, want := range map[string]string{
		"free_count": "10", "reserved_count": "6", "map": `"XXXXX..........X"`,
		"external_reservations": `"10.77.0.0, 10.77.0.1, 10.77.0.2, 10.77.0.15"`,
		"group_list":            `[["default","bridged","br-corral77",""]]`, "inst_list": `["netvm1","netvm2"]`,
	} {
		if k == "inst_list" {
			l, _ := one[k].([]any)
			slices.SortFunc(l, func(a, b any) int { return strings.Compare(a.(string), b.(string)) })
		}
		if b, _ := json.Marshal(one[k]); string(b) != want {
			t.Errorf("GetNetwork %s = %s, want %s", k, b, want)
		}
	}
	if tags, _ := json.Marshal(r["tags"]); string(tags) != `["role:lan","zone:a"]` {
		t.Errorf("network tags %s", tags)
	}

	// Ganeti's own gnt-network reads the same, in drop-in mode.
	list := c.mustGnt("gnt-network", "list", "--no-headers", "-o", "name,network,gateway,free_count,inst_cnt")
	if f := strings.Fields(list); strings.Join(f, " ") != "net1 10.77.0.0/28 10.77.0.1 9 2" {
		t.Errorf("gnt-network list: %q", list)
	}
	for _, out := range []string{c.mustGnt("gnt-network", "info", "net1"), mustCorral(t, c, "network", "info", "net1")} {
		for _, want := range []string{"Network name: net1", "  Subnet: 10.77.0.0/28", "  Free: 9 (56.25%)",
			"        0 XXXXX....X.....X", "    default (mode:bridged link:br-corral77 vlan:)", "    netvm1: 0:10.77.0.3"} {
			if !strings.Contains(out, want) {
				t.Errorf("network info lacks %q:\n%s", want, out)
			}
		}
	}

	// The CLI's query filter and field list on the network resource.
	if out := mustCorral(t, c, "network", "list", "--no-headers", "-o", "name", "-F", "free_count < 10 and inst_cnt == 2"); strings.TrimSpace(out) != "net1" {
		t.Errorf("corral network list -F: %q", out)
	}
	if out := mustCorral(t, c, "network", "list-fields", "free_count"); !strings.Contains(out, "free_count") || !strings.Contains(out, "Number of available addresses") {
		t.Errorf("corral network list-fields: %q", out)
	}

	// Ganeti's gnt-instance add takes a pool address too; its removal gives
	// it back.
	c.mustGnt("gnt-instance", "add", "-t", "diskless", "-o", "noop", "-n", "node1", "--no-name-check", "--no-ip-check",
		"-H", "fake", "--net", "0:network=net1,ip=pool", "netvm3")
	rows, err = c.luxi.QueryInstances(ctx, []string{"netvm3"}, []string{"nic.ips", "nic.network.name/0"}, false)
	if got, _ := json.Marshal(rows); err != nil || string(got) != `[[["10.77.0.5"],"net1"]]` {
		t.Errorf("gnt-instance add --net network=net1,ip=pool: %s %v", got, err)
	}
	c.mustGnt("gnt-instance", "remove", "-f", "netvm3")

	// NICs on the network through modify: each change takes or gives back
	// its pool address with the instance's change, and a refused one holds
	// nothing.
	netState := func(want string, wantFree string) {
		t.Helper()
		rows, err := c.luxi.QueryInstances(ctx, []string{"netvm1"}, []string{"nic.ips", "nic.networks.names"}, false)
		if got, _ := json.Marshal(rows); err != nil || string(got) != want {
			t.Errorf("netvm1's NICs: %s %v, want %s", got, err, want)
		}
		if free := strings.TrimSpace(mustCorral(t, c, "network", "list", "--no-headers", "-o", "free_count", "net1")); free != wantFree {
			t.Errorf("net1 free_count %s, want %s", free, wantFree)
		}
	}
	netState(`[[["10.77.0.3"],["net1"]]]`, "9")
	c.mustGnt("gnt-instance", "modify", "--net", "add:network=net1,ip=pool", "netvm1")
	netState(`[[["10.77.0.3","10.77.0.5"],["net1","net1"]]]`, "8")
	c.mustGnt("gnt-instance", "modify", "--net", "1:modify,ip=10.77.0.12", "netvm1")
	netState(`[[["10.77.0.3","10.77.0.12"],["net1","net1"]]]`, "8")
	if out, err := c.corral("instance", "modify", "--net", "add:network=net1,ip=10.77.0.4", "netvm1"); err == nil || !strings.Contains(out, "IP address 10.77.0.4 already in use") {
		t.Errorf("modify adding netvm2's address: %v\n%s", err, out)
	}
	netState(`[[["10.77.0.3","10.77.0.12"],["net1","net1"]]]`, "8")
	mustCorral(t, c, "instance", "modify", "--net", "1:network=none", "netvm1")
	netState(`[[["10.77.0.3",null],["net1",null]]]`, "9")
	mustCorral(t, c, "instance", "modify", "--net", "1:network=net1,ip=pool", "netvm1")
	netState(`[[["10.77.0.3","10.77.0.5"],["net1","net1"]]]`, "8")
	c.mustGnt("gnt-instance", "modify", "--net", "1:remove", "netvm1")
	netState(`[[["10.77.0.3"],["net1"]]]`, "9")

	r = py("teardown", "net1", "default")
	if status(r, "remove_connected") != "error" || !strings.Contains(errText(r, "remove_connected"), "Network still connected") {
		t.Errorf("remove while connected: %s", errText(r, "remove_connected"))
	}
	after, _ := r["after_remove"].(map[string]any)
	if after["map"] != "XXXX.....X.....X" || after["free_count"] != 10.0 {
		t.Errorf("after removing netvm2: map %v free %v", after["map"], after["free_count"])
	}
	if status(r, "disconnect") != "error" {
		t.Errorf("disconnect with netvm1 still on it: %s", errText(r, "disconnect"))
	}
	mustCorral(t, c, "instance", "remove", "--force", "netvm1")
	mustCorral(t, c, "network", "disconnect", "net1", "default")
	mustCorral(t, c, "network", "remove", "net1")
	if out := mustCorral(t, c, "network", "list", "--no-headers"); strings.TrimSpace(out) != "" {
		t.Errorf("networks left: %q", out)
	}
}

func mustCorral(t *testing.T, c *cluster, args ...string) string {
	t.Helper()
	out, err := c.corral(args...)
	if err != nil {
		t.Fatalf("corral %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}
