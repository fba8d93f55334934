package e2e

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/corral/corral/internal/coe/controlplane"
	"github.com/corral/corral/internal/coe/k8sbin"
	"github.com/corral/corral/internal/config"
	"github.com/corral/corral/internal/devcluster"
)

// requireKubeletWorkers skips a test when a kubelet worker cannot run
// here (no kubelet built, or Debian's containerd, runc, CNI plugins or
// busybox-static missing), unless CORRAL_REQUIRE_K8S=1, which fails it.
func requireKubeletWorkers(t *testing.T) {
	t.Helper()
	requireK8sTools(t)
	h := controlplane.DefaultWorkerHost()
	var missing []string
	if _, err := k8sbin.Locate(k8sbin.Dir(""), k8sbin.Kubelet); err != nil {
		missing = append(missing, err.Error())
	}
	for _, p := range []string{h.Containerd, h.Ctr, h.Runc, filepath.Join(h.CNIBinDir, "bridge"), h.Busybox} {
		if _, err := os.Stat(p); err != nil {
			missing = append(missing, p)
		}
	}
	if len(missing) == 0 {
		return
	}
	if os.Getenv("CORRAL_REQUIRE_K8S") == "1" {
		t.Fatalf("kubelet workers cannot run: %v (CORRAL_REQUIRE_K8S=1)", missing)
	}
	t.Skipf("kubelet workers cannot run: %v", missing)
}

// TestCOEKubeletWorkerRunsBusyboxPod is the smoke tier: a cluster whose
// worker group is one real kubelet with containerd and runc on the Corral
// node gets a Ready node that runs a busybox pod, whose output the pod log
// API returns (through the API server and the kubelet). Deleting the
// cluster leaves nothing of the worker on the host: no containerd, kubelet
// or shim process, no mount, cgroup, bridge or file.
func TestCOEKubeletWorkerRunsBusyboxPod(t *testing.T) {
	requireKubeletWorkers(t)
	c := newClusterWith(t, devcluster.Options{Nodes: 0, WatcherEvery: time.Hour})
	osc := newCOEClient(t, c)
	osc.must("cluster", "template", "create", "kubelet-t", "--coe", "kubernetes", "--image", "kwok", "--server-type", "vm",
		"--external-network", "none")
	start := time.Now()
	osc.must("cluster", "create", "c1", "--cluster-template", "kubelet-t", "--node-count", "1",
		"--labels", "worker_kind=kubelet")
	cl := osc.waitCOEStatus("c1", "CREATE_COMPLETE", 4*time.Minute)
	t.Logf("CREATE_COMPLETE with a Ready kubelet worker after %v", time.Since(start).Round(100*time.Millisecond))
	uuid := cl["uuid"].(string)
	dir := t.TempDir()
	osc.must("cluster", "config", "c1", "--dir", dir)
	kc := filepath.Join(dir, "config")
	nodes := waitReadyNodes(t, kc, 1, time.Minute)
	node := nodes[0]
	if out, err := kube(t, kc, "get", "node", node, "-o", "jsonpath={.metadata.annotations}"); err != nil || strings.Contains(out, "kwok") {
		t.Fatalf("node %s is not a kubelet's: %v %s", node, err, out)
	}
	if out, _ := kube(t, kc, "get", "node", node, "-o", "jsonpath={.status.nodeInfo.containerRuntimeVersion}"); !strings.HasPrefix(out, "containerd://") {
		t.Fatalf("node %s runs %q, not containerd", node, out)
	}

	const line = "corral smoke: hello from a real pod"
	manifest := filepath.Join(dir, "pod.yaml")
	podStart := time.Now()
	if err := os.WriteFile(manifest, []byte(`apiVersion: v1
kind: Pod
metadata: {name: smoke}
spec:
  restartPolicy: Never
  containers:
  - name: say
    image: `+controlplane.BusyboxImage+`
    imagePullPolicy: Never
    command: ["sh", "-c", "echo '`+line+`'; echo from $(hostname); exec sleep 3600"]
`), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := kube(t, kc, "apply", "-f", manifest); err != nil {
		t.Fatalf("apply: %v\n%s", err, out)
	}
	// The pod keeps running, so that the cluster's delete has a live pod
	// to clean up after. The pod log API: the API server asks the kubelet
	// at the node's InternalIP, with its kubelet client certificate.
	deadline := time.Now().Add(2 * time.Minute)
	for {
		logs, err := kube(t, kc, "get", "--raw", "/api/v1/namespaces/default/pods/smoke/log?container=say")
		if err == nil && strings.Contains(logs, line+"\nfrom smoke") {
			t.Logf("the pod's line came through the log API %v after the pod was applied", time.Since(podStart).Round(100*time.Millisecond))
			break
		}
		if time.Now().After(deadline) {
			addrs, _ := kube(t, kc, "get", "node", node, "-o", "jsonpath={.status.addresses}")
			desc, _ := kube(t, kc, "describe", "pod", "smoke")
			t.Fatalf("pod log: %v\n%s\nnode addresses: %s\n%s", err, logs, addrs, desc)
		}
		time.Sleep(500 * time.Millisecond)
	}
	if phase, _ := kube(t, kc, "get", "pod", "smoke", "-o", "jsonpath={.status.phase}"); phase != "Running" {
		t.Fatalf("pod smoke is %q, not Running", phase)
	}
	// The pod's address is from the subnet corrald handed out to the
	// worker on its Corral node.
	var shown struct {
		PodSubnets []config.COEPodSubnet `json:"pod_subnets"`
	}
	out, err := c.corral("coe", "cluster", "show", "c1", "-o", "json")
	if err := errors.Join(err, json.Unmarshal([]byte(out), &shown)); err != nil || len(shown.PodSubnets) != 1 || shown.PodSubnets[0].Node != node {
		t.Fatalf("the cluster's pod subnets: %v\n%s", err, out)
	}
	subnet := netip.MustParsePrefix(shown.PodSubnets[0].Subnet)
	if ip, _ := kube(t, kc, "get", "pod", "smoke", "-o", "jsonpath={.status.podIP}"); !subnet.Contains(netip.MustParseAddr(ip)) {
		t.Fatalf("pod IP %q is not from the worker's pod subnet %s", ip, subnet)
	}

	coeDir := filepath.Join(c.st.StateDir, "coe", c.st.Nodes[0])
	workers, _ := filepath.Glob(filepath.Join(coeDir, "workers", "*"))
	if len(workers) != 1 {
		t.Fatalf("worker directories: %v", workers)
	}
	id := filepath.Base(workers[0])
	if len(mountsUnder(t, workers[0])) == 0 {
		t.Fatalf("no mount under %s while the pod's node runs: the clean-up check below would prove nothing", workers[0])
	}
	cgroups, _ := filepath.Glob("/sys/fs/cgroup/*/corral-coe-" + id)
	if len(cgroups) == 0 {
		t.Fatalf("no cgroup corral-coe-%s while the worker runs", id)
	}
	// The pod's sandbox and container, whose traces outside the worker's
	// directory are named after them.
	tasks, _ := os.ReadDir(filepath.Join(workers[0], "containerd", "state", "io.containerd.runtime.v2.task", "k8s.io"))
	if len(tasks) < 2 {
		t.Fatalf("containerd runs %d tasks, want the pod's sandbox and container", len(tasks))
	}
	if !slices.ContainsFunc(tasks, func(e os.DirEntry) bool { return exists(shimSocket(id, e.Name())) }) {
		t.Fatalf("no shim socket of the worker's tasks in /run/containerd/s: the clean-up check below would prove nothing")
	}

	// A node daemon restart adopts the worker's containerd and kubelet
	// (same processes), and the pod's log still comes through.
	before := workerProcs(coeDir, id)
	if len(before) < 2 {
		t.Fatalf("the worker's containerd and kubelet are not found: %v", before)
	}
	c.stopDaemon("corral-node node1")
	c.startDaemon("corral-node node1")
	time.Sleep(2 * time.Second) // the supervisor would have stopped or restarted what it did not adopt by now
	if after := workerProcs(coeDir, id); strings.Join(after, "\n") != strings.Join(before, "\n") {
		t.Fatalf("the node daemon restart changed the worker's processes:\n%v\nthen\n%v", before, after)
	}
	if log, _ := os.ReadFile(c.proc("corral-node node1").Log); strings.Count(string(log), "adopted a running control plane process") < 7 {
		t.Fatalf("the new node daemon did not adopt the 5 control plane processes and the worker's 2")
	}
	if logs, err := kube(t, kc, "get", "--raw", "/api/v1/namespaces/default/pods/smoke/log"); err != nil || !strings.Contains(logs, line) {
		t.Fatalf("pod log after the node daemon restart: %v\n%s", err, logs)
	}

	osc.must("cluster", "delete", "c1")
	waitCOEGone(t, osc, "c1")
	checkNothingLeft(t, c, uuid)
	if pids := workerProcs(coeDir, id); len(pids) != 0 {
		t.Errorf("processes of the deleted worker run: %v", pids)
	}
	if m := mountsUnder(t, coeDir); len(m) != 0 {
		t.Errorf("mounts left under %s: %v", coeDir, m)
	}
	for _, p := range append(cgroups, workers[0], "/sys/class/net/ckb"+id, filepath.Join("/run/corral-coe", id)) {
		if _, err := os.Stat(p); err == nil {
			t.Errorf("%s is left", p)
		}
	}
	if links, _ := filepath.Glob("/var/log/containers/smoke_default_*"); len(links) != 0 {
		t.Errorf("container log links left: %v", links)
	}
	for _, task := range tasks {
		if cached, _ := filepath.Glob("/var/lib/cni/results/*" + task.Name() + "*"); len(cached) != 0 {
			t.Errorf("CNI results left: %v", cached)
		}
		if sock := shimSocket(id, task.Name()); exists(sock) {
			t.Errorf("shim socket %s of task %s is left", sock, task.Name())
		}
	}
	for _, tool := range []string{"iptables-save", "ip6tables-save"} {
		if out, err := exec.Command(tool).Output(); err == nil && strings.Contains(string(out), "KUBE-") {
			t.Errorf("%s shows kubelet chains:\n%s", tool, out)
		}
	}
}

// workerProcs are the processes of a kubelet worker, pid and command
// line: its containerd and kubelet (whose command lines name the worker's
// directory) and containerd's shims (which name the worker's socket).
func workerProcs(coeDir, id string) []string {
	var out []string
	for _, s := range []string{filepath.Join(coeDir, "workers", id) + "/", "/run/corral-coe/" + id + "/"} {
		for _, pid := range procsMentioning(s) {
			b, _ := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cmdline"))
			out = append(out, strconv.Itoa(pid)+" "+strings.ReplaceAll(string(b), "\x00", " "))
		}
	}
	slices.Sort(out)
	return out
}

// shimSocket is where containerd 1.6 puts a shim's socket: named after
// its own address, the namespace and the task.
func shimSocket(workerID, task string) string {
	sum := sha256.Sum256([]byte(filepath.Join("/run/corral-coe", workerID, "containerd.sock", "k8s.io", task)))
	return filepath.Join("/run/containerd/s", hex.EncodeToString(sum[:]))
}

func exists(p string) bool {
	_, err := os.Lstat(p)
	return err == nil
}

// mountsUnder lists the mount points at or under dir.
func mountsUnder(t *testing.T, dir string) []string {
	t.Helper()
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.Fields(l)
		if len(f) > 4 && (f[4] == dir || strings.HasPrefix(f[4], dir+"/")) {
			out = append(out, f[4])
		}
	}
	return out
}
