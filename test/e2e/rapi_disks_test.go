package e2e

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"
)

// TestRAPIDisks drives the OS list, disk activation, growth, deactivation
// and the console resource with Ganeti's own RAPI client, and checks the
// effects on the node's disk file, over LUXI and with the CLI.
func TestRAPIDisks(t *testing.T) {
	requireRoot(t)
	requireRAPIClient(t)
	c := newCluster(t, clusterOpts{nodes: 1, hypervisors: []string{"fake"}})
	s := devRAPI(t, c)
	ctx := context.Background()

	c.mustSucceed(map[string]any{"OP_ID": "OP_INSTANCE_CREATE", "instance_name": "web1", "disk_template": "file",
		"disks": []any{map[string]any{"size": 64}}, "nics": []any{}, "os_type": "tiny+default",
		"hypervisor": "fake", "start": true})

	r := s.py(t, "disks", "web1")
	js := func(v any) string {
		b, _ := json.Marshal(v)
		return string(b)
	}
	ok := func(step string) {
		t.Helper()
		if v, _ := r[step].(map[string]any); v["ok"] != true || v["status"] != "success" {
			t.Errorf("%s: job did not succeed: %v", step, r[step])
		}
	}

	// The dev cluster's OS definition, with its variant.
	if got := js(r["os"]); got != `["tiny+default"]` {
		t.Errorf("GetOperatingSystems = %s, want [\"tiny+default\"]", got)
	}

	// Activation answers [[node, "disk/0", path]] with the image's path.
	ok("activate")
	res, _ := r["activate_result"].([]any)
	var rows []any
	if len(res) == 1 {
		rows, _ = res[0].([]any)
	}
	if len(rows) != 1 {
		t.Fatalf("activate-disks result %s, want one disk", js(r["activate_result"]))
	}
	row, _ := rows[0].([]any)
	if len(row) != 3 || row[1] != "disk/0" {
		t.Fatalf("activate-disks row %s, want [node, disk/0, path]", js(rows[0]))
	}
	pnode, err := c.luxi.QueryInstances(ctx, []string{"web1"}, []string{"pnode"}, false)
	if err != nil || len(pnode) != 1 || pnode[0][0] != row[0] {
		t.Errorf("activate-disks names node %v; the instance's primary node is %v (%v)", row[0], pnode, err)
	}
	path, _ := row[2].(string)

	// The 64 MiB image grown by 64 MiB: the real file and the configured
	// size.
	ok("grow")
	fi, err := os.Stat(path)
	if err != nil || fi.Size() != 128<<20 {
		t.Fatalf("disk file %q from activate-disks, after the grow: %v bytes, %v; want %d", path, sizeOf(fi), err, 128<<20)
	}
	if got := js(r["sizes"]); got != `[128]` {
		t.Errorf("GetInstance disk.sizes after the grow = %s, want [128]", got)
	}
	rowsLuxi, err := c.luxi.QueryInstances(ctx, []string{"web1"}, []string{"disk.sizes"}, false)
	if err != nil || js(rowsLuxi) != `[[[128]]]` {
		t.Errorf("LUXI disk.sizes: %s, %v", js(rowsLuxi), err)
	}

	// The fake hypervisor's console is a message, as in Ganeti.
	cons, _ := r["console"].(map[string]any)
	if cons["instance"] != "web1" || cons["kind"] != "msg" || cons["message"] == nil {
		t.Errorf("GetInstanceConsole = %s, want instance web1, kind msg and a message", js(r["console"]))
	}

	// Deactivation refuses a running instance unless forced.
	if v, _ := r["deactivate_running"].(map[string]any); v["ok"] != false || v["status"] != "error" {
		t.Errorf("deactivate-disks of a running instance: %v, want a failed job", r["deactivate_running"])
	}
	ok("deactivate_forced")
	ok("shutdown")
	ok("deactivate_stopped")
	if v, _ := r["console_stopped"].(map[string]any); v["code"] != 503.0 {
		t.Errorf("console of a stopped instance: %v, want 503", r["console_stopped"])
	}
	// File images have nothing to tear down: the file stays.
	if _, err := os.Stat(path); err != nil {
		t.Errorf("disk file after deactivate-disks: %v", err)
	}

	// The same through the CLI.
	out, err := c.corral("instance", "grow-disk", "--absolute", "web1", "0", "256M")
	if err != nil {
		t.Fatalf("corral instance grow-disk: %v\n%s", err, out)
	}
	if fi, err = os.Stat(path); err != nil || fi.Size() != 256<<20 {
		t.Errorf("disk file after the CLI grow: %v bytes, %v", sizeOf(fi), err)
	}
	if out, err := c.corral("instance", "grow-disk", "--absolute", "web1", "0", "128M"); err == nil || !strings.Contains(out, "smaller than current") {
		t.Errorf("corral instance grow-disk to a smaller size: %v\n%s", err, out)
	}
	if out, err := c.corral("instance", "activate-disks", "web1"); err != nil || !strings.Contains(out, ":disk/0:"+path+"\n") {
		t.Errorf("corral instance activate-disks: %v\n%s", err, out)
	}
	if out, err := c.corral("os", "list", "--no-headers"); err != nil || out != "tiny+default\n" {
		t.Errorf("corral os list: %v\n%s", err, out)
	}
	if out, err := c.corral("os", "diagnose"); err != nil || !strings.Contains(out, "OS: tiny [global status: valid]") {
		t.Errorf("corral os diagnose: %v\n%s", err, out)
	}
}

func sizeOf(fi os.FileInfo) int64 {
	if fi == nil {
		return -1
	}
	return fi.Size()
}
