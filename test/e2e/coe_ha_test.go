package e2e

import (
	"encoding/json"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/corral/corral/internal/devcluster"
)

// haRecord is what a node keeps of a cluster's control plane there.
type haRecord struct {
	BindAddress string `json:"bind_address"`
	Ports       struct {
		APIServer int `json:"apiserver"`
	} `json:"ports"`
}

// masterRecords are the nodes' records of a cluster, by node name.
func masterRecords(t *testing.T, c *cluster, uuid string) map[string]haRecord {
	t.Helper()
	out := map[string]haRecord{}
	for _, n := range c.st.Nodes {
		b, err := os.ReadFile(filepath.Join(c.st.StateDir, "coe", n, "records", uuid+".json"))
		if err != nil {
			continue
		}
		var r haRecord
		if err := json.Unmarshal(b, &r); err != nil {
			t.Fatal(err)
		}
		out[n] = r
	}
	return out
}

// nodeProcs are the processes of a cluster's control plane on one node
// (their command lines name the node's cluster directory), by program.
func nodeProcs(c *cluster, node, uuid string) map[string][]int {
	dir := filepath.Join(c.st.StateDir, "coe", node, "clusters", uuid)
	out := map[string][]int{}
	for _, pid := range procsMentioning(dir) {
		b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cmdline"))
		if err != nil {
			continue
		}
		argv0, _, _ := strings.Cut(string(b), "\x00")
		out[filepath.Base(argv0)] = append(out[filepath.Base(argv0)], pid)
	}
	return out
}

// TestCOEThreeMastersSurviveALostMaster: master_count 3 on a three-node
// Corral cluster puts one master on each node, each with an etcd member,
// an API server, a controller manager and a scheduler (kwok on the
// first); the cluster lists the three master_addresses and its kubeconfig
// names the first. With the first master's node daemon stopped and its
// etcd and API server killed, kubectl against another master still lists
// and writes. An upgrade restarts each master in turn. Delete leaves
// nothing on any node. An even master_count is
// refused, and more masters than nodes fail the create saying so.
func TestCOEThreeMastersSurviveALostMaster(t *testing.T) {
	requireK8sTools(t)
	c := newClusterWith(t, devcluster.Options{Nodes: 2, WatcherEvery: time.Hour})
	osc := newCOEClient(t, c)
	osc.must("cluster", "template", "create", "kwok-t", "--coe", "kubernetes", "--image", "kwok", "--server-type", "vm",
		"--external-network", "none")
	if out, err := osc.run("cluster", "create", "even", "--cluster-template", "kwok-t", "--master-count", "2"); err == nil ||
		!strings.Contains(out, "odd") {
		t.Fatalf("two masters: %v\n%s", err, out)
	}
	osc.must("cluster", "create", "big", "--cluster-template", "kwok-t", "--master-count", "5", "--node-count", "0")
	var big map[string]any
	deadline := time.Now().Add(time.Minute)
	for osc.json(&big, "cluster", "show", "big"); big["status"] != "CREATE_FAILED"; osc.json(&big, "cluster", "show", "big") {
		if time.Now().After(deadline) {
			t.Fatalf("five masters on three nodes: %v", big["status"])
		}
		time.Sleep(time.Second)
	}
	if r, _ := big["status_reason"].(string); !strings.Contains(r, "5 masters") || !strings.Contains(r, "only 3") {
		t.Fatalf("five masters on three nodes: %q", r)
	}
	osc.must("cluster", "delete", "big")
	waitCOEGone(t, osc, "big")

	began := time.Now()
	osc.must("cluster", "create", "c1", "--cluster-template", "kwok-t", "--master-count", "3", "--node-count", "2")
	cl := osc.waitCOEStatus("c1", "CREATE_COMPLETE", 5*time.Minute)
	t.Logf("three masters CREATE_COMPLETE in %v", time.Since(began).Round(time.Second))
	uuid := cl["uuid"].(string)
	var masters []string
	for _, a := range cl["master_addresses"].([]any) {
		masters = append(masters, a.(string))
	}
	if len(masters) != 3 || masters[0] == masters[1] || masters[1] == masters[2] || masters[0] == masters[2] {
		t.Fatalf("master_addresses %v", cl["master_addresses"])
	}
	api, err := url.Parse(cl["api_address"].(string))
	if err != nil || api.Hostname() != masters[0] {
		t.Fatalf("api_address %v, masters %v", cl["api_address"], masters)
	}
	recs := masterRecords(t, c, uuid)
	if len(recs) != 3 {
		t.Fatalf("records on %d nodes: %v", len(recs), recs)
	}
	first := ""
	kwoks := 0
	for n, r := range recs {
		if r.BindAddress == masters[0] {
			first = n
		}
		procs := nodeProcs(c, n, uuid)
		for _, p := range []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler"} {
			if len(procs[p]) != 1 {
				t.Fatalf("%s runs %d times on %s: %v", p, len(procs[p]), n, procs)
			}
		}
		kwoks += len(procs["kwok"])
	}
	if kwoks != 1 || len(nodeProcs(c, first, uuid)["kwok"]) != 1 {
		t.Fatalf("kwok runs %d times, want once, on the first master %s", kwoks, first)
	}
	dir := t.TempDir()
	osc.must("cluster", "config", "c1", "--dir", dir)
	kc := filepath.Join(dir, "config")
	if b, _ := os.ReadFile(kc); !strings.Contains(string(b), api.String()) {
		t.Fatalf("the kubeconfig does not name %s:\n%s", api, b)
	}
	waitReadyNodes(t, kc, 2, time.Minute)

	// The first master lost: no supervisor, no etcd member, no API server.
	c.stopDaemon("corral-node " + first)
	lost := nodeProcs(c, first, uuid)
	for _, p := range []string{"etcd", "kube-apiserver"} {
		for _, pid := range lost[p] {
			if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
				t.Fatalf("killing %s %d: %v", p, pid, err)
			}
		}
	}
	var other string
	for n, r := range recs {
		if n != first {
			other = fmt.Sprintf("https://%s:%d", r.BindAddress, r.Ports.APIServer)
			break
		}
	}
	deadline = time.Now().Add(90 * time.Second)
	for {
		out, err := kube(t, kc, "--server", other, "get", "nodes", "-o", "name")
		if err == nil && strings.Count(out, "node/") == 2 {
			if out, err := kube(t, kc, "--server", other, "create", "namespace", "after-the-loss"); err != nil {
				t.Fatalf("writing through %s: %v\n%s", other, err, out)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("kubectl against %s with the first master down: %v\n%s", other, err, out)
		}
		time.Sleep(2 * time.Second)
	}
	if out, err := kube(t, kc, "get", "nodes"); err == nil {
		t.Fatalf("the lost master's API server still answers:\n%s", out)
	}

	// Its node daemon back: it starts what died, and the API address answers again.
	c.startDaemon("corral-node " + first)
	deadline = time.Now().Add(2 * time.Minute)
	for {
		out, err := kube(t, kc, "get", "namespace", "after-the-loss", "-o", "name")
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the first master did not come back: %v\n%s", err, out)
		}
		time.Sleep(2 * time.Second)
	}

	// An upgrade restarts every master, one at a time whatever
	// max_batch_size says (etcd keeps its majority).
	before := map[string][]int{}
	for n := range recs {
		before[n] = nodeProcs(c, n, uuid)["kube-apiserver"]
	}
	osc.must("cluster", "template", "create", "kwok-next", "--coe", "kubernetes", "--image", "kwok", "--server-type", "vm",
		"--external-network", "none", "--labels", "kube_tag=v1.37.2-next")
	began = time.Now()
	osc.must("cluster", "upgrade", "c1", "kwok-next", "--max-batch-size", "3")
	osc.waitCOEStatus("c1", "UPDATE_COMPLETE", 5*time.Minute)
	t.Logf("three masters and two kwok nodes upgraded in %v", time.Since(began).Round(time.Second))
	for n := range recs {
		after := nodeProcs(c, n, uuid)["kube-apiserver"]
		if len(after) != 1 || slices.Equal(after, before[n]) {
			t.Fatalf("the API server on %s was not restarted by the upgrade: %v, then %v", n, before[n], after)
		}
	}
	waitReadyNodes(t, kc, 2, time.Minute)

	osc.must("cluster", "delete", "c1")
	waitCOEGone(t, osc, "c1")
	checkNothingLeft(t, c, uuid)
	for n := range recs {
		if procs := nodeProcs(c, n, uuid); len(procs) != 0 {
			t.Fatalf("processes left on %s: %v", n, procs)
		}
	}
	if procs := controlPlaneProcs(uuid); len(procs) != 0 {
		t.Fatalf("processes left: %v", procs)
	}
	for n, r := range recs {
		addr := net.JoinHostPort(r.BindAddress, strconv.Itoa(r.Ports.APIServer))
		if conn, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			conn.Close()
			t.Fatalf("something still listens on %s's API port %s", n, addr)
		}
	}
}
