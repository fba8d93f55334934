package cmdlib

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/corral/corral/internal/confdb"
	"github.com/corral/corral/internal/nodeapi"
)

// TestRemoveLeftDisks: OP_CLUSTER_REMOVE_LEFT_DISKS removes the recorded
// disks of the nodes it names (every node when none), with an operation
// id on each node call, forgets the records of departed nodes, and keeps
// a disk its node cannot remove, reporting it in the node's status until a
// later run removes it.
func TestRemoveLeftDisks(t *testing.T) {
	e := openEnv(t, filepath.Join(t.TempDir(), "s.db"), newNodeDouble(), true)
	defer e.close()
	if st, res := e.run(t, map[string]any{"OP_ID": "OP_NODE_ADD", "node_name": "n2", "primary_ip": "127.0.0.3"}); st != "success" {
		t.Fatalf("node add: %s %v", st, res)
	}
	n1, _ := e.cfg.Node("n1")
	n2, _ := e.cfg.Node("n2")
	ctx := context.Background()
	tx := e.cfg.Begin()
	for _, r := range []confdb.DiskRemoval{
		{NodeUUID: n1.UUID, InstanceUUID: "i1", InstanceName: "gone1", DiskUUID: "d1", Index: 0, Template: "file"},
		{NodeUUID: n1.UUID, InstanceUUID: "i1", InstanceName: "gone1", DiskUUID: "d2", Index: 1, Template: "file"},
		{NodeUUID: n2.UUID, InstanceUUID: "i2", InstanceName: "gone2", DiskUUID: "d3", Template: "file"},
		{NodeUUID: "departed", InstanceUUID: "i3", InstanceName: "gone3", DiskUUID: "d4", Template: "file"},
	} {
		tx.AddDiskRemoval(r)
	}
	if err := e.cfg.Commit(ctx, tx); err != nil {
		t.Fatal(err)
	}
	left := func() []string {
		rs, err := e.cfg.DiskRemovals(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, r := range rs {
			out = append(out, r.DiskUUID)
		}
		return out
	}

	st, res := e.run(t, map[string]any{"OP_ID": "OP_CLUSTER_REMOVE_LEFT_DISKS", "nodes": []any{"n1"}})
	if st != "success" {
		t.Fatalf("remove on n1: %s %v", st, res)
	}
	if got := left(); len(got) != 1 || got[0] != "d3" {
		t.Fatalf("records left %v, want only n2's d3", got)
	}
	if n := e.node.count(nodeapi.DiskRemove); n != 2 {
		t.Fatalf("%d disk removals, want n1's 2", n)
	}
	for _, c := range e.node.calls {
		if strings.Contains(c, nodeapi.DiskRemove) && !strings.HasPrefix(c, "n1 "+nodeapi.DiskRemove+" job/") {
			t.Errorf("disk removal call %q: want one to n1 with an operation id", c)
		}
	}
	if e.cfg.NodeStatus("n1") != nil {
		t.Errorf("n1 never had a disk it could not remove, yet has a status: %+v", e.cfg.NodeStatus("n1"))
	}

	e.node.mu.Lock()
	e.node.fail = map[string]error{nodeapi.DiskRemove: errors.New("connection refused")}
	e.node.mu.Unlock()
	st, res = e.run(t, map[string]any{"OP_ID": "OP_CLUSTER_REMOVE_LEFT_DISKS"})
	if st != "success" {
		t.Fatalf("a disk that stays is reported, not a failure: %s %v", st, res)
	}
	b, _ := json.Marshal(res)
	if !strings.Contains(string(b), `"left":[{"node":"n2","instance":"gone2","disk":0,"error":"removing it from node n2: connection refused"}]`) {
		t.Errorf("result %s", b)
	}
	c, ok := e.cfg.NodeStatus("n2").Condition(CondDisksLeft)
	if !ok || c.Status != "True" || c.Reason != ReasonRemovalFailed || !strings.Contains(e.cfg.NodeStatus("n2").LastError, "connection refused") {
		t.Fatalf("n2's status %+v", e.cfg.NodeStatus("n2"))
	}

	e.node.mu.Lock()
	e.node.fail = nil
	e.node.mu.Unlock()
	if st, res := e.run(t, map[string]any{"OP_ID": "OP_CLUSTER_REMOVE_LEFT_DISKS"}); st != "success" {
		t.Fatalf("retry: %s %v", st, res)
	}
	if got := left(); len(got) != 0 {
		t.Fatalf("records left %v after the node answered", got)
	}
	if c, _ := e.cfg.NodeStatus("n2").Condition(CondDisksLeft); c.Status != "False" || c.Reason != ReasonAllRemoved {
		t.Errorf("n2's DisksLeft once removed: %+v", c)
	}
	if st, _ := e.run(t, map[string]any{"OP_ID": "OP_CLUSTER_REMOVE_LEFT_DISKS", "nodes": []any{"nosuch"}}); st != "error" {
		t.Error("an unknown node was accepted")
	}
}

// TestAbortPendingImports: OP_CLUSTER_ABORT_PENDING_IMPORTS aborts the
// imports that received nothing within the limit, and nothing else.
func TestAbortPendingImports(t *testing.T) {
	node := newNodeDouble()
	node.replies = map[string]any{nodeapi.ImpExpStatus: nodeapi.ImpExpStatusReply{Status: []nodeapi.TransferStatus{
		{Name: "stale", Kind: "import", Age: 700},
		{Name: "young", Kind: "import", Age: 30},
		{Name: "connected", Kind: "import", Age: 700, Connected: true},
		{Name: "receiving", Kind: "import", Age: 700, Bytes: 1},
		{Name: "finished", Kind: "import", Age: 700, Done: true},
		{Name: "export", Kind: "export", Age: 700},
	}}}
	e := openEnv(t, filepath.Join(t.TempDir(), "s.db"), node, true)
	defer e.close()
	st, res := e.run(t, map[string]any{"OP_ID": "OP_CLUSTER_ABORT_PENDING_IMPORTS", "pending_timeout": 600})
	if st != "success" {
		t.Fatalf("%s %v", st, res)
	}
	b, _ := json.Marshal(res)
	if !strings.Contains(string(b), `"aborted":[{"node":"n1","name":"stale","waited":700}]`) {
		t.Errorf("result %s", b)
	}
	if n := node.count(nodeapi.ImpExpAbort); n != 1 {
		t.Errorf("%d aborts, want 1", n)
	}
}
