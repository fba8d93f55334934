package e2e

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
)

// TestRAPIGroupsWithGanetiClient drives node group management through
// Debian's Ganeti RAPI client against a two-node dev cluster, and checks
// each effect over LUXI and with the corral CLI run as a process.
func TestRAPIGroupsWithGanetiClient(t *testing.T) {
	requireRoot(t)
	requireRAPIClient(t)
	c := newCluster(t, clusterOpts{nodes: 1, hypervisors: []string{"fake"}}) // the master and one more
	s := devRAPI(t, c)
	ctx := context.Background()

	// group returns a group's uuid, alloc_policy and node_list over LUXI,
	// or nil when it does not exist.
	group := func(name string) []any {
		t.Helper()
		rows, err := c.luxi.QueryGroups(ctx, []string{name}, []string{"uuid", "alloc_policy", "node_list"}, false)
		if err != nil || len(rows) == 0 {
			return nil
		}
		return rows[0]
	}
	groupNames := func() []string {
		t.Helper()
		rows, err := c.luxi.QueryGroups(ctx, nil, []string{"name"}, false)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, r := range rows {
			out = append(out, r[0].(string))
		}
		slices.Sort(out)
		return out
	}
	cli := func(args ...string) string {
		t.Helper()
		out, err := c.corral(args...)
		if err != nil {
			t.Fatalf("corral %v: %v\n%s", args, err, out)
		}
		return out
	}
	mustOK := func(step string, v map[string]any) {
		t.Helper()
		if v["ok"] != true || v["status"] != "success" {
			t.Fatalf("%s: job did not succeed: %v", step, v)
		}
	}

	// The node to move: any but the master.
	rows, err := c.luxi.QueryNodes(ctx, nil, []string{"name", "role"}, false)
	if err != nil {
		t.Fatal(err)
	}
	var node string
	for _, r := range rows {
		if r[1] != "M" {
			node = r[0].(string)
		}
	}
	if len(rows) != 2 || node == "" {
		t.Fatalf("nodes %v: want a master and one more", rows)
	}
	def := group("default")
	if def == nil {
		t.Fatal("no default group")
	}

	// Create, and a dry run that creates nothing.
	cr := s.py(t, "groups", "create", "rack2", "last_resort")
	mustOK("create", cr)
	if dry, _ := cr["dry"].(map[string]any); dry["ok"] != true {
		t.Fatalf("dry-run create: %v", cr["dry"])
	}
	if got := groupNames(); !slices.Equal(got, []string{"default", "rack2"}) {
		t.Fatalf("groups after create: %v", got)
	}
	rack := group("rack2")
	if rack[1] != "last_resort" {
		t.Fatalf("rack2: %v", rack)
	}
	if out := cli("group", "list", "--no-headers", "--separator", ",", "-o", "name,alloc_policy,node_cnt"); !strings.Contains(out, "rack2,last_resort,0\n") {
		t.Fatalf("corral group list after create:\n%s", out)
	}

	// Reads.
	r := s.py(t, "groups", "read", "rack2", node)
	names, _ := r["names"].([]any)
	bulk, _ := r["bulk"].([]any)
	g, _ := r["group"].(map[string]any)
	n, _ := r["node"].(map[string]any)
	if len(names) != 2 || len(bulk) != 2 || !slices.Contains(names, any("rack2")) {
		t.Errorf("GetGroups: %v, bulk %v", names, bulk)
	}
	for _, b := range bulk {
		if m, _ := b.(map[string]any); m["uuid"] == nil || m["node_list"] == nil || m["alloc_policy"] == nil {
			t.Errorf("bulk group %v lacks fields", b)
		}
	}
	if g["name"] != "rack2" || g["uuid"] != rack[0] || g["alloc_policy"] != "last_resort" || g["node_cnt"] != 0.0 {
		t.Errorf("GetGroup(rack2): %v", g)
	}
	if n["group.uuid"] != def[0] {
		t.Errorf("GetNode(%s) group.uuid %v, want the default group's %v", node, n["group.uuid"], def[0])
	}
	if m, _ := r["missing"].(map[string]any); m["code"] != 404.0 {
		t.Errorf("GetGroup of a missing group: %v, want 404", r["missing"])
	}

	// Modify and rename.
	mustOK("modify", s.py(t, "groups", "modify", "rack2", "preferred"))
	if got := group("rack2"); got[1] != "preferred" {
		t.Fatalf("after modify: %v", got)
	}
	mustOK("rename", s.py(t, "groups", "rename", "rack2", "rack-b"))
	if group("rack2") != nil {
		t.Fatal("rack2 still known after the rename")
	}
	if got := group("rack-b"); got == nil || got[0] != rack[0] {
		t.Fatalf("rack-b after the rename: %v (uuid was %v)", got, rack[0])
	}

	// Move the node into the new group.
	mustOK("assign", s.py(t, "groups", "assign", "rack-b", node))
	r = s.py(t, "groups", "read", "rack-b", node)
	g, _ = r["group"].(map[string]any)
	n, _ = r["node"].(map[string]any)
	if n["group.uuid"] != rack[0] {
		t.Errorf("GetNode(%s) group.uuid %v after the move, want %v", node, n["group.uuid"], rack[0])
	}
	if l, _ := json.Marshal(g["node_list"]); string(l) != `["`+node+`"]` {
		t.Errorf("rack-b node_list %s", l)
	}
	if out := cli("node", "list", "--no-headers", "-o", "name,group", node); !strings.Contains(out, "rack-b") {
		t.Errorf("corral node list after the move:\n%s", out)
	}
	if out := cli("group", "list", "--no-headers", "--separator", ",", "-o", "name,node_list", "rack-b"); out != "rack-b,"+node+"\n" {
		t.Errorf("corral group list after the move: %q", out)
	}

	// A group with a node cannot be removed: the job fails with
	// ECODE_STATE, which is what the client sees in the job's result.
	d := s.py(t, "groups", "delete", "rack-b")
	if d["ok"] != false || d["status"] != "error" {
		t.Fatalf("deleting a non-empty group: %v", d)
	}
	res, _ := json.Marshal(d["job_info"].(map[string]any)["opresult"])
	if !strings.Contains(string(res), `"wrong_state"`) || !strings.Contains(string(res), "not empty") {
		t.Errorf("error of the refused delete: %s", res)
	}
	if group("rack-b") == nil {
		t.Fatal("the non-empty group was removed")
	}

	// Back to the default group, then remove the empty group.
	mustOK("assign back", s.py(t, "groups", "assign", "default", node))
	r = s.py(t, "groups", "read", "default", node)
	if n, _ = r["node"].(map[string]any); n["group.uuid"] != def[0] {
		t.Errorf("GetNode(%s) group.uuid %v after moving back, want %v", node, n["group.uuid"], def[0])
	}
	mustOK("delete", s.py(t, "groups", "delete", "rack-b"))
	if got := groupNames(); !slices.Equal(got, []string{"default"}) {
		t.Fatalf("groups after delete: %v", got)
	}
	if out := cli("group", "list", "--no-headers", "-o", "name"); out != "default\n" {
		t.Errorf("corral group list after delete: %q", out)
	}
}
