package controlplane

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/corral/corral/internal/coe/certs"
	"github.com/corral/corral/internal/coe/k8sbin"
	"github.com/corral/corral/internal/coe/kube"
)

// realTools finds the binaries `make k8s-tools` built; without them the
// test is skipped, unless CORRAL_REQUIRE_K8S=1 makes that a failure.
func realTools(t *testing.T) (k8sbin.Tools, string) {
	t.Helper()
	require := os.Getenv("CORRAL_REQUIRE_K8S") == "1"
	skip := func(format string, args ...any) {
		t.Helper()
		if require {
			t.Fatalf(format, args...)
		}
		t.Skipf(format+" (CORRAL_REQUIRE_K8S=1 makes this a failure)", args...)
	}
	if os.Geteuid() != 0 {
		skip("running a control plane as its own user needs root")
	}
	tools, err := k8sbin.Locate(k8sbin.Dir(""))
	if err != nil {
		skip("no Kubernetes binaries: %v", err)
	}
	kubectl, err := exec.LookPath("kubectl")
	if err != nil {
		skip("no kubectl: %v", err)
	}
	return tools, kubectl
}

// realCluster is one cluster of the test.
type realCluster struct {
	cp     *ControlPlane
	bundle *certs.Bundle
	client *kube.Client
	kc     string // admin kubeconfig file
}

func newRealCluster(t *testing.T, base, uuid string, uid int, tools k8sbin.Tools, shared *SharedEtcd) *realCluster {
	t.Helper()
	b, err := certs.NewBundle(certs.BundleSpec{ClusterName: uuid, APIAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}})
	if err != nil {
		t.Fatal(err)
	}
	p := freePorts(t, 3)
	cp, err := New(Spec{
		ClusterUUID: uuid, ClusterName: uuid, Dir: filepath.Join(base, uuid), UID: uid, GID: uid,
		APIServerPort: p[0], EtcdClientPort: p[1], EtcdPeerPort: p[2],
		Certs: b, SharedEtcd: shared, Tools: tools,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := cp.WriteFiles(); err != nil {
		t.Fatal(err)
	}
	c, err := kube.New(cp.Server(), b.CA.CertPEM(), b.Admin.CertPEM, b.Admin.KeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	kc := filepath.Join(base, uuid+".kubeconfig")
	writeKubeconfig(t, kc, uuid, cp.Server(), b, b.Admin)
	t.Cleanup(func() {
		if t.Failed() {
			dumpLogs(t, cp)
		}
	})
	return &realCluster{cp: cp, bundle: b, client: c, kc: kc}
}

func writeKubeconfig(t *testing.T, path, cluster, server string, b *certs.Bundle, user certs.KeyPair) {
	t.Helper()
	kc, err := certs.Kubeconfig(cluster, server, b.CA.CertPEM(), user.CertPEM, user.KeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(kc.Reveal()), 0o600); err != nil {
		t.Fatal(err)
	}
}

func dumpLogs(t *testing.T, cp *ControlPlane) {
	for _, c := range cp.Components() {
		b, _ := os.ReadFile(cp.LogPath(c.Name))
		lines := strings.Split(strings.TrimSpace(string(b)), "\n")
		t.Logf("---- last lines of %s of %s:\n%s", c.Name, cp.Spec().ClusterUUID, strings.Join(lines[max(0, len(lines)-25):], "\n"))
	}
}

// kubectl runs kubectl with a kubeconfig; HOME is a scratch directory so
// its cache stays out of the machine's.
func kubectl(t *testing.T, bin, kubeconfig string, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, append([]string{"--kubeconfig", kubeconfig}, args...)...)
	cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + filepath.Dir(kubeconfig)}
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	err := cmd.Run()
	if err != nil {
		return out.String(), fmt.Errorf("kubectl %s: %w: %s", strings.Join(args, " "), err, stderr.String())
	}
	return out.String(), nil
}

func waitReady(t *testing.T, c *kube.Client, timeout time.Duration) {
	t.Helper()
	var last error
	waitFor(t, timeout, "the API server ready", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		last = c.Readyz(ctx)
		return last == nil
	})
}

// readyNodes counts the kwok nodes whose Ready condition is True.
func readyNodes(t *testing.T, c *kube.Client) int {
	t.Helper()
	nodes, err := c.ListNodes(context.Background(), kube.SelectorLabelKey+"="+kube.SelectorLabelValue)
	if err != nil {
		return -1
	}
	n := 0
	for _, nd := range nodes {
		if nd.Ready == kube.ConditionTrue {
			n++
		}
	}
	return n
}

// rssKiB reads a process's resident set size.
func rssKiB(pid int) int {
	f, err := os.Open(filepath.Join("/proc", strconv.Itoa(pid), "status"))
	if err != nil {
		return -1
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			n, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
			return n
		}
	}
	return -1
}

// TestRealControlPlane runs real etcd, kube-apiserver, controller
// manager, scheduler and kwok for two clusters side by side, as their own
// users, through the Supervisor, and drives them with the kube client and
// kubectl.
func TestRealControlPlane(t *testing.T) {
	tools, kubectlBin := realTools(t)
	base := baseDir(t)
	sup := NewSupervisor(testOptions())
	var a, b *realCluster
	// Whatever happens, no process outlives the test: the supervisor
	// lets go of the clusters (it holds their locks), then they are
	// stopped, B before A whose etcd it uses.
	t.Cleanup(func() {
		sup.Close()
		for _, c := range []*realCluster{b, a} {
			if c != nil {
				if err := NewSupervisor(Options{}).Stop(c.cp, true); err != nil {
					t.Errorf("cleanup: %v", err)
				}
			}
		}
	})

	a = newRealCluster(t, base, "cluster-a", testUID(), tools, nil)
	start := time.Now()
	if err := sup.Start(a.cp); err != nil {
		t.Fatal(err)
	}
	waitReady(t, a.client, 3*time.Minute)
	toReady := time.Since(start)
	nodesReady, toDeployment := runWorkload(t, kubectlBin, a)
	checkKubeletServingVerified(t, kubectlBin, a)
	toNodes, sinceStart := nodesReady.Sub(start.Add(toReady)), nodesReady.Sub(start)

	sup = restartAndAdopt(t, sup, a)

	// Cluster B beside it: own user, ports and CA, its objects in A's etcd
	// under a prefix of its own.
	etcdClient, err := a.bundle.CA.IssueEtcdClient("cluster-b-apiserver")
	if err != nil {
		t.Fatal(err)
	}
	b = newRealCluster(t, base, "cluster-b", testUID()+1000, tools, &SharedEtcd{
		Endpoints: []string{"https://" + a.cp.Spec().hostPort(a.cp.Spec().EtcdClientPort)},
		CAPEM:     a.bundle.CA.CertPEM(),
		Client:    etcdClient,
		Prefix:    "/clusters/cluster-b/registry",
	})
	if err := sup.Start(b.cp); err != nil {
		t.Fatal(err)
	}
	waitReady(t, b.client, 3*time.Minute)
	ctx := context.Background()
	if n, err := b.client.ListNodes(ctx, ""); err != nil || len(n) != 0 {
		t.Errorf("cluster B sees nodes %v (%v): A's objects leak through the shared etcd", n, err)
	}
	if err := b.client.CreateKwokNode(ctx, kube.KwokNode{Name: "b-1"}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, time.Minute, "cluster B's node Ready", func() bool { return readyNodes(t, b.client) == 1 })
	if n := readyNodes(t, a.client); n != 3 {
		t.Errorf("cluster A has %d Ready nodes after B made one, want 3", n)
	}
	checkIsolation(t, kubectlBin, base, a, b)

	t.Logf("cluster A: /readyz %.1fs after Start; 3 kwok nodes Ready %.1fs later (%.1fs after Start); 3-replica Deployment ready in %.1fs",
		toReady.Seconds(), toNodes.Seconds(), sinceStart.Seconds(), toDeployment.Seconds())
	logRSS(t, sup)

	// Remove leaves nothing: B first, since its objects live in A's etcd.
	removeAndCheck(t, sup, b)
	removeAndCheck(t, sup, a)
}

func testOptions() Options {
	return Options{MinBackoff: 200 * time.Millisecond, MaxBackoff: 2 * time.Second}
}

// runWorkload makes three kwok nodes, sees them Ready and with kubectl,
// and runs a Deployment on them. It returns when the nodes were Ready and
// how long the Deployment took to be ready.
func runWorkload(t *testing.T, kubectlBin string, c *realCluster) (nodesReady time.Time, toDeployment time.Duration) {
	t.Helper()
	ctx := context.Background()
	for i := 1; i <= 3; i++ {
		if err := c.client.CreateKwokNode(ctx, kube.KwokNode{Name: "kwok-" + strconv.Itoa(i)}); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, 2*time.Minute, "3 kwok nodes Ready", func() bool { return readyNodes(t, c.client) == 3 })
	nodesReady = time.Now()

	out, err := kubectl(t, kubectlBin, c.kc, "get", "nodes", "-o", "name")
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Fields(out); !slices.Equal(got, []string{"node/kwok-1", "node/kwok-2", "node/kwok-3"}) {
		t.Errorf("kubectl get nodes: %q", out)
	}
	deployAt := time.Now()
	if _, err := kubectl(t, kubectlBin, c.kc, "create", "deployment", "web", "--image=registry.k8s.io/pause:3.10", "--replicas=3"); err != nil {
		t.Fatal(err)
	}
	if _, err := kubectl(t, kubectlBin, c.kc, "rollout", "status", "deployment/web", "--timeout=150s"); err != nil {
		t.Fatal(err)
	}
	toDeployment = time.Since(deployAt)
	counts, err := c.client.CountPodsByNode(ctx)
	if err != nil {
		t.Fatal(err)
	}
	total := 0
	for n, k := range counts {
		if !strings.HasPrefix(n, "kwok-") {
			t.Errorf("pods on node %q", n)
		}
		total += k
	}
	if total != 3 {
		t.Errorf("pods per node %v, want 3 in all", counts)
	}
	return nodesReady, toDeployment
}

// restartAndAdopt kills the API server and sees the supervisor restart
// it; then replaces the supervisor, as a node daemon restart does, and
// sees the new one adopt every process: same pids, nothing restarted.
func restartAndAdopt(t *testing.T, sup *Supervisor, c *realCluster) *Supervisor {
	t.Helper()
	uuid := c.cp.Spec().ClusterUUID
	before := status(t, sup, uuid, APIServer)
	if err := syscall.Kill(before.PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitFor(t, time.Minute, "the API server restarted", func() bool {
		st := status(t, sup, uuid, APIServer)
		return st.Running && st.PID != before.PID && st.Restarts == 1
	})
	waitReady(t, c.client, 2*time.Minute)

	running := pids(t, sup, uuid)
	sup.Close()
	sup = NewSupervisor(testOptions())
	if err := sup.Start(c.cp); err != nil {
		t.Fatal(err)
	}
	for _, st := range statusAll(t, sup, uuid) {
		if !st.Running || !st.Adopted || st.PID != running[st.Name] {
			t.Errorf("%s after the supervisor restart: %+v, want pid %d adopted", st.Name, st, running[st.Name])
		}
	}
	waitReady(t, c.client, time.Minute)
	return sup
}

func logRSS(t *testing.T, sup *Supervisor) {
	rss := map[string]int{}
	var sumA, sumB int
	for _, st := range statusAll(t, sup, "cluster-a") {
		rss[st.Name] = rssKiB(st.PID)
		sumA += rss[st.Name]
	}
	for _, st := range statusAll(t, sup, "cluster-b") {
		sumB += rssKiB(st.PID)
	}
	t.Logf("RSS MiB, cluster A: etcd %d, kube-apiserver %d, kube-controller-manager %d, kube-scheduler %d, kwok %d, total %d; cluster B (shared etcd, 4 processes) total %d",
		rss[Etcd]>>10, rss[APIServer]>>10, rss[ControllerManager]>>10, rss[Scheduler]>>10, rss[Kwok]>>10, sumA>>10, sumB>>10)
}

// removeAndCheck stops and removes a cluster and checks that no process,
// listening port or file of it is left.
func removeAndCheck(t *testing.T, sup *Supervisor, c *realCluster) {
	t.Helper()
	spec := c.cp.Spec()
	running := pids(t, sup, spec.ClusterUUID)
	if err := sup.Stop(c.cp, true); err != nil {
		t.Fatal(err)
	}
	for name, pid := range running {
		if procOwner(pid) != -1 {
			t.Errorf("%s of %s (pid %d) still runs", name, spec.ClusterUUID, pid)
		}
	}
	var paths []string
	for _, comp := range c.cp.Components() {
		paths = append(paths, comp.Path)
	}
	if left := clusterProcesses(paths, spec.Dir, spec.UID); len(left) > 0 {
		t.Errorf("processes of %s left: %v", spec.ClusterUUID, left)
	}
	for _, p := range []int{spec.APIServerPort, spec.EtcdClientPort, spec.EtcdPeerPort} {
		if listening(p) {
			t.Errorf("port %d of %s still listens", p, spec.ClusterUUID)
		}
	}
	if _, err := os.Stat(spec.Dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("directory of %s left: %v", spec.ClusterUUID, err)
	}
}

// checkIsolation: each cluster's clients and servers refuse the other's.
func checkIsolation(t *testing.T, kubectlBin, base string, a, b *realCluster) {
	t.Helper()
	// A's kubeconfig pointed at B's API server: kubectl does not trust
	// B's serving certificate.
	cross := filepath.Join(base, "a-at-b.kubeconfig")
	writeKubeconfig(t, cross, "a-at-b", b.cp.Server(), a.bundle, a.bundle.Admin)
	if out, err := kubectl(t, kubectlBin, cross, "get", "nodes"); err == nil || !strings.Contains(err.Error(), "certificate signed by unknown authority") {
		t.Errorf("kubectl with A's kubeconfig against B: %v, output %q; want an unknown authority", err, out)
	}
	// B's server does not take A's admin certificate for anyone, even
	// from a client that trusts B: the request is anonymous and refused.
	c, err := kube.New(b.cp.Server(), b.bundle.CA.CertPEM(), a.bundle.Admin.CertPEM, a.bundle.Admin.KeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, err = c.ListNodes(context.Background(), "")
	var ae *kube.APIError
	if !errors.As(err, &ae) || ae.Code != 403 || !strings.Contains(ae.Message, `User "system:anonymous"`) {
		t.Errorf("B's API server with A's admin certificate: %v, want 403 for system:anonymous", err)
	}
}

func statusAll(t *testing.T, sup *Supervisor, uuid string) []ComponentStatus {
	t.Helper()
	st, err := sup.Status(uuid)
	if err != nil {
		t.Fatal(err)
	}
	return st
}
