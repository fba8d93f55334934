package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/corral/corral/internal/devcluster"
	"github.com/corral/corral/internal/storecfg"
)

// The cluster IP's e2e tests give each node daemon a network namespace of
// its own holding the master network device (a bridge without ports:
// every kernel has the bridge driver, not always the dummy one), so which
// node holds the address is seen with ip -n NS addr show.

const mipDev = "crlmip0"

// mipNamespaces makes one namespace per node, each with the master
// network device, and removes them when the test ends.
func mipNamespaces(t *testing.T, nodes ...string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for i, n := range nodes {
		ns := fmt.Sprintf("crlmip%d-%d", os.Getpid()%100000, i+1)
		exec.Command("ip", "netns", "del", ns).Run() // a killed earlier run's
		if b, err := exec.Command("ip", "netns", "add", ns).CombinedOutput(); err != nil {
			t.Fatalf("ip netns add %s: %v: %s", ns, err, b)
		}
		t.Cleanup(func() { exec.Command("ip", "netns", "del", ns).Run() })
		if b, err := exec.Command("ip", "-n", ns, "link", "add", mipDev, "type", "bridge").CombinedOutput(); err != nil {
			t.Fatalf("ip link add in %s: %v: %s", ns, err, b)
		}
		out[n] = ns
	}
	return out
}

func mipNodeArgs(ns map[string]string) map[string][]string {
	out := map[string][]string{}
	for n, s := range ns {
		out[n] = []string{"--master-ip-netns", s}
	}
	return out
}

// mipOn returns the address (with prefix length) of ip on the device in
// ns, "" when it is not there.
func mipOn(t *testing.T, ns, ip string) string {
	t.Helper()
	b, err := exec.Command("ip", "-n", ns, "-o", "addr", "show", "dev", mipDev).CombinedOutput()
	if err != nil {
		t.Fatalf("ip addr show in %s: %v: %s", ns, err, b)
	}
	for _, f := range strings.Fields(string(b)) {
		if strings.HasPrefix(f, ip+"/") {
			return f
		}
	}
	return ""
}

func wantMIP(t *testing.T, ns map[string]string, ip, holder, prefix string) {
	t.Helper()
	waitFor(t, 20*time.Second, fmt.Sprintf("%s on %s only", ip, holder), func() bool {
		for n, s := range ns {
			got := mipOn(t, s, ip)
			if n == holder && got != ip+"/"+prefix || n != holder && got != "" {
				return false
			}
		}
		return true
	})
}

// TestMasterIP: init records the cluster IP, corrald puts it on the
// master's node when it starts, activate-master-ip and
// deactivate-master-ip add and remove it, cluster verify reports it where
// it does not belong, and cluster modify moves it.
func TestMasterIP(t *testing.T) {
	requireRoot(t)
	ns := mipNamespaces(t, "node1", "node2")
	const ip = "198.51.100.10"
	c := newClusterWith(t, devcluster.Options{Nodes: 1, Hypervisors: []string{"fake"}, WatcherEvery: time.Hour,
		ClusterIP: ip, MasterNetdev: mipDev, MasterNetmask: 32, NodeArgsFor: mipNodeArgs(ns)})
	ctx := context.Background()

	wantMIP(t, ns, ip, "node1", "32")
	info, err := c.luxi.QueryClusterInfo(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info["master_ip"] != ip || info["cluster_ip"] != ip || info["master_netdev"] != mipDev || info["master_netmask"] != float64(32) {
		t.Fatalf("cluster info: master_ip %v cluster_ip %v master_netdev %v master_netmask %v", info["master_ip"], info["cluster_ip"], info["master_netdev"], info["master_netmask"])
	}
	if out, err := c.corral("cluster", "info"); err != nil || !strings.Contains(out, "master_netdev: "+mipDev) {
		t.Fatalf("cluster info: %v\n%s", err, out)
	}

	out, err := c.corral("cluster", "deactivate-master-ip", "--yes")
	if err != nil {
		t.Fatalf("deactivate-master-ip: %v\n%s", err, out)
	}
	wantMIP(t, ns, ip, "", "")
	// Verify reports the address missing on the master's node.
	out, err = c.corral("cluster", "verify")
	if err == nil || !strings.Contains(out, "the master IP "+ip+" is not on "+mipDev+" of the master's node") {
		t.Fatalf("verify without the master IP: %v\n%s", err, out)
	}
	// Twice is no error, as in Ganeti.
	if out, err := c.corral("cluster", "deactivate-master-ip", "--yes"); err != nil {
		t.Fatalf("deactivate-master-ip again: %v\n%s", err, out)
	}
	for range 2 {
		if out, err := c.corral("cluster", "activate-master-ip"); err != nil {
			t.Fatalf("activate-master-ip: %v\n%s", err, out)
		}
		wantMIP(t, ns, ip, "node1", "32")
	}
	if out, err := c.corral("cluster", "verify"); err != nil || strings.Contains(out, "master IP") {
		t.Fatalf("verify with the master IP in place: %v\n%s", err, out)
	}

	// The address on another node is an error too.
	if b, err := exec.Command("ip", "-n", ns["node2"], "addr", "add", ip+"/32", "dev", mipDev).CombinedOutput(); err != nil {
		t.Fatalf("adding the address by hand: %v: %s", err, b)
	}
	out, err = c.corral("cluster", "verify")
	if err == nil || !strings.Contains(out, "node node2: the master IP "+ip+" is on "+mipDev+", but the master runs on node node1") {
		t.Fatalf("verify with the master IP on node2: %v\n%s", err, out)
	}
	exec.Command("ip", "-n", ns["node2"], "addr", "del", ip+"/32", "dev", mipDev).Run()

	// modify: a new netmask, then a new address (the old one goes).
	if out, err := c.corral("cluster", "modify", "--master-netmask", "24"); err != nil {
		t.Fatalf("modify --master-netmask: %v\n%s", err, out)
	}
	wantMIP(t, ns, ip, "node1", "24")
	const ip2 = "198.51.100.11"
	if out, err := c.corral("cluster", "modify", "--cluster-ip", ip2); err != nil {
		t.Fatalf("modify --cluster-ip: %v\n%s", err, out)
	}
	wantMIP(t, ns, ip2, "node1", "24")
	wantMIP(t, ns, ip, "", "")
	if out, err := c.corral("cluster", "modify", "--cluster-ip", c.st.IPs[1]); err == nil || !strings.Contains(out, "node2's own address") {
		t.Fatalf("modify --cluster-ip to a node's address: %v\n%s", err, out)
	}

	// A restarted master claims the address again.
	if out, err := c.corral("cluster", "deactivate-master-ip", "--yes"); err != nil {
		t.Fatalf("deactivate-master-ip: %v\n%s", err, out)
	}
	wantMIP(t, ns, ip2, "", "")
	c.stopCorrald()
	c.restartCorrald()
	wantMIP(t, ns, ip2, "node1", "24")

	// Without a cluster IP the opcodes are refused and info shows the
	// master node's own address.
	if out, err := c.corral("cluster", "modify", "--cluster-ip", ""); err != nil {
		t.Fatalf("modify --cluster-ip '': %v\n%s", err, out)
	}
	wantMIP(t, ns, ip2, "", "")
	out, err = c.corral("cluster", "activate-master-ip")
	if err == nil || !strings.Contains(out, "The cluster has no cluster IP") {
		t.Fatalf("activate-master-ip without a cluster IP: %v\n%s", err, out)
	}
	if info, err = c.luxi.QueryClusterInfo(ctx); err != nil || info["master_ip"] != c.st.IPs[0] {
		t.Fatalf("master_ip without a cluster IP: %v, %v (want %s)", info["master_ip"], err, c.st.IPs[0])
	}
}

// TestMasterIPFollowsFailover: with master candidates named after their
// nodes, the cluster IP is on the elected master's node, and a master
// failover moves it: the new master's node adds it and the old one lets
// it go.
func TestMasterIPFollowsFailover(t *testing.T) {
	requireEtcd(t)
	ns := mipNamespaces(t, "node1", "node2")
	const ip = "198.51.100.20"
	c := newClusterWith(t, devcluster.Options{Nodes: 1, Hypervisors: []string{"fake"}, WatcherEvery: time.Hour,
		Store: storecfg.BackendEtcd, EtcdMembers: 1, Masters: 2, CandidatesOnNodes: true, NoForward: true,
		CorraldArgs: []string{"--election-ttl", failoverTTL},
		ClusterIP:   ip, MasterNetdev: mipDev, MasterNetmask: 32, NodeArgsFor: mipNodeArgs(ns)})
	first := c.leader(30 * time.Second)
	if first.Name != "node1" {
		t.Fatalf("the first master is %s, want node1", first.Name)
	}
	wantMIP(t, ns, ip, "node1", "32")

	out, err := c.corralAt(first.Socket, "cluster", "master-failover", "--to", "node2")
	if err != nil {
		t.Fatalf("master-failover: %v\n%s", err, out)
	}
	second := c.leader(30 * time.Second)
	if second.Name != "node2" {
		t.Fatalf("after master-failover --to node2, %s leads", second.Name)
	}
	wantMIP(t, ns, ip, "node2", "32")
	// The configuration follows: getmaster names the new master's node.
	if out, err := c.corralAt(second.Socket, "cluster", "getmaster"); err != nil || out != "node2\n" {
		t.Fatalf("cluster getmaster after the failover: %v %q, want node2", err, out)
	}
	out, err = c.corralAt(second.Socket, "cluster", "verify")
	if err != nil || strings.Contains(out, "master IP") {
		t.Fatalf("verify after the failover: %v\n%s", err, out)
	}

	// A killed master's node still holds the address: the next master
	// tells it to let go.
	c.killDaemon(second.Proc)
	third := c.leader(30 * time.Second)
	if third.Name != "node1" {
		t.Fatalf("after the kill of node2's master, %s leads", third.Name)
	}
	wantMIP(t, ns, ip, "node1", "32")
	if out, err := c.corralAt(third.Socket, "cluster", "getmaster"); err != nil || out != "node1\n" {
		t.Fatalf("cluster getmaster after the kill: %v %q, want node1", err, out)
	}
}

// TestClusterInitClusterIP: `corral cluster init` records --cluster-ip,
// --master-netdev and --master-netmask, refuses a cluster IP without a
// device, the started master's node holds the address, and a destroy
// takes it off.
func TestClusterInitClusterIP(t *testing.T) {
	requireRoot(t)
	ns := mipNamespaces(t, "m1")
	h := newHandCluster(t, "mip")
	const ip = "198.51.100.40"
	if out, err := h.corral(h.initArgs("mip.cluster", "--cluster-ip", ip)...); err == nil || !strings.Contains(out, "needs a master network device") {
		t.Fatalf("init with a cluster IP and no device: %v\n%s", err, out)
	}
	if out, err := h.corral(h.initArgs("mip.cluster", "--cluster-ip", ip, "--master-netdev", mipDev, "--master-netmask", "26")...); err != nil {
		t.Fatalf("init: %v\n%s", err, out)
	}
	h.startNode("--master-ip-netns", ns["m1"])
	h.startMaster()
	wantMIP(t, ns, ip, "m1", "26")
	out, err := h.corral("cluster", "info", "--json")
	if err != nil {
		t.Fatalf("info: %v\n%s", err, out)
	}
	for _, want := range []string{`"cluster_ip": "` + ip + `"`, `"master_ip": "` + ip + `"`, `"master_netdev": "` + mipDev + `"`, `"master_netmask": 26`} {
		if !strings.Contains(out, want) {
			t.Errorf("info lacks %s:\n%s", want, out)
		}
	}
	// Destroying the cluster takes the address off, as Ganeti's does.
	if out, err := h.corral("cluster", "destroy", "--yes-do-it"); err != nil {
		t.Fatalf("destroy: %v\n%s", err, out)
	}
	wantMIP(t, ns, ip, "", "")
}
