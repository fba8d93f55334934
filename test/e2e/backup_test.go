package e2e

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/corral/corral/internal/exportcfg"
)

// TestBackupExportImport exports an instance to another node with the CLI,
// checks the export directory (metadata and images), imports it under a
// new name and removes the export.
func TestBackupExportImport(t *testing.T) {
	osDir := osDirWithMover(t)
	c := newCluster(t, clusterOpts{nodes: 1, hypervisors: []string{"fake"}, osDir: osDir})
	c.mustSucceed(map[string]any{"OP_ID": "OP_INSTANCE_CREATE", "instance_name": "b1", "disk_template": "file",
		"disks": []any{map[string]any{"size": 16}, map[string]any{"size": 8}}, "nics": []any{}, "os_type": "mover", "pnode": "node1"})
	sums := c.fillRandom("node1", "b1")

	out, err := c.corral("backup", "export", "-n", "node2", "--compress", "zstd", "b1")
	if err != nil {
		t.Fatalf("backup export: %v\n%s", err, out)
	}
	if st := c.instanceField("b1", "status"); st != "running" {
		t.Errorf("b1 after its export is %v, want running again", st)
	}
	dir := filepath.Join(c.dir, "node2", "export", "b1")
	meta, err := os.ReadFile(filepath.Join(dir, "config.ini"))
	if err != nil {
		t.Fatalf("export metadata: %v", err)
	}
	exp, err := exportcfg.Parse(meta)
	if err != nil {
		t.Fatal(err)
	}
	if exp.Name != "b1" || exp.OS != "mover" || len(exp.Disks) != 2 || exp.Disks[1].SizeMiB != 8 {
		t.Errorf("export metadata %+v", exp)
	}
	for i, d := range exp.Disks {
		b, err := os.ReadFile(filepath.Join(dir, d.Dump))
		if err != nil {
			t.Fatal(err)
		}
		if s := sha256.Sum256(b); hex.EncodeToString(s[:]) != sums[i] {
			t.Errorf("the image of disk %d differs from the disk", i)
		}
	}
	if out, err := c.corral("backup", "list"); err != nil || !strings.Contains(out, "node2") || !strings.Contains(out, "b1") {
		t.Errorf("backup list: %v\n%s", err, out)
	}

	out, err = c.corral("backup", "import", "-n", "node1", "-t", "file", "--src-node", "node2", "--src-dir", "b1", "--no-start", "b1-copy")
	if err != nil {
		t.Fatalf("backup import: %v\n%s", err, out)
	}
	if got := c.diskSums("node1", "b1-copy"); strings.Join(got, " ") != strings.Join(sums, " ") {
		t.Errorf("imported disks %v, want %v", got, sums)
	}
	renames, _ := os.ReadFile(filepath.Join(osDir, "mover", "renames.log"))
	if !strings.Contains(string(renames), "old=b1 new=b1-copy") {
		t.Errorf("the rename script did not run with the export's name: %q", renames)
	}

	if out, err := c.corral("backup", "remove", "b1"); err != nil {
		t.Fatalf("backup remove: %v\n%s", err, out)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("the export directory is still there: %v", err)
	}
	if out, _ := c.corral("backup", "list"); strings.Contains(out, "b1") {
		t.Errorf("backup list after remove:\n%s", out)
	}
	if keys := c.transferKeys(); len(keys) != 0 {
		t.Errorf("transfer keys left: %v", keys)
	}
}
