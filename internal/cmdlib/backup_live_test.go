package cmdlib

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/corral/corral/internal/ecode"
	"github.com/corral/corral/internal/nodeapi"
)

// TestLiveExportUsesAndRemovesSnapshots: an export with shutdown=false of
// a running instance never stops it; its transfer reads the disk copy the
// node made, and the copy is removed when the export fails. A node that
// cannot copy the disks fails the export before anything is sent.
func TestLiveExportUsesAndRemovesSnapshots(t *testing.T) {
	e := openEnv(t, filepath.Join(t.TempDir(), "s.db"), newNodeDouble(), true)
	defer e.close()
	if st, res := e.run(t, create("web1", nil)); st != "success" {
		t.Fatalf("create: %s %v", st, res)
	}
	const snap = "snap-0123456789abcdef"
	var sent []nodeapi.ImpExpIO
	var removed []string
	e.node.mu.Lock()
	e.node.replies = map[string]any{nodeapi.DiskSnapshot: nodeapi.DiskSnapshotReply{
		Snapshots: []nodeapi.DiskSnapshotInfo{{Disk: 0, Name: snap, SizeMiB: 100, Seconds: 0.25}}}}
	e.node.fail = map[string]error{nodeapi.ExportStart: ecode.ExecErrorf("the imaginary peer is gone")}
	e.node.withArgs = func(method string, args any) {
		switch a := args.(type) {
		case nodeapi.ExportStartArgs:
			sent = append(sent, a.IO)
		case nodeapi.DiskSnapshotRemoveArgs:
			removed = append(removed, a.Names...)
		}
	}
	e.node.mu.Unlock()
	live := map[string]any{"OP_ID": "OP_BACKUP_EXPORT", "instance_name": "web1", "mode": "local", "target_node": "n1", "shutdown": false}

	st, res := e.run(t, live)
	b, _ := json.Marshal(res)
	if st != "error" || !strings.Contains(string(b), "imaginary peer") {
		t.Fatalf("export into a failing transfer: %s %s", st, b)
	}
	if len(sent) != 1 || sent[0].Snapshot != snap || sent[0].Disk != 0 {
		t.Fatalf("the transfer read %+v, want the copy %s of disk 0", sent, snap)
	}
	if len(removed) == 0 || removed[0] != snap {
		t.Fatalf("copies removed after the failure: %v", removed)
	}
	if n := e.node.count(nodeapi.InstanceShutdown); n != 0 {
		t.Fatalf("the live export shut the instance down (%d calls)", n)
	}

	// The node cannot copy: the export stops there.
	e.node.mu.Lock()
	e.node.fail[nodeapi.DiskSnapshot] = ecode.Errorf(ecode.State, "hypervisor fake cannot copy")
	e.node.mu.Unlock()
	sent = nil
	st, res = e.run(t, live)
	b, _ = json.Marshal(res)
	if st != "error" || !strings.Contains(string(b), "export it with shutdown instead") || len(sent) != 0 {
		t.Fatalf("export without copies: %s %s, sent %v", st, b, sent)
	}

	// remove_instance needs the shutdown.
	live["remove_instance"] = true
	st, res = e.run(t, live)
	b, _ = json.Marshal(res)
	if st != "error" || !strings.Contains(string(b), "without shutting it down") {
		t.Fatalf("live export with removal: %s %s", st, b)
	}
	if n := e.node.count(nodeapi.InstanceShutdown); n != 0 {
		t.Fatalf("a live export shut the instance down (%d calls)", n)
	}
}
