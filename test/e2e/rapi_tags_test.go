package e2e

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
)

// TestRAPITags drives the tag resources with Ganeti's own RAPI client and
// checks the effects through LUXI, the instance resource and the CLI.
func TestRAPITags(t *testing.T) {
	requireRoot(t)
	requireRAPIClient(t)
	c := newCluster(t, clusterOpts{nodes: 1, hypervisors: []string{"fake"}})
	s := devRAPI(t, c)
	ctx := context.Background()

	c.mustSucceed(map[string]any{"OP_ID": "OP_INSTANCE_CREATE", "instance_name": "web1", "disk_template": "file",
		"disks": []any{map[string]any{"size": 64}}, "nics": []any{}, "os_type": "tiny+default",
		"hypervisor": "fake", "start": false})
	nodes, err := c.luxi.QueryNodes(ctx, nil, []string{"name"}, false)
	if err != nil || len(nodes) == 0 {
		t.Fatalf("nodes %v: %v", nodes, err)
	}
	groups, err := c.luxi.QueryGroups(ctx, nil, []string{"name"}, false)
	if err != nil || len(groups) == 0 {
		t.Fatalf("groups %v: %v", groups, err)
	}
	node, _ := nodes[0][0].(string)
	group, _ := groups[0][0].(string)

	r := s.py(t, "tags", "web1", node, group)
	js := func(k string) string {
		b, _ := json.Marshal(r[k])
		return string(b)
	}
	for _, step := range []string{"add_instance", "dry_run", "delete_instance", "add_node", "add_cluster", "add_group"} {
		if v, _ := r[step].(map[string]any); v["ok"] != true || v["status"] != "success" {
			t.Errorf("%s: job did not succeed: %v", step, r[step])
		}
	}
	want := map[string]string{
		"instance_tags":  `["env:prod","role:web"]`,
		"instance_field": `["env:prod","role:web"]`,
		"after_dry_run":  `["env:prod","role:web"]`,
		"after_delete":   `["role:web"]`,
		"node_tags":      `["rack:4"]`,
		"cluster_tags":   `["site:ams"]`,
		"group_tags":     `["tier:1"]`,
		"after_bad_tag":  `["role:web"]`,
	}
	for k, w := range want {
		if got := js(k); got != w {
			t.Errorf("%s = %s, want %s", k, got, w)
		}
	}
	// Removing a tag the instance lacks is a failed job, as in Ganeti.
	if v, _ := r["delete_missing"].(map[string]any); v["ok"] != false || v["status"] != "error" {
		t.Errorf("deleting a missing tag: %v", r["delete_missing"])
	}
	// A bad tag is refused before any job: the client raises the 400.
	if v, _ := r["bad_tag"].(map[string]any); v["code"] != 400.0 || !strings.Contains(v["message"].(string), "Tag contains invalid characters") {
		t.Errorf("bad tag: %v, want a 400 naming the invalid characters", r["bad_tag"])
	}

	// The effect as the master and the CLI see it.
	tags, err := c.luxi.QueryTags(ctx, "instance", "web1")
	if err != nil || strings.Join(tags, ",") != "role:web" {
		t.Errorf("LUXI QueryTags: %v, %v", tags, err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"instance", "list-tags", "web1"}, "role:web\n"},
		{[]string{"node", "list-tags", node}, "rack:4\n"},
		{[]string{"cluster", "list-tags"}, "site:ams\n"},
		{[]string{"cluster", "search-tags", ":"}, "/cluster site:ams\n/instances/web1 role:web\n/nodegroup/" + group + " tier:1\n/nodes/" + node + " rack:4\n"},
	} {
		out, err := c.corral(tc.args...)
		if err != nil || out != tc.want {
			t.Errorf("corral %v: %v\n%s\nwant:\n%s", tc.args, err, out, tc.want)
		}
	}
	out, err := c.corral("instance", "remove-tags", "web1", "role:web")
	if err != nil {
		t.Fatalf("remove-tags: %v\n%s", err, out)
	}
	if out, err := c.corral("instance", "list-tags", "web1"); err != nil || out != "" {
		t.Errorf("after remove-tags: %q, %v", out, err)
	}
}
