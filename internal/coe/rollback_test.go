package coe

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/corral/corral/internal/config"
)

// TestUpdateWithRollbackRestoresTheNodeCount: an update whose driver step
// fails ends, with rollback, ROLLBACK_COMPLETE with the old node_count and
// nodes and the failure as the reason; without rollback UPDATE_FAILED
// keeping the new count; a rollback that fails too is ROLLBACK_FAILED.
func TestUpdateWithRollbackRestoresTheNodeCount(t *testing.T) {
	e := newEnv(t)
	e.template("t1")
	if err := e.createCluster("k1", 2); err != "" {
		t.Fatal(err)
	}
	before := e.group("k1", "default-worker").Nodes
	var runs atomic.Int32
	e.drv.Gate = func(ctx context.Context, cond string) error {
		if cond == "NodeGroupReady/default-worker" && runs.Add(1) == 1 {
			return errors.New("no room for another node")
		}
		return nil
	}
	if err := e.run(map[string]any{"OP_ID": "OP_COE_CLUSTER_MODIFY", "cluster": "k1", "rollback": true,
		"changes": map[string]any{"node_count": float64(5)}}); err != "" {
		t.Fatalf("the rolled back update failed: %s", err)
	}
	c, g := e.cluster("k1"), e.group("k1", "default-worker")
	if c.Status != config.COERollbackComplete || !strings.Contains(c.StatusReason, "no room for another node") {
		t.Fatalf("cluster %s %q", c.Status, c.StatusReason)
	}
	if g.NodeCount != 2 || len(g.Nodes) != 2 || g.Nodes[0] != before[0] || g.Status != config.COERollbackComplete {
		t.Fatalf("group %d %v %s", g.NodeCount, g.Nodes, g.Status)
	}
	if runs.Load() != 2 {
		t.Fatalf("the group's step ran %d times, want the change and its rollback", runs.Load())
	}
	if st := e.cfg.COEClusterStatus(c.UUID); st != nil && st.Target != "" {
		t.Fatalf("the cluster is still reserved: %q", st.Target)
	}

	// A rollback that fails too.
	runs.Store(0)
	e.drv.Gate = func(ctx context.Context, cond string) error {
		if cond == "NodeGroupReady/default-worker" {
			return errors.New("the API server is gone")
		}
		return nil
	}
	if err := e.run(map[string]any{"OP_ID": "OP_COE_CLUSTER_RESIZE", "cluster": "k1", "rollback": true,
		"node_count": float64(4)}); !strings.Contains(err, "the API server is gone") {
		t.Fatalf("error %s", err)
	}
	c, g = e.cluster("k1"), e.group("k1", "default-worker")
	if c.Status != config.COERollbackFailed || !strings.Contains(c.StatusReason, "rolling back failed") || g.NodeCount != 2 {
		t.Fatalf("cluster %s %q, node_count %d", c.Status, c.StatusReason, g.NodeCount)
	}

	// Without rollback: UPDATE_FAILED, the new count kept.
	if err := e.run(map[string]any{"OP_ID": "OP_COE_CLUSTER_MODIFY", "cluster": "k1",
		"changes": map[string]any{"node_count": float64(3)}}); err == "" {
		t.Fatal("the update succeeded")
	}
	if c, g = e.cluster("k1"), e.group("k1", "default-worker"); c.Status != config.COEUpdateFailed || g.NodeCount != 3 {
		t.Fatalf("cluster %s, node_count %d", c.Status, g.NodeCount)
	}

	// A change that works with rollback asked for is UPDATE_COMPLETE.
	e.drv.Gate = nil
	if err := e.run(map[string]any{"OP_ID": "OP_COE_CLUSTER_MODIFY", "cluster": "k1", "rollback": true,
		"changes": map[string]any{"node_count": float64(4)}}); err != "" {
		t.Fatal(err)
	}
	if c, g = e.cluster("k1"), e.group("k1", "default-worker"); c.Status != config.COEUpdateComplete || len(g.Nodes) != 4 {
		t.Fatalf("cluster %s, nodes %v", c.Status, g.Nodes)
	}
}
