package cmdlib

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/corral/corral/internal/config"
	"github.com/corral/corral/internal/nodeapi"
)

// TestMasterIPParams: cluster modify refuses bad master network
// parameters without a node call, and a change takes the old address
// down on the master's node before putting the new one up.
func TestMasterIPParams(t *testing.T) {
	node := newNodeDouble()
	var mipArgs []string
	node.withArgs = func(method string, args any) {
		if a, ok := args.(nodeapi.MasterIPArgs); ok {
			mipArgs = append(mipArgs, fmt.Sprintf("%s %s/%d %s", method, a.Address, a.Netmask, a.Netdev))
		}
	}
	e := openEnv(t, filepath.Join(t.TempDir(), "s.db"), node, true)
	defer e.close()

	if st, res := e.run(t, map[string]any{"OP_ID": "OP_CLUSTER_ACTIVATE_MASTER_IP"}); st != "error" || !strings.Contains(resultText(res), "has no cluster IP") {
		t.Fatalf("activate without a cluster IP: %s %v", st, res)
	}
	for _, bad := range []map[string]any{
		{"cluster_ip": "198.51.100.1"},                          // no device
		{"cluster_ip": "198.51.100.1", "master_netdev": "br 0"}, // bad device
		{"cluster_ip": "127.0.0.9", "master_netdev": "br0"},     // loopback
		{"cluster_ip": "127.0.0.2", "master_netdev": "br0"},     // the node's own
		{"cluster_ip": "198.51.100.1", "master_netdev": "br0", "master_netmask": 33},
		{"cluster_ip": "not-an-ip", "master_netdev": "br0"},
	} {
		bad["OP_ID"] = "OP_CLUSTER_SET_PARAMS"
		if st, res := e.run(t, bad); st != "error" {
			t.Errorf("%v: %s %v", bad, st, res)
		}
	}
	if len(mipArgs) != 0 || e.cfg.Cluster().ClusterIP != "" {
		t.Fatalf("refused changes made calls %v or changed the cluster IP to %q", mipArgs, e.cfg.Cluster().ClusterIP)
	}

	if st, res := e.run(t, map[string]any{"OP_ID": "OP_CLUSTER_SET_PARAMS", "cluster_ip": "198.51.100.1", "master_netdev": "br0"}); st != "success" {
		t.Fatalf("setting the cluster IP: %s %v", st, res)
	}
	if st, res := e.run(t, map[string]any{"OP_ID": "OP_CLUSTER_SET_PARAMS", "master_netmask": 24}); st != "success" {
		t.Fatalf("setting the netmask: %s %v", st, res)
	}
	if st, res := e.run(t, map[string]any{"OP_ID": "OP_CLUSTER_DEACTIVATE_MASTER_IP"}); st != "success" {
		t.Fatalf("deactivate: %s %v", st, res)
	}
	want := []string{
		nodeapi.ActivateMasterIP + " 198.51.100.1/32 br0",
		nodeapi.DeactivateMasterIP + " 198.51.100.1/32 br0",
		nodeapi.ActivateMasterIP + " 198.51.100.1/24 br0",
		nodeapi.DeactivateMasterIP + " 198.51.100.1/24 br0",
	}
	if strings.Join(mipArgs, "\n") != strings.Join(want, "\n") {
		t.Fatalf("node calls:\n%s\nwant:\n%s", strings.Join(mipArgs, "\n"), strings.Join(want, "\n"))
	}
	if c := e.cfg.Cluster(); c.ClusterIP != "198.51.100.1" || c.MasterNetdev != "br0" || c.MasterIPNetmask() != 24 {
		t.Fatalf("cluster: %q %q %d", c.ClusterIP, c.MasterNetdev, c.MasterIPNetmask())
	}

	// The master claims it at start: its node activates, the others let go.
	ctx := context.Background()
	tx := e.cfg.Begin()
	tx.PutNode(&config.Node{Meta: config.Meta{Name: "n2"}, PrimaryIP: "127.0.0.3", Group: e.cfg.Nodes()[0].Group})
	if err := e.cfg.Commit(ctx, tx); err != nil {
		t.Fatal(err)
	}
	node.mu.Lock()
	node.calls = nil
	node.mu.Unlock()
	e.proc.SelfNode = "n2"
	if err := e.proc.ClaimMasterIP(ctx); err != nil {
		t.Fatal(err)
	}
	node.mu.Lock()
	calls := strings.Join(node.calls, "\n")
	node.mu.Unlock()
	if calls != "n1 "+nodeapi.DeactivateMasterIP+" \nn2 "+nodeapi.ActivateMasterIP+" " {
		t.Fatalf("claim calls:\n%s", calls)
	}
}

func resultText(res []any) string {
	b, _ := json.Marshal(res)
	return string(b)
}
