package e2e

import (
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/corral/corral/internal/devcluster"
)

// coeCLI runs `corral coe ...` against a dev cluster.
type coeCLI struct {
	t *testing.T
	c *cluster
}

func (x coeCLI) run(args ...string) (string, error) {
	return x.c.corral(append([]string{"coe"}, args...)...)
}

func (x coeCLI) must(args ...string) string {
	x.t.Helper()
	out, err := x.run(args...)
	if err != nil {
		x.t.Fatalf("corral coe %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

func (x coeCLI) json(v any, args ...string) {
	x.t.Helper()
	out := x.must(append(args, "-o", "json")...)
	if err := json.Unmarshal([]byte(out), v); err != nil {
		x.t.Fatalf("corral coe %s -o json: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// groupNodes are the Kubernetes nodes of a cluster's node group, from
// `cluster show -o json`.
func (x coeCLI) groupNodes(cluster, group string) []string {
	x.t.Helper()
	var doc struct {
		NodeGroups []struct {
			Name  string   `json:"name"`
			Nodes []string `json:"nodes"`
		} `json:"nodegroups"`
	}
	x.json(&doc, "cluster", "show", cluster)
	for _, g := range doc.NodeGroups {
		if g.Name == group {
			return g.Nodes
		}
	}
	return nil
}

// TestCOECLIEndToEnd walks `corral coe` through a dev cluster with
// templates of the in-process fake driver (cluster_distro "fake"), so it
// needs no Kubernetes binary: templates, a cluster created and followed
// to CREATE_COMPLETE, its conditions, a resize naming the node to remove,
// a node group's life, a quota refusing one cluster too many, the
// kubeconfig's certificates, and the deletes.
func TestCOECLIEndToEnd(t *testing.T) {
	c := newClusterWith(t, devcluster.Options{Nodes: 1, WatcherEvery: time.Hour})
	x := coeCLI{t: t, c: c}

	var tpl map[string]any
	x.json(&tpl, "template", "create", "ft", "--coe", "kubernetes", "--image", "none", "--cluster-distro", "fake",
		"--labels", "kube_tag=v1.31.0,workers=fake")
	if tpl["driver"] != "fake" || tpl["cluster_distro"] != "fake" || tpl["server_type"] != "vm" ||
		!reflect.DeepEqual(tpl["labels"], map[string]any{"kube_tag": "v1.31.0", "workers": "fake"}) {
		t.Fatalf("template create: %v", tpl)
	}
	// dev up adds kwok-small (k8s_process) where the Kubernetes tools are.
	tplList := x.must("template", "list", "--no-headers", "-o", "name,driver,public")
	var rows []string
	for _, line := range strings.Split(strings.TrimSpace(tplList), "\n") {
		if row := strings.Join(strings.Fields(line), " "); row != "kwok-small k8s_process Y" {
			rows = append(rows, row)
		}
	}
	if strings.Join(rows, "|") != "ft fake N" {
		t.Fatalf("template list: %q", tplList)
	}
	x.must("template", "update", "ft", "public=true", "labels=kube_tag=v1.31.1")
	x.json(&tpl, "template", "show", "ft")
	if tpl["public"] != true || !reflect.DeepEqual(tpl["labels"], map[string]any{"kube_tag": "v1.31.1"}) {
		t.Fatalf("template after update: %v", tpl)
	}
	if out, err := x.run("template", "create", "bad", "--coe", "kubernetes", "--image", "none", "--cluster-distro", "nothing-drives-this"); err == nil ||
		!strings.Contains(out, "Cluster type (vm, nothing-drives-this, kubernetes) not supported.") {
		t.Fatalf("a template no driver provides was made: %s", out)
	}

	created := time.Now()
	out := x.must("cluster", "create", "k1", "--template", "ft", "--node-count", "2", "--wait=120")
	t.Logf("corral coe cluster create --wait (%v):\n%s", time.Since(created).Round(time.Millisecond), out)
	for _, s := range []string{"k1: CREATE_IN_PROGRESS\n", "CertificatesReady True (Done) make the CA and certificates\n",
		"ControlPlaneReady True (Done) start the control plane\n", "Healthy True (Done)", "k1: CREATE_COMPLETE\n",
		"node group default-worker: CREATE_COMPLETE (2 nodes)\nk1: CREATE_COMPLETE\n"} {
		if !strings.Contains(out, s) {
			t.Fatalf("create --wait lacks %q:\n%s", s, out)
		}
	}
	show := x.must("cluster", "show", "k1")
	for _, s := range []string{"status              CREATE_COMPLETE", "health_status       HEALTHY", "node_count          2",
		"Conditions:\nType", "EtcdReady", "Node groups:\nName", "k1-default-worker-1,k1-default-worker-2"} {
		if !strings.Contains(show, s) {
			t.Fatalf("cluster show lacks %q:\n%s", s, show)
		}
	}
	if out := x.must("cluster", "list", "--no-headers", "-o", "name,node_count,master_count,status"); out != "k1 2 1 CREATE_COMPLETE\n" {
		t.Fatalf("cluster list: %q", out)
	}
	// A template in use stays.
	if out, err := x.run("template", "delete", "ft"); err == nil || !strings.Contains(out, "is referenced by one or multiple clusters.") {
		t.Fatalf("delete of a template in use: %v\n%s", err, out)
	}

	// Resize naming the node to remove.
	out = x.must("cluster", "resize", "k1", "1", "--nodes-to-remove", "k1-default-worker-1", "--wait=60")
	if !strings.Contains(out, "k1: UPDATE_COMPLETE\n") {
		t.Fatalf("resize --wait:\n%s", out)
	}
	if got := x.groupNodes("k1", "default-worker"); !reflect.DeepEqual(got, []string{"k1-default-worker-2"}) {
		t.Fatalf("workers after the resize: %v", got)
	}

	coeCLINodeGroup(t, x)
	coeCLIQuota(t, x)
	t.Run("config", func(t *testing.T) { coeCLIConfig(t, coeCLI{t: t, c: c}) })

	out = x.must("cluster", "delete", "k1", "q1", "--wait=60")
	if !strings.Contains(out, "k1: deleted\n") || !strings.Contains(out, "q1: deleted\n") {
		t.Fatalf("delete --wait:\n%s", out)
	}
	if out := x.must("cluster", "list", "--no-headers"); out != "" {
		t.Fatalf("clusters left: %q", out)
	}
	if out, err := x.run("cluster", "show", "k1"); err == nil || !strings.Contains(out, "k1") {
		t.Fatalf("show of a deleted cluster: %v\n%s", err, out)
	}
	x.must("template", "delete", "ft")
	if out := x.must("template", "list", "--no-headers", "-o", "name"); strings.TrimSpace(strings.ReplaceAll(out, "kwok-small", "")) != "" {
		t.Fatalf("templates left: %q", out)
	}
}

// coeCLINodeGroup adds a node group, resizes it and removes it.
func coeCLINodeGroup(t *testing.T, x coeCLI) {
	out := x.must("nodegroup", "create", "k1", "extra", "--node-count", "2", "--max-nodes", "3", "--wait=60")
	if !strings.Contains(out, "node group extra: CREATE_COMPLETE (2 nodes)") && !strings.Contains(out, "node group extra: UPDATE_COMPLETE (2 nodes)") {
		t.Fatalf("nodegroup create --wait:\n%s", out)
	}
	if got := x.groupNodes("k1", "extra"); len(got) != 2 {
		t.Fatalf("extra's nodes: %v", got)
	}
	list := x.must("nodegroup", "list", "k1", "--no-headers", "-o", "name,role,node_count,max_node_count")
	if list != "default-master master 1 -\ndefault-worker worker 1 -\nextra          worker 2 3\n" {
		t.Fatalf("nodegroup list: %q", list)
	}
	x.must("nodegroup", "update", "k1", "extra", "node_count=1", "--wait=60")
	var g map[string]any
	x.json(&g, "nodegroup", "show", "k1", "extra")
	if g["node_count"] != 1.0 || len(g["nodes"].([]any)) != 1 || g["status"] != "UPDATE_COMPLETE" {
		t.Fatalf("extra after update: %v", g)
	}
	if out, err := x.run("nodegroup", "update", "k1", "extra", "node_count=5"); err == nil || !strings.Contains(out, "max_node_count 3") {
		t.Fatalf("update past max: %v\n%s", err, out)
	}
	if out, err := x.run("nodegroup", "delete", "k1", "default-worker"); err == nil {
		t.Fatalf("a default group was deleted: %s", out)
	}
	x.must("nodegroup", "delete", "k1", "extra", "--wait=60")
	if list := x.must("nodegroup", "list", "k1", "--no-headers", "-o", "name"); list != "default-master\ndefault-worker\n" {
		t.Fatalf("nodegroup list after delete: %q", list)
	}
}

// coeCLIQuota sets a project's quota to one cluster: the first is made,
// the second refused with Magnum's message.
func coeCLIQuota(t *testing.T, x coeCLI) {
	var q map[string]any
	x.json(&q, "quota", "show", "--project-id", "p1")
	if q["hard_limit"] != 20.0 {
		t.Fatalf("default quota: %v", q)
	}
	x.must("quota", "set", "--project-id", "p1", "--hard-limit", "1")
	x.json(&q, "quota", "show", "--project-id", "p1")
	if q["hard_limit"] != 1.0 || q["resource"] != "Cluster" {
		t.Fatalf("quota: %v", q)
	}
	if out := x.must("quota", "list", "--no-headers"); out != "p1 Cluster 1\n" {
		t.Fatalf("quota list: %q", out)
	}
	x.must("cluster", "create", "q1", "--template", "ft", "--project", "p1", "--wait=120")
	out, err := x.run("cluster", "create", "q2", "--template", "ft", "--project", "p1")
	if err == nil || !strings.Contains(out, "Resource limit exceeded: You have reached the maximum clusters per project, 1.") {
		t.Fatalf("create past the quota: %v\n%s", err, out)
	}
	if out := x.must("cluster", "list", "--project", "p1", "--no-headers", "-o", "name"); out != "q1\n" {
		t.Fatalf("p1's clusters: %q", out)
	}
	x.must("quota", "delete", "--project-id", "p1")
	x.json(&q, "quota", "show", "--project-id", "p1")
	if q["hard_limit"] != 20.0 {
		t.Fatalf("quota after delete: %v", q)
	}
}

// coeCLIConfig checks the kubeconfig's certificates: the cluster's CA,
// and a client certificate for CN admin signed by it. It needs a corrald
// that signs with cluster CAs and a driver that makes real ones.
func coeCLIConfig(t *testing.T, x coeCLI) {
	ca, err := x.run("ca", "show", "k1")
	if err != nil {
		t.Fatalf("ca show: %v\n%s", err, ca)
	}
	caBlock, _ := pem.Decode([]byte(ca))
	if caBlock == nil {
		t.Skipf("the fake driver's CA is not a certificate here (%q): no kubeconfig to check", strings.TrimSpace(ca))
	}
	caCert, err := x509.ParseCertificate(caBlock.Bytes)
	if err != nil {
		t.Fatalf("ca show: %v", err)
	}
	dir := t.TempDir()
	out, err := x.run("cluster", "config", "k1", "--dir", dir)
	if err != nil && strings.Contains(out, "no COE certificate signer is configured") {
		t.Skipf("this corrald cannot sign with cluster CAs: %s", strings.TrimSpace(out))
	}
	file := filepath.Join(dir, "config")
	if err != nil || out != "export KUBECONFIG="+file+"\n" {
		t.Fatalf("cluster config: %v\n%s", err, out)
	}
	fi, err := os.Stat(file)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("kubeconfig mode: %v %v", fi, err)
	}
	b, _ := os.ReadFile(file)
	data := map[string][]byte{}
	for _, l := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(l), ": ")
		if ok && strings.HasSuffix(k, "-data") {
			if data[k], err = base64.StdEncoding.DecodeString(v); err != nil {
				t.Fatalf("%s: %v", k, err)
			}
		}
	}
	if strings.TrimSpace(string(data["certificate-authority-data"])) != strings.TrimSpace(ca) {
		t.Fatalf("the kubeconfig's CA is not the cluster's:\n%s", b)
	}
	cb, _ := pem.Decode(data["client-certificate-data"])
	if cb == nil {
		t.Fatalf("no client certificate:\n%s", b)
	}
	crt, err := x509.ParseCertificate(cb.Bytes)
	if err != nil || crt.Subject.CommonName != "admin" || crt.CheckSignatureFrom(caCert) != nil {
		t.Fatalf("client certificate: %v %v", err, crt.Subject)
	}
}
