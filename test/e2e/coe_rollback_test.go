package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/corral/corral/internal/devcluster"
)

// TestCOEUpdateRollback: an update that fails for real (the cluster's
// workers are kubelets, and the only Corral node is made not vm_capable,
// so no node can take the new kube node) ends, with --rollback,
// ROLLBACK_COMPLETE with the old node_count and the failure as the
// reason; without it UPDATE_FAILED keeping the new count. The
// rollback is asked through corral's CLI: the openstack client's
// "cluster update --rollback" takes the flag but does not send it.
func TestCOEUpdateRollback(t *testing.T) {
	requireK8sTools(t)
	c := newClusterWith(t, devcluster.Options{Nodes: 0, WatcherEvery: time.Hour})
	osc := newCOEClient(t, c)
	osc.must("cluster", "template", "create", "kubelet-t", "--coe", "kubernetes", "--image", "kwok", "--server-type", "vm",
		"--external-network", "none", "--labels", "worker_kind=kubelet")
	osc.must("cluster", "create", "c1", "--cluster-template", "kubelet-t", "--node-count", "0")
	uuid := osc.waitCOEStatus("c1", "CREATE_COMPLETE", 3*time.Minute)["uuid"].(string)
	node := c.st.Nodes[0]
	if out, err := c.corral("node", "modify", node, "--vm-capable", "no"); err != nil {
		t.Fatalf("vm_capable=no on %s: %v\n%s", node, err, out)
	}

	if out, err := c.corral("coe", "cluster", "update", "c1", "node_count=1", "--rollback"); err != nil {
		t.Fatalf("update with rollback: %v\n%s", err, out)
	}
	cl := waitAnyStatus(t, osc, "c1", "ROLLBACK_COMPLETE", 2*time.Minute)
	if cl["node_count"] != float64(0) {
		t.Fatalf("node_count after the rollback: %v", cl["node_count"])
	}
	if r, _ := cl["status_reason"].(string); !strings.Contains(r, "no node can run") {
		t.Fatalf("status_reason after the rollback: %q", r)
	}

	osc.must("cluster", "update", "c1", "replace", "node_count=1")
	cl = waitAnyStatus(t, osc, "c1", "UPDATE_FAILED", 2*time.Minute)
	if cl["node_count"] != float64(1) {
		t.Fatalf("node_count after the failed update: %v", cl["node_count"])
	}

	if out, err := c.corral("node", "modify", node, "--vm-capable", "yes"); err != nil {
		t.Fatalf("vm_capable=yes on %s: %v\n%s", node, err, out)
	}
	osc.must("cluster", "delete", "c1")
	waitCOEGone(t, osc, "c1")
	checkNothingLeft(t, c, uuid)
}

// waitAnyStatus waits for a cluster's status, whatever the ones before it.
func waitAnyStatus(t *testing.T, osc *coeClient, cluster, want string, within time.Duration) map[string]any {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		var cl map[string]any
		osc.json(&cl, "cluster", "show", cluster)
		if cl["status"] == want {
			return cl
		}
		if time.Now().After(deadline) {
			t.Fatalf("cluster %s: status %v (%v), want %s", cluster, cl["status"], cl["status_reason"], want)
		}
		time.Sleep(time.Second)
	}
}
