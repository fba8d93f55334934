package cmdlib

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/corral/corral/internal/ecode"
	"github.com/corral/corral/internal/exportcfg"
	"github.com/corral/corral/internal/nodeapi"
)

// TestImportKeepsInstanceWhenRenameScriptFails: a failing OS rename script
// after an import is a warning in the job log, as in Ganeti. The job
// succeeds, the instance stays in the configuration and its disks are not
// removed.
func TestImportKeepsInstanceWhenRenameScriptFails(t *testing.T) {
	node := newNodeDouble()
	exp := &exportcfg.Export{Name: "old1", OS: "tiny+default", Hypervisor: "fake", DiskTemplate: "file",
		Disks: []exportcfg.Disk{{Index: 0, SizeMiB: 100, Dump: "disk0.raw"}}}
	node.replies = map[string]any{
		nodeapi.ExportInfo:   nodeapi.ExportInfoReply{Path: "/exports/old1", Config: string(exp.Marshal())},
		nodeapi.ImportStart:  nodeapi.ImportStartReply{Name: "import-1", Host: "127.0.0.2", Port: 1234},
		nodeapi.ExportStart:  nodeapi.ExportStartReply{Name: "export-1"},
		nodeapi.ImpExpStatus: nodeapi.ImpExpStatusReply{Status: []nodeapi.TransferStatus{{Known: true, Done: true, OK: true, Bytes: 100 << 20}}},
	}
	node.fail = map[string]error{nodeapi.OSRename: ecode.ExecErrorf("rename script exited with status 1")}
	e := openEnv(t, filepath.Join(t.TempDir(), "s.db"), node, true)
	defer e.close()

	st, res := e.run(t, create("new1", map[string]any{"mode": "import", "src_node": "n1", "src_path": "old1",
		"disks": []any{}, "nics": []any{}, "os_type": nil, "start": false}))
	if st != "success" {
		t.Fatalf("import: %s %v", st, res)
	}
	if node.count(nodeapi.OSRename) != 1 {
		t.Fatalf("the rename script ran %d times, want once", node.count(nodeapi.OSRename))
	}
	inst, ok := e.cfg.Instance("new1")
	if !ok || len(inst.Disks) != 1 {
		t.Fatalf("the imported instance is gone or lost its disk: %+v", inst)
	}
	if n := node.count(nodeapi.DiskRemove); n != 0 {
		t.Fatalf("%d disk removal(s) after a failed rename script", n)
	}
	rows, err := e.q.Query(t.Context(), nil, []string{"oplog"})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(rows[len(rows)-1])
	if !strings.Contains(string(b), "Warning: the OS rename script failed for new1 on node n1") ||
		!strings.Contains(string(b), "rename script exited with status 1") {
		t.Fatalf("the job log has no warning for the rename script: %s", b)
	}
}
