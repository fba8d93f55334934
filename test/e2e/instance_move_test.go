package e2e

import (
	"bytes"
	"os"
	"strings"
	"testing"
)

// TestInstanceMoveBetweenNodes: OP_INSTANCE_MOVE (gnt-instance move) shuts
// a running file instance down, copies its disk to another node over the
// node-to-node stream, makes that node the primary, removes the old disk
// and starts the instance there.
func TestInstanceMoveBetweenNodes(t *testing.T) {
	c := newDropinCluster(t, 1)
	c.mustSucceed(map[string]any{"OP_ID": "OP_INSTANCE_CREATE", "instance_name": "mv1", "disk_template": "file",
		"disks": []any{map[string]any{"size": 16}}, "nics": []any{}, "os_type": "tiny+default",
		"hypervisor": "fake", "pnode": "node1"})
	diskPath := func() string {
		t.Helper()
		out, err := c.corral("instance", "activate-disks", "mv1")
		if err != nil {
			t.Fatalf("activate-disks: %v\n%s", err, out)
		}
		parts := strings.SplitN(strings.TrimSpace(out), ":", 3)
		if len(parts) != 3 {
			t.Fatalf("activate-disks output %q", out)
		}
		return parts[2]
	}
	old := diskPath()
	marker := []byte("moved-by-instance-move")
	f, err := os.OpenFile(old, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(marker, 5<<20); err != nil {
		t.Fatal(err)
	}
	f.Close()

	msg := c.mustFail("wrong_state", map[string]any{"OP_ID": "OP_INSTANCE_MOVE", "instance_name": "mv1", "target_node": "node1"})
	if !strings.Contains(msg, "Instance mv1 is already on the node node1") {
		t.Errorf("move to its own node: %s", msg)
	}
	c.mustSucceed(map[string]any{"OP_ID": "OP_INSTANCE_MOVE", "instance_name": "mv1", "target_node": "node2"})
	if p := c.instanceField("mv1", "pnode"); p != "node2" {
		t.Fatalf("primary node after the move: %v", p)
	}
	if s := c.instanceField("mv1", "status"); s != "running" {
		t.Errorf("status after the move: %v", s)
	}
	moved := diskPath()
	if moved == old {
		t.Fatalf("the disk is still at %s", old)
	}
	b, err := os.ReadFile(moved)
	if err != nil || len(b) != 16<<20 || !bytes.Equal(b[5<<20:5<<20+len(marker)], marker) {
		t.Fatalf("moved disk %s: %d bytes, %v; want 16 MiB with the marker", moved, len(b), err)
	}
	if _, err := os.Stat(old); !os.IsNotExist(err) {
		t.Errorf("the old disk %s is still there: %v", old, err)
	}
	if out, err := c.corral("cluster", "verify"); err != nil {
		t.Errorf("cluster verify after the move: %v\n%s", err, out)
	}

	// And back with Ganeti's own gnt-instance move, and a disk added with
	// gnt-instance modify, over LUXI in drop-in mode.
	c.mustGnt("gnt-instance", "move", "-f", "-n", "node1", "mv1")
	if p := c.instanceField("mv1", "pnode"); p != "node1" {
		t.Fatalf("primary node after gnt-instance move: %v", p)
	}
	if b, err := os.ReadFile(diskPath()); err != nil || !bytes.Equal(b[5<<20:5<<20+len(marker)], marker) {
		t.Fatalf("disk after moving back: %v", err)
	}
	if out := c.mustGnt("gnt-instance", "modify", "--disk", "add:size=8M", "mv1"); !strings.Contains(out, "disk/1 -> add:size=8,mode=rw") {
		t.Errorf("gnt-instance modify --disk add: %s", out)
	}
	if out := c.mustGnt("gnt-instance", "modify", "--net", "add", "mv1"); !strings.Contains(out, "nic.0 -> add:mac=") {
		t.Errorf("gnt-instance modify --net add: %s", out)
	}
}
