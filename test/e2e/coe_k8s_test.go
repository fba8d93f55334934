package e2e

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/corral/corral/internal/coe/k8sbin"
	"github.com/corral/corral/internal/devcluster"
)

// requireK8sTools skips a test when the Kubernetes binaries of `make
// k8s-tools` are missing, unless CORRAL_REQUIRE_K8S=1 (CI), which fails it.
func requireK8sTools(t *testing.T) {
	t.Helper()
	if _, err := k8sbin.Locate(k8sbin.Dir("")); err != nil {
		if os.Getenv("CORRAL_REQUIRE_K8S") == "1" {
			t.Fatalf("%v (CORRAL_REQUIRE_K8S=1)", err)
		}
		t.Skip(err)
	}
	if _, err := os.Stat(kubectlBin); err != nil {
		if os.Getenv("CORRAL_REQUIRE_K8S") == "1" {
			t.Fatalf("%s: %v (CORRAL_REQUIRE_K8S=1)", kubectlBin, err)
		}
		t.Skipf("%s not installed", kubectlBin)
	}
}

// controlPlaneProcs are the processes of a COE cluster's control plane
// (whose command lines name its uuid), by program name.
func controlPlaneProcs(uuid string) map[string][]int {
	out := map[string][]int{}
	for _, pid := range procsMentioning(uuid) {
		b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cmdline"))
		if err != nil {
			continue
		}
		argv0, _, _ := strings.Cut(string(b), "\x00")
		out[filepath.Base(argv0)] = append(out[filepath.Base(argv0)], pid)
	}
	return out
}

// checkNothingLeft checks that no node keeps anything of a deleted
// cluster: no process, no directory, no record, no uid.
func checkNothingLeft(t *testing.T, c *cluster, uuid string) {
	t.Helper()
	if procs := controlPlaneProcs(uuid); len(procs) != 0 {
		t.Errorf("processes of the deleted cluster run: %v", procs)
	}
	for _, n := range c.st.Nodes {
		dir := filepath.Join(c.st.StateDir, "coe", n)
		for _, p := range []string{filepath.Join(dir, "clusters", uuid), filepath.Join(dir, "records", uuid+".json")} {
			if _, err := os.Stat(p); err == nil {
				t.Errorf("%s is left", p)
			}
		}
		uids, _ := os.ReadDir(filepath.Join(dir, "uids"))
		for _, u := range uids {
			if b, _ := os.ReadFile(filepath.Join(dir, "uids", u.Name())); strings.Contains(string(b), uuid) {
				t.Errorf("uid %s of the deleted cluster is still held on %s", u.Name(), n)
			}
		}
	}
}

// TestCOECreateSurvivesDaemonRestarts: corrald SIGKILLed while a
// k8s_process cluster is being created resumes the create to
// CREATE_COMPLETE with one control plane; a node daemon restart keeps the
// control plane's processes (same pids) and the cluster working; an
// upgrade then replaces the worker nodes.
func TestCOECreateSurvivesDaemonRestarts(t *testing.T) {
	requireK8sTools(t)
	c := newClusterWith(t, devcluster.Options{Nodes: 0, WatcherEvery: time.Hour})
	osc := newCOEClient(t, c)
	// dev up's template.
	osc.must("cluster", "create", "c1", "--cluster-template", devcluster.COEDevTemplate, "--node-count", "2")
	var cl map[string]any
	osc.json(&cl, "cluster", "show", "c1")
	uuid := cl["uuid"].(string)

	// Kill corrald once the control plane runs but before the create
	// is complete: the job is waiting for the API server or building
	// the worker group.
	deadline := time.Now().Add(2 * time.Minute)
	for len(controlPlaneProcs(uuid)["kube-apiserver"]) == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("no API server of %s started", uuid)
		}
		time.Sleep(100 * time.Millisecond)
	}
	// Killed at once (asking the API for the status first took longer
	// than the rest of the create on a quick machine); the restarted
	// queue says whether it had a job to resume.
	c.killCorrald()
	c.restartCorrald()
	if n := lastResumed(t, c.proc("corrald").Log); n < 1 {
		t.Fatalf("the restarted corrald took up %d unfinished jobs: the create had ended before the kill", n)
	}
	cl = osc.waitCOEStatus("c1", "CREATE_COMPLETE", 3*time.Minute)
	procs := controlPlaneProcs(uuid)
	for _, p := range []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok"} {
		if len(procs[p]) != 1 {
			t.Fatalf("%s runs %d times after the resumed create: %v", p, len(procs[p]), procs)
		}
	}
	dir := t.TempDir()
	osc.must("cluster", "config", "c1", "--dir", dir)
	kc := filepath.Join(dir, "config")
	waitReadyNodes(t, kc, 2, time.Minute)

	// A node daemon restart leaves the control plane running as it was.
	c.stopDaemon("corral-node node1")
	if after := controlPlaneProcs(uuid); !sameProcs(procs, after) {
		t.Fatalf("stopping the node daemon changed the control plane: %v, then %v", procs, after)
	}
	c.startDaemon("corral-node node1")
	time.Sleep(3 * time.Second) // the supervisor would restart what it did not adopt by now
	if after := controlPlaneProcs(uuid); !sameProcs(procs, after) {
		t.Fatalf("restarting the node daemon changed the control plane: %v, then %v", procs, after)
	}
	waitReadyNodes(t, kc, 2, time.Minute)
	log, _ := os.ReadFile(c.proc("corral-node node1").Log)
	if n := strings.Count(string(log), "adopted a running control plane process"); n < 5 {
		t.Fatalf("the new node daemon adopted %d processes, want 5", n)
	}

	// An upgrade replaces the worker nodes batch by batch and records
	// the template's kube_tag.
	uids := func() string {
		out, err := kube(t, kc, "get", "nodes", "-o", "jsonpath={.items[*].metadata.uid}")
		if err != nil {
			t.Fatalf("node uids: %v\n%s", err, out)
		}
		return out
	}
	before := uids()
	osc.must("cluster", "template", "create", "kwok-next", "--coe", "kubernetes", "--image", "kwok", "--server-type", "vm",
		"--external-network", "none", "--labels", "kube_tag=v1.37.2-next")
	osc.must("cluster", "upgrade", "c1", "kwok-next", "--max-batch-size", "1")
	cl = osc.waitCOEStatus("c1", "UPDATE_COMPLETE", 2*time.Minute)
	if cl["coe_version"] != "v1.37.2-next" {
		t.Fatalf("coe_version after the upgrade: %v", cl["coe_version"])
	}
	waitReadyNodes(t, kc, 2, time.Minute)
	for _, u := range strings.Fields(before) {
		if strings.Contains(uids(), u) {
			t.Fatalf("node %s was not replaced by the upgrade", u)
		}
	}

	osc.must("cluster", "delete", "c1")
	waitCOEGone(t, osc, "c1")
	checkNothingLeft(t, c, uuid)
}

func sameProcs(a, b map[string][]int) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if !slices.Equal(v, b[k]) {
			return false
		}
	}
	return true
}

// waitCOEGone waits until `cluster show` answers 404.
func waitCOEGone(t *testing.T, osc *coeClient, name string) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		out, err := osc.run("cluster", "show", name)
		if err != nil && strings.Contains(out, "(HTTP 404)") {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("cluster %s not gone: %s", name, out)
		}
		time.Sleep(time.Second)
	}
}

// TestCOEAutoHealReplacesNotReadyNode: in a cluster with auto-healing, a
// kwok node made NotReady (its type=kwok label removed, so kwok stops its
// heartbeats) is replaced by a new node, and the health reconciler
// records the cluster HEALTHY again.
func TestCOEAutoHealReplacesNotReadyNode(t *testing.T) {
	requireK8sTools(t)
	c := newClusterWith(t, devcluster.Options{Nodes: 0, WatcherEvery: time.Hour,
		CorraldArgs: []string{"--reconciler-interval", "coe-autoheal=2s", "--reconciler-interval", "coe-health=2s"}})
	osc := newCOEClient(t, c)
	osc.must("cluster", "template", "create", "kwok-t", "--coe", "kubernetes", "--image", "kwok", "--server-type", "vm",
		"--external-network", "none")
	osc.must("cluster", "create", "c1", "--cluster-template", "kwok-t", "--node-count", "2",
		"--labels", "auto_healing_enabled=true,auto_healing_threshold=5s,node_monitor_grace_seconds=20")
	cl := osc.waitCOEStatus("c1", "CREATE_COMPLETE", 3*time.Minute)
	uuid := cl["uuid"].(string)
	dir := t.TempDir()
	osc.must("cluster", "config", "c1", "--dir", dir)
	kc := filepath.Join(dir, "config")
	nodes := waitReadyNodes(t, kc, 2, time.Minute)
	slices.Sort(nodes)
	waitHealth(t, osc, "HEALTHY", time.Minute)

	sick := nodes[0]
	if out, err := kube(t, kc, "label", "node", sick, "type-"); err != nil {
		t.Fatalf("unlabel %s: %v\n%s", sick, err, out)
	}
	deadline := time.Now().Add(3 * time.Minute)
	for {
		ready := readyNodes(t, kc)
		out, _ := kube(t, kc, "get", "nodes", "-o", "name")
		if len(ready) == 2 && !slices.Contains(ready, sick) && !strings.Contains(out, "node/"+sick+"\n") {
			t.Logf("%s replaced; Ready: %v", sick, ready)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s not replaced: Ready %v, nodes %s", sick, ready, out)
		}
		time.Sleep(time.Second)
	}
	osc.json(&cl, "cluster", "show", "c1")
	if cl["node_count"] != float64(2) {
		t.Fatalf("node_count after healing: %v", cl["node_count"])
	}
	waitHealth(t, osc, "HEALTHY", time.Minute)
	osc.must("cluster", "delete", "c1")
	waitCOEGone(t, osc, "c1")
	checkNothingLeft(t, c, uuid)
}

// waitHealth waits for the cluster c1's health_status.
func waitHealth(t *testing.T, osc *coeClient, want string, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		var cl map[string]any
		osc.json(&cl, "cluster", "show", "c1")
		if cl["health_status"] == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("health %v (%v), want %s", cl["health_status"], cl["health_status_reason"], want)
		}
		time.Sleep(time.Second)
	}
}

// TestCOEAutoScaleFollowsPendingPods: in a cluster with auto-scaling,
// pods no node can take (each asks for 3 of a kwok node's 4 CPUs) add
// nodes up to max_node_count, and nodes left without pods go again down
// to min_node_count.
func TestCOEAutoScaleFollowsPendingPods(t *testing.T) {
	requireK8sTools(t)
	// The cluster is left for dev down, which must stop its control
	// plane (it outlives the node daemon on purpose). Registered first,
	// this check runs after the dev cluster's teardown.
	var uuid string
	t.Cleanup(func() {
		if procs := controlPlaneProcs(uuid); uuid != "" && len(procs) != 0 {
			t.Errorf("dev down left the control plane of %s running: %v", uuid, procs)
		}
	})
	c := newClusterWith(t, devcluster.Options{Nodes: 0, WatcherEvery: time.Hour,
		CorraldArgs: []string{"--reconciler-interval", "coe-autoscale=2s"}})
	osc := newCOEClient(t, c)
	osc.must("cluster", "create", "c1", "--cluster-template", devcluster.COEDevTemplate, "--node-count", "1",
		"--labels", "auto_scaling_enabled=true,min_node_count=1,max_node_count=3,autoscaler_scale_down_delay=5s")
	uuid = osc.waitCOEStatus("c1", "CREATE_COMPLETE", 3*time.Minute)["uuid"].(string)
	dir := t.TempDir()
	osc.must("cluster", "config", "c1", "--dir", dir)
	kc := filepath.Join(dir, "config")
	waitReadyNodes(t, kc, 1, time.Minute)

	manifest := filepath.Join(dir, "web.yaml")
	if err := os.WriteFile(manifest, []byte(`apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  replicas: 3
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
      - name: pause
        image: registry.k8s.io/pause:3.9
        resources: {requests: {cpu: "3"}}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := kube(t, kc, "apply", "-f", manifest); err != nil {
		t.Fatalf("apply: %v\n%s", err, out)
	}
	if out, err := kube(t, kc, "rollout", "status", "deployment/web", "--timeout=150s"); err != nil {
		t.Fatalf("the deployment did not get its nodes: %v\n%s", err, out)
	}
	waitReadyNodes(t, kc, 3, time.Minute)
	var cl map[string]any
	osc.json(&cl, "cluster", "show", "c1")
	if cl["node_count"] != float64(3) {
		t.Fatalf("node_count after scaling up: %v", cl["node_count"])
	}
	if out, err := kube(t, kc, "scale", "deployment/web", "--replicas=0"); err != nil {
		t.Fatalf("scale: %v\n%s", err, out)
	}
	deadline := time.Now().Add(3 * time.Minute)
	for {
		osc.json(&cl, "cluster", "show", "c1")
		if cl["node_count"] == float64(1) && cl["status"] == "UPDATE_COMPLETE" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not scaled down: %v %v", cl["node_count"], cl["status"])
		}
		time.Sleep(time.Second)
	}
	waitReadyNodes(t, kc, 1, time.Minute)
}

var queueStartedRE = regexp.MustCompile(`msg="job queue started" jobs=\d+ resumed=(\d+) parked=(\d+)`)

// lastResumed is how many unfinished jobs the last start of the job queue
// in a corrald log took up: running ones resumed, and suspended ones
// parked again.
func lastResumed(t *testing.T, logPath string) int {
	t.Helper()
	b, err := os.ReadFile(logPath)
	if err != nil {
		t.Fatal(err)
	}
	m := queueStartedRE.FindAllSubmatch(b, -1)
	if len(m) == 0 {
		t.Fatalf("no job queue start in %s", logPath)
	}
	running, _ := strconv.Atoi(string(m[len(m)-1][1]))
	parked, _ := strconv.Atoi(string(m[len(m)-1][2]))
	return running + parked
}
