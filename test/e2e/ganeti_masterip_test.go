package e2e

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/corral/corral/internal/devcluster"
)

// TestGanetiMasterIP runs Ganeti's own gnt-cluster activate-master-ip,
// deactivate-master-ip and modify --master-netmask against a drop-in
// cluster with a cluster IP, and reads the ssconf files and gnt-cluster
// info.
func TestGanetiMasterIP(t *testing.T) {
	requireGaneti(t)
	ns := mipNamespaces(t, "node1", "node2")
	const ip = "198.51.100.30"
	c := newClusterWith(t, devcluster.Options{
		Nodes: 1, Hypervisors: []string{"fake"}, GanetiDropin: true,
		OSDir:     filepath.Join(repoDir, "os") + ":" + ganetiOSDir,
		ClusterIP: ip, MasterNetdev: mipDev, MasterNetmask: 32, NodeArgsFor: mipNodeArgs(ns),
	})
	wantMIP(t, ns, ip, "node1", "32")
	for key, want := range map[string]string{"master_ip": ip, "master_netdev": mipDev, "master_netmask": "32"} {
		if got := strings.TrimSpace(c.ssconf(key)); got != want {
			t.Errorf("ssconf_%s = %q, want %q", key, got, want)
		}
	}
	out := c.mustGnt("gnt-cluster", "info")
	if !strings.Contains(out, "master netdev: "+mipDev) {
		t.Errorf("gnt-cluster info does not show the master netdev:\n%s", out)
	}

	c.mustGnt("gnt-cluster", "deactivate-master-ip", "--yes")
	wantMIP(t, ns, ip, "", "")
	c.mustGnt("gnt-cluster", "activate-master-ip")
	wantMIP(t, ns, ip, "node1", "32")

	c.mustGnt("gnt-cluster", "modify", "--master-netmask", "28")
	wantMIP(t, ns, ip, "node1", "28")
	waitFor(t, 10*time.Second, "ssconf_master_netmask to follow", func() bool {
		return strings.TrimSpace(c.ssconf("master_netmask")) == "28"
	})
}
