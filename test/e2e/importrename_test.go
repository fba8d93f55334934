package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestImportKeepsInstanceWhenRenameScriptFails imports an export and moves
// an instance to another cluster with an OS whose rename script fails.
// As in Ganeti the failure is a warning in the job log: the jobs succeed,
// the instances exist with the exported bytes, and the moved instance,
// whose source was removed, is not lost.
func TestImportKeepsInstanceWhenRenameScriptFails(t *testing.T) {
	osDir := osDirWithMover(t)
	bad := filepath.Join(osDir, "badrename")
	if err := os.Mkdir(bad, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, body := range moverOS {
		mode := os.FileMode(0o755)
		if name == "rename" {
			body = "#!/bin/sh\necho \"rename refused: old=$OLD_INSTANCE_NAME new=$INSTANCE_NAME\" >&2\nexit 1\n"
		}
		if !strings.Contains(body, "#!") {
			mode = 0o644
		}
		if err := os.WriteFile(filepath.Join(bad, name), []byte(body), mode); err != nil {
			t.Fatal(err)
		}
	}
	a := newCluster(t, clusterOpts{nodes: 1, hypervisors: []string{"fake"}, osDir: osDir})
	b := newCluster(t, clusterOpts{nodes: 1, hypervisors: []string{"fake"}, osDir: osDir})
	create := func(name string) map[string]any {
		return map[string]any{"OP_ID": "OP_INSTANCE_CREATE", "instance_name": name, "disk_template": "file",
			"disks": []any{map[string]any{"size": 16}}, "nics": []any{}, "os_type": "badrename", "pnode": "node1", "start": false}
	}
	a.mustSucceed(create("r1"))
	sums := a.fillRandom("node1", "r1")

	// Import of a local export under a new name.
	a.mustSucceed(map[string]any{"OP_ID": "OP_BACKUP_EXPORT", "instance_name": "r1", "target_node": "node2", "mode": "local"})
	id, status, res := a.submit(map[string]any{"OP_ID": "OP_INSTANCE_CREATE", "instance_name": "r1-copy", "mode": "import",
		"src_node": "node2", "src_path": "r1", "disk_template": "file", "disks": []any{}, "nics": []any{},
		"pnode": "node1", "start": false})
	if status != "success" {
		t.Fatalf("import job %d ended %s: %v", id, status, res)
	}
	a.expectRenameWarning(id, "r1-copy")
	if got := a.diskSums("node1", "r1-copy"); strings.Join(got, " ") != strings.Join(sums, " ") {
		t.Errorf("imported disks %v, want the exported %v", got, sums)
	}

	// A move whose source instance is removed once exported.
	pairClusters(t, a, b)
	out, err := a.corral(append(append([]string{"instance", "move", "--dest-primary-node", "node1"},
		moveArgs(t, a, b)...), rapiURL(t, a), rapiURL(t, b), "r1")...)
	if err != nil {
		t.Fatalf("move r1: %v\n%s", err, out)
	}
	if rows, _ := a.luxi.QueryInstances(t.Context(), []string{"r1"}, []string{"name"}, false); len(rows) != 0 {
		t.Errorf("r1 is still on the source: %v", rows)
	}
	if got := b.diskSums("node1", "r1"); strings.Join(got, " ") != strings.Join(sums, " ") {
		t.Errorf("moved disks %v, want %v", got, sums)
	}
	rows, err := b.luxi.QueryJobs(t.Context(), nil, []string{"id", "ops"})
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, r := range rows {
		if ops, _ := json.Marshal(r[1]); strings.Contains(string(ops), `"remote-import"`) {
			b.expectRenameWarning(int64(r[0].(float64)), "r1")
			found = true
		}
	}
	if !found {
		t.Fatalf("no remote import job on the destination: %v", rows)
	}
}

// expectRenameWarning checks that a job's log warns about the failed OS
// rename script of the named instance.
func (c *cluster) expectRenameWarning(id int64, name string) {
	c.t.Helper()
	rows, err := c.luxi.QueryJobs(c.t.Context(), []int64{id}, []string{"oplog"})
	if err != nil || len(rows) != 1 {
		c.t.Fatalf("job %d log: %v %v", id, rows, err)
	}
	b, _ := json.Marshal(rows[0][0])
	if !strings.Contains(string(b), "Warning: the OS rename script failed for "+name) || !strings.Contains(string(b), "rename refused") {
		c.t.Errorf("job %d log has no warning about the rename script of %s: %s", id, name, b)
	}
}
