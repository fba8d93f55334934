package e2e

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestGanetiTools runs Ganeti's own command-line tools, unchanged (Debian's
// ganeti 3.0 package), against a dev cluster in drop-in mode, the way
// Ganeti's documentation shows them, and checks each one's effect through
// Corral's LUXI socket or the tools' own output, not just its exit code.
// The subtests share one cluster and run in order.
func TestGanetiTools(t *testing.T) {
	c := newDropinCluster(t, 1)
	steps := []struct {
		name string
		fn   func(t *testing.T, c *cluster)
	}{
		{"cluster", ganetiClusterCommands},
		{"node", ganetiNodeCommands},
		{"group", ganetiGroupCommands},
		{"instance", ganetiInstanceCommands},
		{"os", ganetiOSCommands},
		{"backup", ganetiBackupCommands},
		{"job", ganetiJobCommands},
	}
	for _, s := range steps {
		if !t.Run(s.name, func(t *testing.T) { s.fn(t, c.withT(t)) }) {
			return
		}
	}
}

// withT is the cluster seen from a subtest, which it fails.
func (c *cluster) withT(t *testing.T) *cluster {
	cc := *c
	cc.t = t
	return &cc
}

// configValue reads one of QueryConfigValues' values through Corral's client.
func (c *cluster) configValue(name string) any {
	c.t.Helper()
	var v []any
	if err := c.luxi.Call(context.Background(), "QueryConfigValues", []any{[]string{name}}, &v); err != nil || len(v) != 1 {
		c.t.Fatalf("QueryConfigValues %s: %v %v", name, v, err)
	}
	return v[0]
}

// clusterInfo is QueryClusterInfo through Corral's client.
func (c *cluster) clusterInfo() map[string]any {
	c.t.Helper()
	var info map[string]any
	if err := c.luxi.Call(context.Background(), "QueryClusterInfo", []any{}, &info); err != nil {
		c.t.Fatal(err)
	}
	return info
}

// queryRows runs a LUXI Query through Corral's client and returns the
// values of the rows.
func (c *cluster) queryRows(resource string, fields []string, filter any) [][]any {
	c.t.Helper()
	var res struct {
		Data [][][]any `json:"data"`
	}
	if err := c.luxi.Call(context.Background(), "Query", []any{resource, fields, filter}, &res); err != nil {
		c.t.Fatalf("Query %s %v: %v", resource, fields, err)
	}
	out := make([][]any, len(res.Data))
	for i, row := range res.Data {
		for _, cell := range row {
			if len(cell) == 2 {
				out[i] = append(out[i], cell[1])
			} else {
				out[i] = append(out[i], nil)
			}
		}
	}
	return out
}

func (c *cluster) nodeField(name, field string) any {
	c.t.Helper()
	rows := c.queryRows("node", []string{field}, []any{"=", "name", name})
	if len(rows) != 1 {
		c.t.Fatalf("node %s: %d rows", name, len(rows))
	}
	return rows[0][0]
}

func ganetiClusterCommands(t *testing.T, c *cluster) {
	if out := c.mustGnt("gnt-cluster", "getmaster"); strings.TrimSpace(out) != "node1" {
		t.Fatalf("getmaster: %q", out)
	}
	out := c.mustGnt("gnt-cluster", "version")
	if !strings.Contains(out, "Software version:") || !strings.Contains(out, "OS api version: 20") {
		t.Errorf("version:\n%s", out)
	}
	out = c.mustGnt("gnt-cluster", "info")
	for _, want := range []string{"Cluster name: dev.corral", "Master node: node1", "Default hypervisor: fake"} {
		if !strings.Contains(out, want) {
			t.Errorf("info lacks %q:\n%s", want, out)
		}
	}
	if out := c.mustGnt("gnt-cluster", "verify"); !strings.Contains(out, "Verify finished") {
		t.Errorf("verify of a healthy cluster:\n%s", out)
	}

	// modify, with parameters Corral has.
	c.mustGnt("gnt-cluster", "modify", "--max-running-jobs", "7", "-B", "vcpus=2")
	info := c.clusterInfo()
	be, _ := info["beparams"].(map[string]any)["default"].(map[string]any)
	if info["max_running_jobs"] != 7.0 || be["vcpus"] != 2.0 {
		t.Errorf("after modify: max_running_jobs %v, beparams %v", info["max_running_jobs"], be)
	}

	// queue drain/undrain.
	c.mustGnt("gnt-cluster", "queue", "drain")
	if c.configValue("drain_flag") != true {
		t.Error("queue drain did not set the drain flag")
	}
	if out := c.mustGnt("gnt-cluster", "queue", "info"); !strings.Contains(out, "The drain flag is set") {
		t.Errorf("queue info while drained: %q", out)
	}
	if out, rc := c.gnt("gnt-debug", "delay", "0"); rc == 0 || !strings.Contains(out, "drain") || strings.Contains(out, "Traceback") {
		t.Errorf("a job submitted to a drained queue: exit %d\n%s", rc, out)
	}
	c.mustGnt("gnt-cluster", "queue", "undrain")
	if c.configValue("drain_flag") != false {
		t.Error("queue undrain did not clear the drain flag")
	}

	// watcher pause/continue.
	out = c.mustGnt("gnt-cluster", "watcher", "pause", "1h")
	if !strings.Contains(out, "The watcher is paused until") {
		t.Errorf("watcher pause: %q", out)
	}
	if until, _ := c.configValue("watcher_pause").(float64); until < float64(time.Now().Add(50*time.Minute).Unix()) {
		t.Errorf("watcher_pause %v after pausing for an hour", until)
	}
	c.mustGnt("gnt-cluster", "watcher", "continue")
	if v := c.configValue("watcher_pause"); v != nil && v != 0.0 {
		t.Errorf("watcher_pause %v after continue", v)
	}

	// tags.
	c.mustGnt("gnt-cluster", "add-tags", "env:test", "owner:ops")
	c.mustGnt("gnt-cluster", "remove-tags", "owner:ops")
	if out := c.mustGnt("gnt-cluster", "list-tags"); strings.TrimSpace(out) != "env:test" {
		t.Errorf("cluster tags: %q", out)
	}
	if out := c.mustGnt("gnt-cluster", "search-tags", "env"); !strings.Contains(out, "/cluster env:test") {
		t.Errorf("search-tags: %q", out)
	}
	waitFor(t, 10*time.Second, "ssconf_cluster_tags", func() bool { return c.ssconf("cluster_tags") == "env:test\n" })
}

func ganetiNodeCommands(t *testing.T, c *cluster) {
	out := c.mustGnt("gnt-node", "list", "--no-headers", "-o", "name,pinst_cnt,master_candidate")
	if got := strings.Fields(out); len(got) != 6 || got[0] != "node1" || got[3] != "node2" {
		t.Fatalf("node list: %q", out)
	}
	out = c.mustGnt("gnt-node", "info", "node2")
	if !strings.Contains(out, "Node name: node2") || !strings.Contains(out, "primary ip: "+c.st.IPs[1]) {
		t.Errorf("node info:\n%s", out)
	}
	c.mustGnt("gnt-node", "modify", "--drained=yes", "node2")
	if c.nodeField("node2", "drained") != true {
		t.Error("node modify --drained=yes did not drain node2")
	}
	c.mustGnt("gnt-node", "modify", "--drained=no", "node2")
	if c.nodeField("node2", "drained") != false {
		t.Error("node modify --drained=no did not undrain node2")
	}
	// Going online again asks for confirmation unless --force, as in Ganeti.
	c.mustGnt("gnt-node", "modify", "--offline=yes", "node2")
	waitFor(t, 10*time.Second, "ssconf_offline_nodes", func() bool { return c.ssconf("offline_nodes") == "node2\n" })
	c.mustGnt("gnt-node", "modify", "--force", "--offline=no", "node2")
	if c.nodeField("node2", "offline") != false {
		t.Error("node2 still offline")
	}
	c.mustGnt("gnt-node", "add-tags", "node2", "rack:1")
	if out := c.mustGnt("gnt-node", "list-tags", "node2"); strings.TrimSpace(out) != "rack:1" {
		t.Errorf("node tags: %q", out)
	}
	// gnt-node add and remove are exercised in TestGanetiNodeRemove.
}

func ganetiGroupCommands(t *testing.T, c *cluster) {
	c.mustGnt("gnt-group", "add", "rack2")
	c.mustGnt("gnt-group", "modify", "--alloc-policy=last_resort", "rack2")
	c.mustGnt("gnt-group", "rename", "rack2", "rack3")
	c.mustGnt("gnt-group", "assign-nodes", "rack3", "node2")
	out := c.mustGnt("gnt-group", "list", "--no-headers", "-o", "name,node_cnt,alloc_policy")
	if !regexp.MustCompile(`(?m)^rack3\s+1\s+last_resort\s*$`).MatchString(out) || strings.Contains(out, "rack2") {
		t.Errorf("group list after add/modify/rename/assign:\n%s", out)
	}
	if out := c.mustGnt("gnt-group", "info", "rack3"); !strings.Contains(out, "Node group: rack3") || !strings.Contains(out, "Instance policy:") {
		t.Errorf("group info:\n%s", out)
	}
	waitFor(t, 10*time.Second, "ssconf_nodegroups to name rack3", func() bool { return strings.Contains(c.ssconf("nodegroups"), " rack3\n") })
	// gnt-instance change-group follows the child job Corral submits.
	c.mustGnt("gnt-instance", "add", "-t", "diskless", "-o", "noop", "-n", "node1", "--no-start",
		"--no-name-check", "--no-ip-check", "-H", "fake", "cg1")
	if out := c.mustGnt("gnt-instance", "change-group", "--to", "rack3", "cg1"); !strings.Contains(out, "changed group successfully") {
		t.Errorf("change-group:\n%s", out)
	}
	if p := c.instanceField("cg1", "pnode"); p != "node2" {
		t.Errorf("cg1 on %v after change-group --to rack3, want node2", p)
	}
	c.mustGnt("gnt-instance", "remove", "-f", "cg1")
	c.mustGnt("gnt-group", "assign-nodes", "default", "node2")
	c.mustGnt("gnt-group", "remove", "rack3")
	if out := c.mustGnt("gnt-group", "list", "--no-headers", "-o", "name"); strings.TrimSpace(out) != "default" {
		t.Errorf("groups after remove: %q", out)
	}
}

func ganetiInstanceCommands(t *testing.T, c *cluster) {
	c.mustGnt("gnt-instance", "add", "-t", "file", "--disk", "0:size=16m", "-o", "noop", "-n", "node2",
		"--no-name-check", "--no-ip-check", "--no-nics", "-H", "fake", "web1")
	c.mustGnt("gnt-instance", "add", "-t", "diskless", "-o", "noop", "-n", "node1",
		"--no-name-check", "--no-ip-check", "-H", "fake", "web2")
	waitFor(t, 10*time.Second, "ssconf_instance_list", func() bool { return c.ssconf("instance_list") == "web1\nweb2\n" })

	out := c.mustGnt("gnt-instance", "list", "--no-headers", "-o", "name,pnode,status,disk_template")
	if !regexp.MustCompile(`(?m)^web1\s+node2\s+running\s+file$`).MatchString(out) ||
		!regexp.MustCompile(`(?m)^web2\s+node1\s+running\s+diskless$`).MatchString(out) {
		t.Errorf("instance list -o:\n%s", out)
	}
	if out := c.mustGnt("gnt-instance", "list", "--no-headers", "-o", "name", "-F", `pnode == "node2"`); strings.TrimSpace(out) != "web1" {
		t.Errorf("instance list -F: %q", out)
	}
	out = c.mustGnt("gnt-instance", "info", "web1")
	for _, want := range []string{"Instance name: web1", "Operating system: noop", "disk/0: file, size 16M"} {
		if !strings.Contains(out, want) {
			t.Errorf("instance info lacks %q:\n%s", want, out)
		}
	}

	c.mustGnt("gnt-instance", "shutdown", "web1")
	if c.instanceField("web1", "status") != "ADMIN_down" {
		t.Errorf("after shutdown: %v", c.instanceField("web1", "status"))
	}
	c.mustGnt("gnt-instance", "startup", "web1")
	if c.instanceField("web1", "status") != "running" {
		t.Errorf("after startup: %v", c.instanceField("web1", "status"))
	}
	c.mustGnt("gnt-instance", "reboot", "web1")
	if c.instanceField("web1", "status") != "running" {
		t.Errorf("after reboot: %v", c.instanceField("web1", "status"))
	}

	c.mustGnt("gnt-instance", "modify", "-B", "maxmem=256,minmem=256", "web1")
	if v := c.instanceField("web1", "be/maxmem"); v != 256.0 {
		t.Errorf("be/maxmem %v after modify -B", v)
	}
	c.mustGnt("gnt-instance", "modify", "-H", "migration_downtime=40", "web1")
	if v := c.instanceField("web1", "hv/migration_downtime"); v != 40.0 {
		t.Errorf("hv/migration_downtime %v after modify -H", v)
	}
	// Debian's noop OS declares no parameters; Corral's tiny declares one.
	c.mustGnt("gnt-instance", "modify", "--os-type", "tiny+default", "-O", "marker=blue", "web1")
	if v, _ := c.instanceField("web1", "osparams").(map[string]any); v["marker"] != "blue" || c.instanceField("web1", "os") != "tiny+default" {
		t.Errorf("osparams %v, os %v after modify --os-type -O", v, c.instanceField("web1", "os"))
	}

	c.mustGnt("gnt-instance", "grow-disk", "web1", "0", "8m")
	if sizes, _ := c.instanceField("web1", "disk.sizes").([]any); len(sizes) != 1 || sizes[0] != 24.0 {
		t.Errorf("disk sizes %v after growing 16M by 8M", sizes)
	}

	c.mustGnt("gnt-instance", "add-tags", "web1", "tier:web")
	if out := c.mustGnt("gnt-instance", "list-tags", "web1"); strings.TrimSpace(out) != "tier:web" {
		t.Errorf("instance tags: %q", out)
	}
	c.mustGnt("gnt-instance", "remove-tags", "web1", "tier:web")

	c.mustGnt("gnt-instance", "shutdown", "web1")
	c.mustGnt("gnt-instance", "recreate-disks", "--disk", "0:size=32m", "web1")
	if sizes, _ := c.instanceField("web1", "disk.sizes").([]any); len(sizes) != 1 || sizes[0] != 32.0 {
		t.Errorf("disk sizes %v after recreate-disks --disk 0:size=32m", sizes)
	}
	// Back to the size the backup commands expect, then every disk as recorded.
	c.mustGnt("gnt-instance", "recreate-disks", "--disk", "0:size=24m", "web1")
	c.mustGnt("gnt-instance", "recreate-disks", "web1")
	if sizes, _ := c.instanceField("web1", "disk.sizes").([]any); len(sizes) != 1 || sizes[0] != 24.0 {
		t.Errorf("disk sizes %v after recreate-disks --disk 0:size=24m", sizes)
	}
	c.mustGnt("gnt-instance", "reinstall", "-f", "web1")
	c.mustGnt("gnt-instance", "rename", "--force", "--no-name-check", "--no-ip-check", "web1", "web3")
	if out := c.mustGnt("gnt-instance", "list", "--no-headers", "-o", "name"); strings.Fields(out)[0] != "web2" || !strings.Contains(out, "web3") || strings.Contains(out, "web1") {
		t.Errorf("after rename: %q", out)
	}
	waitFor(t, 10*time.Second, "ssconf_instance_list after the rename", func() bool { return c.ssconf("instance_list") == "web2\nweb3\n" })

	// gnt-instance migrate moves the running instance live (the fake
	// hypervisor streams its state between the node daemons).
	from := c.instanceField("web2", "pnode")
	if out := c.mustGnt("gnt-instance", "migrate", "-f", "web2"); !strings.Contains(out, "Migration completed") {
		t.Errorf("migrate: %s", out)
	}
	if to := c.instanceField("web2", "pnode"); to == from {
		t.Errorf("web2 still on %v after gnt-instance migrate", to)
	}

	// A refused opcode is Ganeti's clear error, not a traceback.
	out, rc := c.gnt("gnt-instance", "replace-disks", "-p", "web2")
	if rc == 0 || strings.Contains(out, "Traceback") || !strings.Contains(out, "Failure:") {
		t.Errorf("replace-disks (not in Corral): exit %d\n%s", rc, out)
	}

	c.mustGnt("gnt-instance", "remove", "-f", "web2")
	if out := c.mustGnt("gnt-instance", "list", "--no-headers", "-o", "name"); strings.TrimSpace(out) != "web3" {
		t.Errorf("after remove: %q", out)
	}
}

func ganetiOSCommands(t *testing.T, c *cluster) {
	out := c.mustGnt("gnt-os", "list", "--no-headers")
	if !regexp.MustCompile(`(?m)^noop$`).MatchString(out) {
		t.Errorf("os list lacks noop:\n%s", out)
	}
	if out := c.mustGnt("gnt-os", "info", "noop"); !strings.Contains(out, "noop:") || !strings.Contains(out, "valid: True") {
		t.Errorf("os info:\n%s", out)
	}
	if out := c.mustGnt("gnt-os", "diagnose"); !strings.Contains(out, "OS: noop [global status: valid]") {
		t.Errorf("os diagnose:\n%s", out)
	}
}

func ganetiBackupCommands(t *testing.T, c *cluster) {
	c.mustGnt("gnt-backup", "export", "-n", "node1", "web3")
	out := c.mustGnt("gnt-backup", "list", "--no-headers")
	if !regexp.MustCompile(`(?m)^node1\s+web3$`).MatchString(out) {
		t.Fatalf("backup list after export:\n%s", out)
	}
	c.mustGnt("gnt-backup", "import", "-t", "file", "--disk", "0:size=24m", "-n", "node2", "--src-node", "node1",
		"--src-dir", "web3", "--no-name-check", "--no-ip-check", "--no-nics", "-H", "fake", "web4")
	if sizes, _ := c.instanceField("web4", "disk.sizes").([]any); len(sizes) != 1 || sizes[0] != 24.0 {
		t.Errorf("imported instance's disks %v", sizes)
	}
	c.mustGnt("gnt-backup", "remove", "web3")
	if out := c.mustGnt("gnt-backup", "list", "--no-headers"); strings.Contains(out, "web3") {
		t.Errorf("backup list after remove:\n%s", out)
	}
	c.mustGnt("gnt-instance", "remove", "-f", "web4")
}

func ganetiJobCommands(t *testing.T, c *cluster) {
	// gnt-debug delay runs a job and waits for it.
	start := time.Now()
	c.mustGnt("gnt-debug", "delay", "1")
	if time.Since(start) < time.Second {
		t.Errorf("gnt-debug delay 1 returned after %v", time.Since(start))
	}
	out := c.mustGnt("gnt-job", "list", "--no-headers", "-o", "id,status,summary")
	last := strings.Split(strings.TrimSpace(out), "\n")
	if f := strings.Fields(last[len(last)-1]); len(f) != 3 || f[1] != "success" || !strings.HasPrefix(f[2], "TEST_DELAY(1") {
		t.Fatalf("last job: %q", last[len(last)-1])
	}
	delayID := strings.Fields(last[len(last)-1])[0]
	if out := c.mustGnt("gnt-job", "info", delayID); !strings.Contains(out, "OP_TEST_DELAY") || !strings.Contains(out, "Status: success") {
		t.Errorf("job info:\n%s", out)
	}
	if out := c.mustGnt("gnt-job", "watch", delayID); !strings.Contains(out, "job "+delayID) {
		t.Errorf("job watch:\n%s", out)
	}

	// A job waiting for its turn is cancelled: one job runs at a time.
	c.mustGnt("gnt-cluster", "modify", "--max-running-jobs", "1")
	out = c.mustGnt("gnt-debug", "delay", "--submit", "8")
	first := jobIDFrom(t, out)
	out = c.mustGnt("gnt-debug", "delay", "--submit", "8")
	second := jobIDFrom(t, out)
	if out := c.mustGnt("gnt-job", "cancel", strconv.FormatInt(second, 10)); !strings.Contains(out, "job "+strconv.FormatInt(second, 10)) {
		t.Errorf("cancel of a queued job said: %s", out)
	}
	waitFor(t, 10*time.Second, "the queued job to be canceled", func() bool { return c.jobStatus(second) == "canceled" })
	// A running job is not cancelled without --kill, as in Ganeti.
	if out, rc := c.gnt("gnt-job", "cancel", strconv.FormatInt(first, 10)); rc == 0 || strings.Contains(out, "Traceback") {
		t.Errorf("cancel of a running job: exit %d\n%s", rc, out)
	}
	c.mustGnt("gnt-job", "cancel", "--kill", "--yes-do-it", strconv.FormatInt(first, 10))
	waitFor(t, 30*time.Second, "the running job to be killed", func() bool { return c.jobStatus(first) == "canceled" })
	c.mustGnt("gnt-cluster", "modify", "--max-running-jobs", "20")

	c.mustGnt("gnt-job", "archive", delayID)
	if out := c.mustGnt("gnt-job", "list", "--no-headers", "-o", "id"); regexp.MustCompile(`(?m)^\s*` + delayID + `$`).MatchString(out) {
		t.Errorf("archived job %s still listed", delayID)
	}
}

func jobIDFrom(t *testing.T, out string) int64 {
	t.Helper()
	m := regexp.MustCompile(`JobID: (\d+)`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no job id in %q", out)
	}
	id, _ := strconv.ParseInt(m[1], 10, 64)
	return id
}

func (c *cluster) jobStatus(id int64) string {
	c.t.Helper()
	rows, err := c.luxi.QueryJobs(context.Background(), []int64{id}, []string{"status"})
	if err != nil || len(rows) != 1 {
		c.t.Fatalf("job %d: %v %v", id, rows, err)
	}
	return fmt.Sprint(rows[0][0])
}

// TestGanetiNodeRemove: gnt-node remove takes a node out of the cluster
// and out of the ssconf files. (gnt-node add cannot run unchanged: it logs
// in to the new node over SSH to install Ganeti's node daemon, where
// Corral's nodes join with a token; docs/GANETI.md has the flow.)
func TestGanetiNodeRemove(t *testing.T) {
	c := newDropinCluster(t, 1)
	c.mustGnt("gnt-node", "modify", "--offline=yes", "node2")
	c.mustGnt("gnt-node", "remove", "node2")
	if out := c.mustGnt("gnt-node", "list", "--no-headers", "-o", "name"); strings.TrimSpace(out) != "node1" {
		t.Fatalf("nodes after remove: %q", out)
	}
	waitFor(t, 10*time.Second, "ssconf_node_list without node2", func() bool { return c.ssconf("node_list") == "node1\n" })
}
