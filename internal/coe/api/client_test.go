package api

import (
	"context"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

const openstackCLI = "/usr/bin/openstack"

// realClient runs the unchanged `openstack coe` command against srv, as
// an operator would, with its cache and config in a temporary home.
type realClient struct {
	t    *testing.T
	srv  *httptest.Server
	ca   string
	home string
}

func newRealClient(t *testing.T, h *Handler) *realClient {
	t.Helper()
	if _, err := os.Stat(openstackCLI); err != nil {
		if os.Getenv("CORRAL_REQUIRE_BAREMETAL") == "1" {
			t.Fatalf("%s is missing and CORRAL_REQUIRE_BAREMETAL=1", openstackCLI)
		}
		t.Skipf("%s is not installed (python3-openstackclient, python3-magnumclient)", openstackCLI)
	}
	if err := exec.Command("/usr/bin/python3", "-c", "import magnumclient").Run(); err != nil {
		if os.Getenv("CORRAL_REQUIRE_BAREMETAL") == "1" {
			t.Fatalf("python3-magnumclient is missing and CORRAL_REQUIRE_BAREMETAL=1")
		}
		t.Skip("python3-magnumclient is not installed")
	}
	srv := httptest.NewTLSServer(h)
	t.Cleanup(srv.Close)
	dir := t.TempDir()
	ca := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	return &realClient{t: t, srv: srv, ca: ca, home: dir}
}

func (c *realClient) run(args ...string) (string, error) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	full := append([]string{"--os-auth-type", "none", "--os-endpoint", c.srv.URL + "/v1", "--os-cacert", c.ca}, args...)
	cmd := exec.CommandContext(ctx, openstackCLI, full...)
	cmd.Dir = c.home
	cmd.Env = []string{"HOME=" + c.home, "XDG_CACHE_HOME=" + filepath.Join(c.home, "cache"),
		"XDG_CONFIG_HOME=" + filepath.Join(c.home, "config"), "PATH=/usr/bin:/bin", "LANG=C.UTF-8",
		"SHELL=/bin/sh", "REQUESTS_CA_BUNDLE=" + c.ca}
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func (c *realClient) mustRun(args ...string) string {
	c.t.Helper()
	out, err := c.run(args...)
	if err != nil {
		c.t.Fatalf("openstack %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

func (c *realClient) jsonOut(v any, args ...string) {
	c.t.Helper()
	out := c.mustRun(append(args, "-f", "json")...)
	// Some commands print a line of their own before the object.
	if i := strings.IndexAny(out, "{["); i > 0 {
		out = out[i:]
	}
	if err := json.Unmarshal([]byte(out), v); err != nil {
		c.t.Fatalf("openstack %s: not JSON: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// TestRealOpenstackCOEClient drives the API with the openstack client of
// the distribution through every command an operator uses, checking what
// it prints, so any shape the client does not accept fails here.
func TestRealOpenstackCOEClient(t *testing.T) {
	be := newFakeBackend()
	c := newRealClient(t, NewHandler(Config{Backend: be, Auth: NoAuth{As: Caller{User: "admin", Project: "p1", Admin: true}}}))
	testTemplateCommands(t, c)
	uuid := testClusterCommands(t, c, be)
	testNodeGroupCommands(t, c)
	testCACommands(t, c, be, uuid)
	testQuotaCommands(t, c)

	st := tableProps(c.mustRun("coe", "stats", "list", "p1"))
	if st["clusters"] != "1" || st["nodes"] != "4" {
		t.Fatalf("stats: %v", st)
	}
	var svcs []map[string]any
	c.jsonOut(&svcs, "coe", "service", "list")
	if len(svcs) != 2 || svcs[0]["binary"] != "magnum-conductor" || svcs[1]["binary"] != "magnum-api" || svcs[0]["state"] != "up" {
		t.Fatalf("service list: %v", svcs)
	}
	c.mustRun("coe", "cluster", "delete", "c1")
	if out, err := c.run("coe", "cluster", "show", "c1"); err == nil || !strings.Contains(out, "Cluster c1 could not be found. (HTTP 404)") {
		t.Fatalf("show after delete: %v\n%s", err, out)
	}
	c.mustRun("coe", "cluster", "template", "delete", "k8s", "k8s-2")
	var tl []map[string]any
	c.jsonOut(&tl, "coe", "cluster", "template", "list")
	if len(tl) != 0 {
		t.Fatalf("templates left: %v", tl)
	}
}

func testTemplateCommands(t *testing.T, c *realClient) {
	var tpl map[string]any
	c.jsonOut(&tpl, "coe", "cluster", "template", "create", "k8s", "--coe", "kubernetes", "--image", "fedora",
		"--external-network", "public", "--labels", "kube_tag=v1.31.0", "--server-type", "vm")
	if tpl["name"] != "k8s" || tpl["coe"] != "kubernetes" || tpl["uuid"] == nil || tpl["image_id"] != "fedora" {
		t.Fatalf("template create: %v", tpl)
	}
	c.mustRun("coe", "cluster", "template", "create", "k8s-2", "--coe", "kubernetes", "--image", "fedora2", "--external-network", "public")
	var tl []map[string]any
	c.jsonOut(&tl, "coe", "cluster", "template", "list")
	if len(tl) != 2 || tl[0]["name"] == nil || tl[0]["uuid"] == nil {
		t.Fatalf("template list: %v", tl)
	}
	c.jsonOut(&tpl, "coe", "cluster", "template", "show", "k8s")
	if tpl["labels"].(map[string]any)["kube_tag"] != "v1.31.0" || tpl["dns_nameserver"] != "8.8.8.8" || tpl["flavor_id"] != "m1.medium" {
		t.Fatalf("template show: %v", tpl)
	}
	c.jsonOut(&tpl, "coe", "cluster", "template", "update", "k8s", "replace", "master_lb_enabled=true", "docker_volume_size=10")
	if tpl["master_lb_enabled"] != true || tpl["docker_volume_size"] != float64(10) {
		t.Fatalf("template update: %v", tpl)
	}
}

func testClusterCommands(t *testing.T, c *realClient, be *fakeBackend) string {
	out := c.mustRun("coe", "cluster", "create", "c1", "--cluster-template", "k8s", "--node-count", "2", "--master-count", "1", "--keypair", "kp")
	uuid := be.onlyCluster()
	if !strings.Contains(out, uuid) || uuid == "" {
		t.Fatalf("cluster create printed %q, want the uuid %s", out, uuid)
	}
	var cl []map[string]any
	c.jsonOut(&cl, "coe", "cluster", "list")
	if len(cl) != 1 || cl[0]["uuid"] != uuid || cl[0]["name"] != "c1" || cl[0]["keypair"] != "kp" || cl[0]["node_count"] != float64(2) ||
		cl[0]["master_count"] != float64(1) || cl[0]["status"] != "CREATE_COMPLETE" || cl[0]["health_status"] != "HEALTHY" {
		t.Fatalf("cluster list: %v", cl)
	}
	var show map[string]any
	c.jsonOut(&show, "coe", "cluster", "show", "c1")
	if show["uuid"] != uuid || show["api_address"] != "https://127.0.0.1:6443" || show["coe_version"] != "v1.31.0" {
		t.Fatalf("cluster show: %v", show)
	}
	out = c.mustRun("coe", "cluster", "update", "c1", "replace", "node_count=4")
	if !strings.Contains(out, "Request to update cluster c1 has been accepted.") {
		t.Fatalf("cluster update: %s", out)
	}
	c.jsonOut(&show, "coe", "cluster", "show", "c1")
	if show["node_count"] != float64(4) {
		t.Fatalf("after update: %v", show)
	}
	out = c.mustRun("coe", "cluster", "resize", "c1", "3", "--nodes-to-remove", "node-a")
	if !strings.Contains(out, "Request to resize cluster c1 has been accepted.") ||
		!strings.Contains(be.lastCall(), `"NodesToRemove":["node-a"]`) {
		t.Fatalf("cluster resize: %s (backend got %s)", out, be.lastCall())
	}
	out = c.mustRun("coe", "cluster", "upgrade", "c1", "k8s-2", "--max-batch-size", "2")
	if !strings.Contains(out, "Request to upgrade cluster c1 has been accepted.") ||
		!strings.Contains(be.lastCall(), `"Template":"k8s-2","MaxBatchSize":2`) {
		t.Fatalf("cluster upgrade: %s (backend got %s)", out, be.lastCall())
	}
	if out, err := c.run("coe", "cluster", "create", "c2", "--cluster-template", "nope"); err == nil ||
		!strings.Contains(out, "ClusterTemplate nope could not be found. (HTTP 400)") {
		t.Fatalf("create with an unknown template: %v\n%s", err, out)
	}
	return uuid
}

func testNodeGroupCommands(t *testing.T, c *realClient) {
	var ng map[string]any
	c.mustRun("coe", "nodegroup", "create", "c1", "ng1", "--node-count", "2", "--flavor", "f1",
		"--min-nodes", "1", "--max-nodes", "5", "--role", "worker", "--labels", "a=b")
	var ngs []map[string]any
	c.jsonOut(&ngs, "coe", "nodegroup", "list", "c1")
	if len(ngs) != 3 {
		t.Fatalf("nodegroup list: %v", ngs)
	}
	c.jsonOut(&ngs, "coe", "nodegroup", "list", "c1", "--role", "master")
	if len(ngs) != 1 || ngs[0]["name"] != "default-master" || ngs[0]["node_count"] != float64(1) {
		t.Fatalf("nodegroup list --role master: %v", ngs)
	}
	c.jsonOut(&ng, "coe", "nodegroup", "show", "c1", "ng1")
	if ng["name"] != "ng1" || ng["flavor_id"] != "f1" || ng["max_node_count"] != float64(5) || ng["min_node_count"] != float64(1) {
		t.Fatalf("nodegroup show: %v", ng)
	}
	c.mustRun("coe", "nodegroup", "update", "c1", "ng1", "replace", "max_node_count=6", "min_node_count=2")
	c.jsonOut(&ng, "coe", "nodegroup", "show", "c1", "ng1")
	if ng["max_node_count"] != float64(6) || ng["min_node_count"] != float64(2) {
		t.Fatalf("nodegroup after update: %v", ng)
	}
	if out, err := c.run("coe", "nodegroup", "delete", "c1", "default-worker"); err == nil || !strings.Contains(out, "default nodegroup") {
		// The client reports a failed delete and goes on; its exit
		// status says so.
		t.Fatalf("deleting a default group: %v\n%s", err, out)
	}
	c.mustRun("coe", "nodegroup", "delete", "c1", "ng1")
	c.jsonOut(&ngs, "coe", "nodegroup", "list", "c1")
	if len(ngs) != 2 {
		t.Fatalf("nodegroup list after delete: %v", ngs)
	}
}

func testCACommands(t *testing.T, c *realClient, be *fakeBackend, uuid string) {
	ca := c.mustRun("coe", "ca", "show", "c1")
	if !strings.Contains(ca, be.ca(uuid).pem) {
		t.Fatalf("ca show printed %q", ca)
	}
	csrFile := filepath.Join(c.home, "csr.pem")
	if err := os.WriteFile(csrFile, []byte(testCSR(t)), 0o600); err != nil {
		t.Fatal(err)
	}
	signed := c.mustRun("coe", "ca", "sign", "c1", csrFile)
	blk, _ := pem.Decode([]byte(signed))
	if blk == nil {
		t.Fatalf("ca sign printed %q", signed)
	}
	cert, err := x509.ParseCertificate(blk.Bytes)
	if err != nil || cert.CheckSignatureFrom(be.ca(uuid).cert) != nil || cert.Subject.CommonName != "admin" {
		t.Fatalf("ca sign: certificate not signed by the cluster CA: %v", err)
	}

	dir := filepath.Join(c.home, "kube")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	out := c.mustRun("coe", "cluster", "config", "c1", "--dir", dir)
	if !strings.Contains(out, "export KUBECONFIG="+filepath.Join(dir, "config")) {
		t.Fatalf("cluster config printed %q", out)
	}
	checkKubeconfig(t, filepath.Join(dir, "config"), be.ca(uuid))

	c.mustRun("coe", "ca", "rotate", "c1")
	if be.rotationsOf(uuid) != 1 {
		t.Fatalf("ca rotate: %d rotations", be.rotationsOf(uuid))
	}
	if ca2 := c.mustRun("coe", "ca", "show", "c1"); ca2 == ca {
		t.Fatal("ca show: same CA after a rotation")
	}
}

// checkKubeconfig checks the kubeconfig the client wrote: the cluster's
// API address and CA, and a client certificate the CA signed for admin.
func checkKubeconfig(t *testing.T, path string, ca *fakeCA) {
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	// The client writes a fixed layout: one "key: value" a line.
	kc := map[string][]string{}
	for _, line := range strings.Split(string(raw), "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), ": ")
		if ok {
			kc[k] = append(kc[k], strings.Trim(v, `"'`))
		}
	}
	for _, k := range []string{"server", "certificate-authority-data", "client-certificate-data", "client-key-data"} {
		if len(kc[k]) != 1 {
			t.Fatalf("kubeconfig: want one %s:\n%s", k, raw)
		}
	}
	if kc["server"][0] != "https://127.0.0.1:6443" {
		t.Fatalf("kubeconfig server %q", kc["server"][0])
	}
	caPEM, _ := base64.StdEncoding.DecodeString(kc["certificate-authority-data"][0])
	if string(caPEM) != ca.pem {
		t.Fatalf("kubeconfig CA differs from the cluster's")
	}
	certPEM, _ := base64.StdEncoding.DecodeString(kc["client-certificate-data"][0])
	blk, _ := pem.Decode(certPEM)
	if blk == nil {
		t.Fatalf("kubeconfig has no client certificate and key:\n%s", raw)
	}
	cert, err := x509.ParseCertificate(blk.Bytes)
	if err != nil || cert.CheckSignatureFrom(ca.cert) != nil || cert.Subject.CommonName != "admin" ||
		len(cert.Subject.Organization) != 1 || cert.Subject.Organization[0] != "system:masters" {
		t.Fatalf("kubeconfig client certificate: %v %+v", err, cert.Subject)
	}
}

// tableRows reads the client's table output (for the commands that have
// no -f json): one map per row, by column heading.
func tableRows(out string) []map[string]string {
	var heads []string
	var rows []map[string]string
	for _, line := range strings.Split(out, "\n") {
		if !strings.HasPrefix(line, "|") {
			continue
		}
		var cells []string
		for _, c := range strings.Split(strings.Trim(line, "|"), "|") {
			cells = append(cells, strings.TrimSpace(c))
		}
		if heads == nil {
			heads = cells
			continue
		}
		row := map[string]string{}
		for i, h := range heads {
			if i < len(cells) {
				row[h] = cells[i]
			}
		}
		rows = append(rows, row)
	}
	return rows
}

// tableProps reads a Property/Value table.
func tableProps(out string) map[string]string {
	props := map[string]string{}
	for _, r := range tableRows(out) {
		props[r["Property"]] = r["Value"]
	}
	return props
}

func testQuotaCommands(t *testing.T, c *realClient) {
	q := tableProps(c.mustRun("coe", "quotas", "show", "--project-id", "p2", "--resource", "Cluster"))
	if q["hard_limit"] != "20" || q["project_id"] != "p2" || q["resource"] != "Cluster" {
		t.Fatalf("quotas show default: %v", q)
	}
	q = tableProps(c.mustRun("coe", "quotas", "create", "--project-id", "p2", "--resource", "Cluster", "--hard-limit", "10"))
	if q["hard_limit"] != "10" || q["project_id"] != "p2" || q["id"] == "" || q["created_at"] == "" {
		t.Fatalf("quotas create: %v", q)
	}
	ql := tableRows(c.mustRun("coe", "quotas", "list", "--all-tenants"))
	if len(ql) != 1 || ql[0]["project_id"] != "p2" || ql[0]["hard_limit"] != "10" || ql[0]["resource"] != "Cluster" {
		t.Fatalf("quotas list: %v", ql)
	}
	q = tableProps(c.mustRun("coe", "quotas", "update", "--project-id", "p2", "--resource", "Cluster", "--hard-limit", "0"))
	if q["hard_limit"] != "0" || q["updated_at"] == "" {
		t.Fatalf("quotas update: %v", q)
	}
	out := c.mustRun("coe", "quotas", "delete", "--project-id", "p2", "--resource", "Cluster")
	if !strings.Contains(out, "Request to delete quota for project id p2 and resource Cluster has been accepted.") {
		t.Fatalf("quotas delete: %s", out)
	}
	if ql := tableRows(c.mustRun("coe", "quotas", "list", "--all-tenants")); len(ql) != 0 {
		t.Fatalf("quotas list after delete: %v", ql)
	}
	// Past the hard limit the client shows the 403.
	c.mustRun("coe", "quotas", "create", "--project-id", "p1", "--resource", "Cluster", "--hard-limit", "1")
	out, err := c.run("coe", "cluster", "create", "c3", "--cluster-template", "k8s")
	if err == nil || !strings.Contains(out, "Resource limit exceeded: You have reached the maximum clusters per project, 1.") || !strings.Contains(out, "(HTTP 403)") {
		t.Fatalf("create past the quota: %v\n%s", err, out)
	}
	c.mustRun("coe", "quotas", "delete", "--project-id", "p1", "--resource", "Cluster")
}
