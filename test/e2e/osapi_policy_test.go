package e2e

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestOSVerifyPrivateParamsAndOSModify drives the OS API items through
// real daemons, Corral's CLI and Ganeti's gnt-* tools: the tiny OS's
// verify script rejects a marker with a space on create and modify; a
// private OS parameter is stored, reaches the create script, and shows
// nowhere (job results, queries, daemon logs); gnt-os modify hides and
// blacklists the OS and sets per-OS hypervisor parameters.
func TestOSVerifyPrivateParamsAndOSModify(t *testing.T) {
	c := newDropinCluster(t, 1)
	ctx := context.Background()

	// The verify script runs on create and its rejection is Ganeti's.
	op := createOp("bad1", "", 64)
	op["osparams"] = map[string]any{"marker": "two words"}
	msg := c.mustFail("OpExecError", op)
	for _, want := range []string{"OS Parameters validation failed on node ", "OS validation script failed (exited with exit code 1), output: ",
		"invalid parameter marker: marker must not contain whitespace"} {
		if !strings.Contains(msg, want) {
			t.Fatalf("create with a rejected marker: %s lacks %q", msg, want)
		}
	}
	if rows, _ := c.luxi.QueryInstances(ctx, []string{"bad1"}, []string{"name"}, false); len(rows) != 0 {
		t.Fatal("the refused instance was added")
	}

	// A private parameter through the CLI: stored, never shown.
	const secretMarker = "privmarker7319"
	out, err := c.corral("instance", "add", "-t", "file", "-o", "tiny+default", "-s", "64M", "-H", "fake", "-B", "memory=128",
		"--no-start", "--no-nics", "--os-parameters-private", "marker="+secretMarker, "pv1")
	if err != nil {
		t.Fatalf("instance add with a private parameter: %v\n%s", err, out)
	}
	rows, err := c.luxi.QueryInstances(ctx, []string{"pv1"}, []string{"osparams", "custom_osparams"}, false)
	if err != nil || len(rows) != 1 {
		t.Fatalf("query: %v %v", rows, err)
	}
	if b, _ := json.Marshal(rows); strings.Contains(string(b), secretMarker) {
		t.Fatalf("instance query shows the private value: %s", b)
	}
	// The op's input keeps it for writers, as docs/SECURITY.md says; no
	// answer about the instance or job list shows it.
	for _, args := range [][]string{{"instance", "info", "pv1"}, {"instance", "list", "-o", "name,osparams"}, {"job", "list"}} {
		if out, _ := c.corral(args...); strings.Contains(out, secretMarker) {
			t.Fatalf("corral %v shows the private value:\n%s", args, out)
		}
	}
	// The create script saw it: tiny writes the marker into the disk.
	uuids, err := c.luxi.QueryInstances(ctx, []string{"pv1"}, []string{"uuid"}, false)
	if err != nil || len(uuids) != 1 {
		t.Fatalf("uuid: %v %v", uuids, err)
	}
	disk := findDiskFile(t, c.st.StateDir, uuids[0][0].(string))
	if data, err := os.ReadFile(disk); err != nil || !strings.Contains(string(data), secretMarker) {
		t.Fatalf("the create script did not get the private marker (disk %s: %v)", disk, err)
	}

	// modify: a rejected value is refused, a private change is listed
	// without its value.
	// (A private value wins over a public one of the same name, as in
	// Ganeti, so the rejected value is given as private here.)
	if out, err := c.corral("instance", "modify", "--os-parameters-private", "marker="+strings.Repeat("x", 65), "pv1"); err == nil ||
		!strings.Contains(out, "OS validation script failed") || !strings.Contains(out, "at most 64 are allowed") || strings.Contains(out, "xxxxxxxx") {
		t.Fatalf("modify with a rejected marker: %v\n%s", err, out)
	}
	out, err = c.corral("instance", "modify", "--os-parameters-private", "marker=other5521", "pv1")
	if err != nil || !strings.Contains(out, "os_private/marker") || strings.Contains(out, "other5521") {
		t.Fatalf("modify of a private parameter: %v\n%s", err, out)
	}
	if out, err := c.corral("instance", "reinstall", "-f", "--os-parameters-private", "marker=third8812", "pv1"); err != nil {
		t.Fatalf("reinstall with a private parameter: %v\n%s", err, out)
	}
	for _, log := range []string{"corrald.log", "node1.log", "node2.log"} {
		data, _ := os.ReadFile(filepath.Join(c.st.StateDir, "logs", log))
		for _, v := range []string{secretMarker, "other5521", "third8812"} {
			if strings.Contains(string(data), v) {
				t.Fatalf("%s holds the private value %s", log, v)
			}
		}
	}

	// gnt-os modify: per-OS hypervisor parameters, hidden, blacklisted.
	c.mustGnt("gnt-os", "modify", "-H", "fake:migration_downtime=417", "tiny")
	rows, err = c.luxi.QueryInstances(ctx, []string{"pv1"}, []string{"hvparams"}, false)
	if err != nil || !regexp.MustCompile(`"migration_downtime":"?417`).MatchString(mustJSONe2e(rows)) {
		t.Fatalf("the instance does not get the OS's hypervisor parameters: %v %v", rows, err)
	}
	c.mustGnt("gnt-os", "modify", "--hidden=yes", "tiny")
	if out := c.mustGnt("gnt-os", "list"); strings.Contains(out, "tiny") {
		t.Fatalf("gnt-os list shows a hidden OS:\n%s", out)
	}
	if out, _ := c.corral("os", "list", "--all"); !strings.Contains(out, "tiny+default") {
		t.Fatalf("corral os list --all lacks the hidden OS:\n%s", out)
	}
	if out, err := c.corral("os", "modify", "tiny+default", "--blacklisted", "yes"); err != nil {
		t.Fatalf("corral os modify --blacklisted: %v\n%s", err, out)
	}
	// gnt-cluster modify sets the cluster's own instance policy.
	c.mustGnt("gnt-cluster", "modify", "--ipolicy-vcpu-ratio=2.5", "--ipolicy-std-specs=cpu-count=2")
	var info map[string]any
	if err := c.luxi.Call(ctx, "QueryClusterInfo", []any{}, &info); err != nil {
		t.Fatal(err)
	}
	if pol, _ := info["ipolicy"].(map[string]any); pol["vcpu-ratio"] != 2.5 || pol["std"].(map[string]any)["cpu-count"] != 2.0 {
		t.Fatalf("cluster ipolicy after gnt-cluster modify: %v", info["ipolicy"])
	}

	msg = c.mustFail("wrong_state", createOp("bl1", "", 64))
	if !strings.Contains(msg, "Guest OS 'tiny+default' is not allowed for installation") {
		t.Fatalf("create of a blacklisted OS: %s", msg)
	}
}

// TestAllocPolicyAndIPolicy: an unallocable group is never chosen by the
// built-in allocator; a group's instance policy refuses a create with
// Ganeti's text; cluster verify warns about an instance outside it.
func TestAllocPolicyAndIPolicy(t *testing.T) {
	c := newCluster(t, clusterOpts{nodes: 2, hypervisors: []string{"fake"}})
	ctx := context.Background()
	nodes, err := c.luxi.QueryNodes(ctx, nil, []string{"name", "master"}, false)
	if err != nil || len(nodes) != 3 {
		t.Fatalf("nodes: %v %v", nodes, err)
	}
	var master, other string
	for _, n := range nodes {
		if n[1] == true {
			master = n[0].(string)
		} else {
			other = n[0].(string) // the last non-master node goes to rack2
		}
	}
	if out, err := c.corral("group", "add", "--alloc-policy", "unallocable", "rack2"); err != nil {
		t.Fatalf("group add: %v\n%s", err, out)
	}
	if out, err := c.corral("group", "assign-nodes", "rack2", other); err != nil {
		t.Fatalf("assign: %v\n%s", err, out)
	}
	for _, name := range []string{"p1", "p2", "p3", "p4"} {
		c.mustSucceed(createOp(name, "", 64))
	}
	for name, node := range c.primaries() {
		if node == other {
			t.Fatalf("instance %s placed on %s, in the unallocable group", name, node)
		}
	}

	groups, err := c.luxi.QueryGroups(ctx, []string{"default"}, []string{"uuid"}, false)
	if err != nil || len(groups) != 1 {
		t.Fatalf("groups: %v %v", groups, err)
	}
	c.mustSucceed(map[string]any{"OP_ID": "OP_GROUP_SET_PARAMS", "group_name": "default", "ipolicy": map[string]any{
		"minmax": []any{map[string]any{
			"min": map[string]any{"cpu-count": 1, "disk-count": 1, "disk-size": 128, "memory-size": 128, "nic-count": 0, "spindle-use": 0},
			"max": map[string]any{"cpu-count": 2, "disk-count": 2, "disk-size": 4096, "memory-size": 4096, "nic-count": 4, "spindle-use": 4}}},
	}})
	msg := c.mustFail("wrong_input", createOp("big", master, 64))
	want := "Instance allocation to group " + groups[0][0].(string) + " (default) violates policy: disk-size/0 value 64 is not in range [128, 4096]"
	if !strings.Contains(msg, want) {
		t.Fatalf("create outside the policy: %s\nwant %s", msg, want)
	}
	out, _ := c.corral("cluster", "verify")
	if !strings.Contains(out, "instance p1: disk-size/0 value 64 is not in range [128, 4096]") {
		t.Fatalf("cluster verify does not report the instance outside the policy:\n%s", out)
	}
}

func mustJSONe2e(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// TestInstanceAddWithHail: `corral instance add -I hail` runs Debian's
// hail, unchanged, on the protocol document, which carries the groups'
// alloc_policy: it never places on the unallocable group's node. (The
// instances have 1 GiB disks: hail refuses every placement while existing
// instances violate the policy, and Ganeti's default minimum disk is 1 GiB.)
func TestInstanceAddWithHail(t *testing.T) {
	const hail = "/usr/lib/ganeti/iallocators/hail"
	if _, err := os.Stat(hail); err != nil {
		t.Skipf("hail (ganeti-htools) is not installed: %v", err)
	}
	c := newCluster(t, clusterOpts{nodes: 2, hypervisors: []string{"fake"}})
	nodes := c.nodeNames()
	if len(nodes) != 3 {
		t.Fatalf("nodes %v, want 3", nodes)
	}
	fenced := nodes[2]
	if out, err := c.corral("group", "add", "--alloc-policy", "unallocable", "rack2"); err != nil {
		t.Fatalf("group add: %v\n%s", err, out)
	}
	if out, err := c.corral("group", "assign-nodes", "rack2", fenced); err != nil {
		t.Fatalf("assign: %v\n%s", err, out)
	}
	for _, name := range []string{"h1", "h2", "h3", "h4"} {
		out, err := c.corral("instance", "add", "-t", "file", "-s", "1G", "-o", "tiny+default", "--no-install", "--no-start",
			"-H", "fake", "-B", "memory=128", "-I", "hail", name)
		if err != nil {
			t.Fatalf("instance add -I hail %s: %v\n%s", name, err, out)
		}
	}
	used := map[string]bool{}
	for name, node := range c.primaries() {
		if node == fenced {
			t.Fatalf("hail placed %s on %s, in the unallocable group", name, node)
		}
		used[node] = true
	}
	if len(used) != 2 {
		t.Fatalf("hail used nodes %v, want both allocable ones", used)
	}
}
