package e2e

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/corral/corral/internal/coe/k8sbin"
	"github.com/corral/corral/internal/devcluster"
)

// coeClient runs the unchanged `openstack coe` client with a dev
// cluster's coe.env, as `. coe.env; openstack coe ...` would.
type coeClient struct {
	t    *testing.T
	env  []string
	home string
}

func newCOEClient(t *testing.T, c *cluster) *coeClient {
	t.Helper()
	if _, err := os.Stat(openstackBin); err != nil {
		if os.Getenv("CORRAL_REQUIRE_BAREMETAL") == "1" {
			t.Fatalf("%s: %v (CORRAL_REQUIRE_BAREMETAL=1)", openstackBin, err)
		}
		t.Skipf("%s not installed (python3-openstackclient, python3-magnumclient)", openstackBin)
	}
	if err := exec.Command("/usr/bin/python3", "-c", "import magnumclient").Run(); err != nil {
		if os.Getenv("CORRAL_REQUIRE_BAREMETAL") == "1" {
			t.Fatal("python3-magnumclient is missing (CORRAL_REQUIRE_BAREMETAL=1)")
		}
		t.Skip("python3-magnumclient is not installed")
	}
	env, err := devcluster.ReadCOEEnv(c.st.StateDir)
	if err != nil {
		t.Fatal(err)
	}
	if !contains(env, "OS_AUTH_TYPE=http_basic") || !contains(env, "OS_USERNAME=admin") ||
		!contains(env, "OS_ENDPOINT="+c.st.COEURL) || !strings.HasSuffix(c.st.COEURL, "/v1") {
		t.Fatalf("coe.env: %v (endpoint %s)", env, c.st.COEURL)
	}
	if fi, err := os.Stat(filepath.Join(c.st.StateDir, devcluster.COEEnvFile)); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("coe.env mode: %v %v", fi, err)
	}
	home := t.TempDir()
	return &coeClient{t: t, env: env, home: home}
}

func (c *coeClient) run(args ...string) (string, error) {
	cmd := exec.Command(openstackBin, append([]string{"coe"}, args...)...)
	cmd.Dir = c.home
	cmd.Env = append([]string{"PATH=/usr/bin:/bin", "LANG=C.UTF-8", "SHELL=/bin/sh", "HOME=" + c.home,
		"XDG_CACHE_HOME=" + filepath.Join(c.home, "cache")}, c.env...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func (c *coeClient) must(args ...string) string {
	c.t.Helper()
	out, err := c.run(args...)
	if err != nil {
		c.t.Fatalf("openstack coe %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

func (c *coeClient) json(v any, args ...string) {
	c.t.Helper()
	out := c.must(append(args, "-f", "json")...)
	if i := strings.IndexAny(out, "{["); i > 0 {
		out = out[i:]
	}
	if err := json.Unmarshal([]byte(out), v); err != nil {
		c.t.Fatalf("openstack coe %s: not JSON: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// TestCOEAPIFront checks the path from the client to corrald: dev up
// starts the Container Infra API with http_basic and writes coe.env; the
// client's read-only commands reach corrald over LUXI. It needs no COE
// unit.
func TestCOEAPIFront(t *testing.T) {
	c := newClusterWith(t, devcluster.Options{Nodes: 1, WatcherEvery: time.Hour})
	osc := newCOEClient(t, c)
	var list []map[string]any
	osc.json(&list, "cluster", "list")
	if len(list) != 0 {
		t.Fatalf("cluster list: %v", list)
	}
	// dev up makes the template kwok-small when the Kubernetes tools
	// are there.
	osc.json(&list, "cluster", "template", "list")
	if _, err := k8sbin.Locate(k8sbin.Dir("")); err != nil {
		if len(list) != 0 {
			t.Fatalf("template list without the k8s tools: %v", list)
		}
	} else if len(list) != 1 || list[0]["name"] != devcluster.COEDevTemplate {
		t.Fatalf("template list: %v", list)
	}
	osc.json(&list, "service", "list")
	if len(list) != 2 || list[0]["binary"] != "magnum-conductor" || list[0]["host"] != c.st.Master ||
		list[0]["state"] != "up" || list[1]["binary"] != "magnum-api" {
		t.Fatalf("service list: %v (master %s)", list, c.st.Master)
	}
	if out := osc.must("quotas", "show", "--project-id", "admin", "--resource", "Cluster"); !strings.Contains(out, "| hard_limit | 20 ") {
		t.Fatalf("default quota: %s", out)
	}
	if out, err := osc.run("cluster", "show", "nope"); err == nil || !strings.Contains(out, "Cluster nope could not be found. (HTTP 404)") {
		t.Fatalf("unknown cluster: %v\n%s", err, out)
	}
	// Wrong credentials are refused.
	bad := &coeClient{t: t, home: osc.home}
	for _, kv := range osc.env {
		if strings.HasPrefix(kv, "OS_PASSWORD=") {
			kv = "OS_PASSWORD=wrong"
		}
		bad.env = append(bad.env, kv)
	}
	if out, err := bad.run("cluster", "list"); err == nil || !strings.Contains(out, "401") {
		t.Fatalf("wrong password: %v\n%s", err, out)
	}
}

const kubectlBin = "/usr/bin/kubectl"

// waitCOEStatus polls `cluster show` until the cluster's status is want;
// a *_FAILED status ends the wait with its reason.
func (c *coeClient) waitCOEStatus(cluster, want string, within time.Duration) map[string]any {
	c.t.Helper()
	deadline := time.Now().Add(within)
	for {
		var cl map[string]any
		c.json(&cl, "cluster", "show", cluster)
		st, _ := cl["status"].(string)
		if st == want {
			return cl
		}
		if strings.HasSuffix(st, "_FAILED") || time.Now().After(deadline) {
			c.t.Fatalf("cluster %s: status %s (%v), want %s", cluster, st, cl["status_reason"], want)
		}
		time.Sleep(time.Second)
	}
}

// kube runs kubectl with a kubeconfig.
func kube(t *testing.T, kubeconfig string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(kubectlBin, append([]string{"--kubeconfig", kubeconfig, "--request-timeout", "20s"}, args...)...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// readyNodes are the names of the Ready nodes kubectl lists.
func readyNodes(t *testing.T, kubeconfig string) []string {
	t.Helper()
	out, err := kube(t, kubeconfig, "get", "nodes", "-o", "json")
	if err != nil {
		t.Fatalf("kubectl get nodes: %v\n%s", err, out)
	}
	var l struct {
		Items []struct {
			Metadata struct{ Name string } `json:"metadata"`
			Status   struct {
				Conditions []struct{ Type, Status string } `json:"conditions"`
			} `json:"status"`
		} `json:"items"`
	}
	if err := json.Unmarshal([]byte(out), &l); err != nil {
		t.Fatal(err)
	}
	var ready []string
	for _, n := range l.Items {
		for _, c := range n.Status.Conditions {
			if c.Type == "Ready" && c.Status == "True" {
				ready = append(ready, n.Metadata.Name)
			}
		}
	}
	return ready
}

// waitReadyNodes waits until kubectl lists n Ready nodes.
func waitReadyNodes(t *testing.T, kubeconfig string, n int, within time.Duration) []string {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		got := readyNodes(t, kubeconfig)
		if len(got) == n {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d Ready nodes %v, want %d", len(got), got, n)
		}
		time.Sleep(time.Second)
	}
}

// TestCOERealClientEndToEnd is the walk with the unchanged client
// against a dev cluster: a k8s_process cluster with three kwok workers,
// its kubeconfig used by kubectl, resize, node groups, the CA, the quota
// and a delete that leaves nothing running. It needs the COE units and
// the control plane on the node (corrald refuses to start while an
// opcode has no unit).
func TestCOERealClientEndToEnd(t *testing.T) {
	requireK8sTools(t)
	c := newClusterWith(t, devcluster.Options{Nodes: 1, WatcherEvery: time.Hour})
	osc := newCOEClient(t, c)

	var tpl map[string]any
	osc.json(&tpl, "cluster", "template", "create", "kwok-test", "--coe", "kubernetes", "--image", "kwok",
		"--server-type", "vm", "--external-network", "none")
	created := time.Now()
	out := osc.must("cluster", "create", "c1", "--cluster-template", "kwok-test", "--node-count", "3", "--master-count", "1")
	var cl map[string]any
	osc.json(&cl, "cluster", "show", "c1") // found at once after the 202
	if uuid, _ := cl["uuid"].(string); uuid == "" || !strings.Contains(out, uuid) {
		t.Fatalf("create printed %q; show: %v", out, cl)
	}
	uuid := cl["uuid"].(string)
	cl = osc.waitCOEStatus("c1", "CREATE_COMPLETE", 3*time.Minute)
	t.Logf("cluster create to CREATE_COMPLETE: %v", time.Since(created).Round(time.Millisecond))
	if cl["node_count"] != float64(3) || cl["master_count"] != float64(1) || cl["api_address"] == nil {
		t.Fatalf("cluster: %v", cl)
	}

	dir := t.TempDir()
	if out := osc.must("cluster", "config", "c1", "--dir", dir); !strings.Contains(out, "KUBECONFIG="+filepath.Join(dir, "config")) {
		t.Fatalf("cluster config: %s", out)
	}
	oldConfig := filepath.Join(dir, "config")
	nodes := waitReadyNodes(t, oldConfig, 3, time.Minute)
	t.Logf("cluster create to 3 Ready nodes: %v", time.Since(created).Round(time.Millisecond))
	if out, err := kube(t, oldConfig, "create", "deployment", "web", "--image=registry.k8s.io/pause:3.9", "--replicas=2"); err != nil {
		t.Fatalf("create deployment: %v\n%s", err, out)
	}
	if out, err := kube(t, oldConfig, "rollout", "status", "deployment/web", "--timeout=90s"); err != nil {
		t.Fatalf("deployment not ready: %v\n%s", err, out)
	}

	coeResizeAndNodeGroups(t, osc, oldConfig, nodes)
	coeCA(t, osc, oldConfig)

	// Quota: one cluster is the limit, a second is refused.
	osc.must("quotas", "create", "--project-id", devcluster.COEDevProject, "--resource", "Cluster", "--hard-limit", "1")
	if out, err := osc.run("cluster", "create", "c2", "--cluster-template", "kwok-test"); err == nil ||
		!strings.Contains(out, "Resource limit exceeded") || !strings.Contains(out, "(HTTP 403)") {
		t.Fatalf("create past the quota: %v\n%s", err, out)
	}

	// Delete leaves no process of the cluster behind.
	osc.must("cluster", "delete", "c1")
	deadline := time.Now().Add(2 * time.Minute)
	for {
		out, err := osc.run("cluster", "show", "c1")
		if err != nil && strings.Contains(out, "(HTTP 404)") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("cluster not gone: %s", out)
		}
		time.Sleep(time.Second)
	}
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		if b, err := os.ReadFile(p); err == nil && strings.Contains(string(b), uuid) {
			t.Errorf("a process of the deleted cluster runs: %s: %s", p, strings.ReplaceAll(string(b), "\x00", " "))
		}
	}
	checkNothingLeft(t, c, uuid)
	osc.must("cluster", "template", "delete", "kwok-test")
}

// coeResizeAndNodeGroups resizes the cluster up and down (naming the node
// to remove) and adds, scales and removes a node group.
func coeResizeAndNodeGroups(t *testing.T, osc *coeClient, kubeconfig string, nodes []string) {
	oldConfig := kubeconfig
	// Resize up, then down naming the node to remove.
	osc.must("cluster", "resize", "c1", "4")
	osc.waitCOEStatus("c1", "UPDATE_COMPLETE", 2*time.Minute)
	waitReadyNodes(t, oldConfig, 4, time.Minute)
	osc.must("cluster", "resize", "c1", "2", "--nodes-to-remove", nodes[0])
	osc.waitCOEStatus("c1", "UPDATE_COMPLETE", 2*time.Minute)
	if got := waitReadyNodes(t, oldConfig, 2, time.Minute); contains(got, nodes[0]) {
		t.Fatalf("resize kept %s, the node to remove: %v", nodes[0], got)
	}

	// Node groups.
	osc.must("nodegroup", "create", "c1", "ng1", "--node-count", "1", "--min-nodes", "1", "--max-nodes", "3")
	osc.waitCOEStatus("c1", "UPDATE_COMPLETE", 2*time.Minute)
	waitReadyNodes(t, oldConfig, 3, 2*time.Minute)
	osc.must("nodegroup", "update", "c1", "ng1", "replace", "node_count=2")
	waitReadyNodes(t, oldConfig, 4, 2*time.Minute)
	if out, err := osc.run("nodegroup", "delete", "c1", "default-worker"); err == nil {
		t.Fatalf("deleting the default worker group: %s", out)
	}
	osc.must("nodegroup", "delete", "c1", "ng1")
	waitReadyNodes(t, oldConfig, 2, 2*time.Minute)
}

// coeCA shows the CA, signs a CSR, rotates the CA: the old kubeconfig
// stops working and a new one works.
func coeCA(t *testing.T, osc *coeClient, oldConfig string) {
	// The CA: show, sign, rotate; the old kubeconfig stops working.
	if ca := osc.must("ca", "show", "c1"); !strings.Contains(ca, "BEGIN CERTIFICATE") {
		t.Fatalf("ca show: %s", ca)
	}
	csr := filepath.Join(t.TempDir(), "csr.pem")
	key := filepath.Join(filepath.Dir(csr), "key.pem")
	if out, err := exec.Command("openssl", "req", "-new", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", csr,
		"-subj", "/CN=admin/O=system:masters").CombinedOutput(); err != nil {
		t.Fatalf("openssl: %v\n%s", err, out)
	}
	if out := osc.must("ca", "sign", "c1", csr); !strings.Contains(out, "BEGIN CERTIFICATE") {
		t.Fatalf("ca sign: %s", out)
	}
	osc.must("ca", "rotate", "c1")
	osc.waitCOEStatus("c1", "UPDATE_COMPLETE", 3*time.Minute)
	if out, err := kube(t, oldConfig, "get", "nodes"); err == nil {
		t.Fatalf("the kubeconfig of the old CA still works:\n%s", out)
	}
	dir2 := t.TempDir()
	osc.must("cluster", "config", "c1", "--dir", dir2)
	waitReadyNodes(t, filepath.Join(dir2, "config"), 2, time.Minute)
}
