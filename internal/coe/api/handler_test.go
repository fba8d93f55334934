package api

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/corral/corral/internal/apifront"
	"github.com/corral/corral/internal/config"
	"github.com/corral/corral/internal/ecode"
)

// testAuth takes the caller from test headers: X-Test-User (none: no
// credentials, 401), X-Test-Project, X-Test-Admin.
type testAuth struct{}

func (testAuth) Authenticate(r *http.Request) (Caller, bool) {
	u := r.Header.Get("X-Test-User")
	if u == "" {
		return Caller{}, false
	}
	return Caller{User: u, Project: r.Header.Get("X-Test-Project"), Admin: r.Header.Get("X-Test-Admin") == "1"}, true
}

func (testAuth) Challenge() string { return `Basic realm="test"` }

type apiTest struct {
	t  *testing.T
	h  *Handler
	be *fakeBackend
	// hdr is sent with every request: by default an administrator of
	// project p1 asking for the latest version.
	hdr map[string]string
}

func newAPITest(t *testing.T) *apiTest {
	be := newFakeBackend()
	return &apiTest{t: t, be: be, h: NewHandler(Config{Backend: be, Auth: testAuth{}}), hdr: map[string]string{
		"X-Test-User": "alice", "X-Test-Project": "p1", "X-Test-Admin": "1",
		versionHeader: "container-infra latest"}}
}

type reply struct {
	code int
	hdr  http.Header
	body map[string]any
	raw  string
}

func (a *apiTest) do(method, path, body string, extra ...string) reply {
	a.t.Helper()
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	for k, v := range a.hdr {
		req.Header.Set(k, v)
	}
	for i := 0; i+1 < len(extra); i += 2 {
		if extra[i+1] == "" {
			req.Header.Del(extra[i])
		} else {
			req.Header.Set(extra[i], extra[i+1])
		}
	}
	w := httptest.NewRecorder()
	a.h.ServeHTTP(w, req)
	rp := reply{code: w.Code, hdr: w.Header(), raw: w.Body.String()}
	if rp.raw != "" {
		if err := json.Unmarshal(w.Body.Bytes(), &rp.body); err != nil {
			a.t.Fatalf("%s %s: body is not a JSON object: %v: %s", method, path, err, rp.raw)
		}
	}
	return rp
}

// want checks the status, showing the reply when it differs.
func (a *apiTest) want(r reply, code int) reply {
	a.t.Helper()
	if r.code != code {
		a.t.Fatalf("status %d, want %d: %s", r.code, code, r.raw)
	}
	return r
}

// wantError checks Magnum's error body: one error with the status and a
// title containing title.
func (a *apiTest) wantError(r reply, code int, title string) {
	a.t.Helper()
	a.want(r, code)
	errs, _ := r.body["errors"].([]any)
	if len(errs) != 1 {
		a.t.Fatalf("error body %s: want one error", r.raw)
	}
	e := errs[0].(map[string]any)
	wantCode := "client"
	if code >= 500 {
		wantCode = "server"
	}
	if e["code"] != wantCode || e["status"] != float64(code) || e["detail"] == nil || e["links"] == nil || e["request_id"] == nil {
		a.t.Fatalf("error body %s: want Magnum's members", r.raw)
	}
	if !strings.Contains(e["title"].(string), title) {
		a.t.Fatalf("error title %q, want it to contain %q", e["title"], title)
	}
}

const templateBody = `{"name": "k8s", "image_id": "fedora", "keypair_id": null, "external_network_id": "public",
 "coe": "kubernetes", "fixed_network": null, "fixed_subnet": null, "network_driver": null, "volume_driver": null,
 "dns_nameserver": "8.8.8.8", "flavor_id": "m1.medium", "master_flavor_id": null, "docker_volume_size": null,
 "docker_storage_driver": "overlay2", "http_proxy": null, "https_proxy": null, "no_proxy": null,
 "labels": {"kube_tag": "v1.31.0"}, "tls_disabled": false, "public": false, "registry_enabled": false,
 "server_type": "vm", "master_lb_enabled": false, "floating_ip_enabled": true, "hidden": false, "tags": null}`

func (a *apiTest) template() string {
	a.t.Helper()
	r := a.want(a.do("POST", "/v1/clustertemplates", templateBody), http.StatusCreated)
	return r.body["uuid"].(string)
}

func (a *apiTest) cluster(name string) string {
	a.t.Helper()
	r := a.want(a.do("POST", "/v1/clusters", `{"cluster_template_id": "k8s", "create_timeout": 60, "discovery_url": null,
		"keypair": "k", "master_count": 1, "name": "`+name+`", "node_count": 2}`), http.StatusAccepted)
	if len(r.body) != 1 || r.body["uuid"] == "" {
		a.t.Fatalf("create reply %s: want only the uuid", r.raw)
	}
	return r.body["uuid"].(string)
}

func TestDiscovery(t *testing.T) {
	a := newAPITest(t)
	a.hdr = map[string]string{} // discovery needs no credentials
	r := a.want(a.do("GET", "/", ""), 200)
	v := r.body["versions"].([]any)[0].(map[string]any)
	if r.body["name"] != "OpenStack Magnum API" || v["max_version"] != "1.11" || v["min_version"] != "1.1" || v["id"] != "v1" {
		t.Fatalf("root: %s", r.raw)
	}
	r = a.want(a.do("GET", "/v1", ""), 200)
	mt := r.body["media_types"].([]any)[0].(map[string]any)
	if mt["type"] != "application/vnd.openstack.magnum.v1+json" || r.body["clusters"] == nil || r.body["clustertemplates"] == nil ||
		r.body["certificates"] == nil || r.body["mservices"] == nil || r.body["quotas"] == nil || r.body["stats"] == nil {
		t.Fatalf("v1: %s", r.raw)
	}
	if got := r.hdr.Get(versionHeader); got != "container-infrastructure-management 1.1" {
		t.Fatalf("no version asked: served %q, want 1.1", got)
	}
}

func TestVersionHeaders(t *testing.T) {
	a := newAPITest(t)
	for _, c := range []struct{ asked, served string }{
		{"container-infra latest", "1.11"}, {"container-infrastructure 1.9", "1.9"},
		{"container-infrastructure-management 1.1", "1.1"}, {"", "1.1"},
	} {
		r := a.want(a.do("GET", "/v1/clusters", "", versionHeader, c.asked), 200)
		if r.hdr.Get(versionHeader) != "container-infrastructure-management "+c.served ||
			r.hdr.Get(minVersionHeader) != "container-infrastructure-management 1.1" ||
			r.hdr.Get(maxVersionHeader) != "container-infrastructure-management 1.11" || r.hdr.Get("Vary") != versionHeader {
			t.Fatalf("asked %q: headers %v", c.asked, r.hdr)
		}
	}
	for _, c := range []struct{ asked, title string }{
		{"container-infra 1.12", "The supported version range is: [container-infrastructure-management 1.1, container-infrastructure-management 1.11]"},
		{"container-infra 2.1", "minor version is not supported"},
		{"container-infra 1.0", "minor version is not supported"},
		{"compute 1.5", "Invalid service type"},
		{"container-infra", "Invalid service type"},
		{"container-infra 1", "Invalid value"},
		{"container-infra one.two", "Invalid value"},
	} {
		r := a.do("GET", "/v1/clusters", "", versionHeader, c.asked)
		a.wantError(r, http.StatusNotAcceptable, c.title)
	}
}

func TestVersionGates(t *testing.T) {
	a := newAPITest(t)
	a.template()
	c := a.cluster("c1")
	for _, g := range []struct {
		method, path, body string
		minor              string
	}{
		{"GET", "/v1/stats", "", "1.4"},
		{"PATCH", "/v1/certificates/" + c, "", "1.5"},
		{"GET", "/v1/quotas", "", "1.6"},
		{"POST", "/v1/clusters/" + c + "/actions/resize", `{"node_count": 3}`, "1.7"},
		{"POST", "/v1/clusters/" + c + "/actions/upgrade", `{"cluster_template": "k8s", "max_batch_size": 1}`, "1.7"},
		{"GET", "/v1/clusters/" + c + "/nodegroups/", "", "1.9"},
		{"POST", "/v1/clusters/" + c + "/nodegroups/", `{"name": "ng"}`, "1.9"},
	} {
		below := "1." + string(rune(g.minor[2]-1))
		a.wantError(a.do(g.method, g.path, g.body, versionHeader, "container-infra "+below), http.StatusNotAcceptable, "is not supported for this version")
		r := a.do(g.method, g.path, g.body, versionHeader, "container-infra "+g.minor)
		if r.code >= 400 {
			t.Fatalf("%s %s at %s: %s", g.method, g.path, g.minor, r.raw)
		}
	}
	// 1.10 allows clusters and groups without workers.
	a.wantError(a.do("POST", "/v1/clusters", `{"cluster_template_id": "k8s", "name": "z", "node_count": 0}`,
		versionHeader, "container-infra 1.9"), 400, "greater or equal to 1")
	a.want(a.do("POST", "/v1/clusters", `{"cluster_template_id": "k8s", "name": "z", "node_count": 0}`,
		versionHeader, "container-infra 1.10"), 202)
}

func TestAuthentication(t *testing.T) {
	a := newAPITest(t)
	r := a.want(a.do("GET", "/v1/clusters", "", "X-Test-User", ""), http.StatusUnauthorized)
	if r.hdr.Get("WWW-Authenticate") != `Basic realm="test"` || r.body["error"] == nil {
		t.Fatalf("401: %v %s", r.hdr, r.raw)
	}
	a.want(a.do("GET", "/", "", "X-Test-User", ""), 200)
}

func TestTemplates(t *testing.T) {
	a := newAPITest(t)
	r := a.want(a.do("POST", "/v1/clustertemplates", templateBody), http.StatusCreated)
	uuid := r.body["uuid"].(string)
	if r.body["name"] != "k8s" || r.body["coe"] != "kubernetes" || r.body["project_id"] != "p1" || r.hdr.Get("Location") == "" {
		t.Fatalf("create: %s", r.raw)
	}
	for _, k := range []string{"keypair_id", "fixed_network", "master_flavor_id", "docker_volume_size", "driver", "serial_no", "ctime"} {
		if _, ok := r.body[k]; ok {
			t.Fatalf("unset or internal field %s shown: %s", k, r.raw)
		}
	}
	if !strings.Contains(a.be.calls[0], `"server_type":"vm"`) || strings.Contains(a.be.calls[0], "keypair_id") {
		t.Fatalf("backend got %s: want nulls dropped and the server type", a.be.calls[0])
	}
	a.wantError(a.do("POST", "/v1/clustertemplates", `{"name": "x", "coe": "kubernetes"}`), 400, "image_id. Value: None. Mandatory field missing.")
	a.wantError(a.do("POST", "/v1/clustertemplates", `{"name": "x", "coe": "nomad", "image_id": "i"}`), 400, "Value should be one of")
	a.wantError(a.do("POST", "/v1/clustertemplates", `{"name": "x", "coe": "kubernetes", "image_id": "i", "bogus": 1}`), 400, "Unknown attribute for argument body: bogus")
	a.wantError(a.do("POST", "/v1/clustertemplates", `{"name": "x", "coe": "kubernetes", "image_id": "i", "public": "yes"}`), 400, "public. Value: \"yes\". Wrong type.")
	a.wantError(a.do("POST", "/v1/clustertemplates", `[1]`), 400, "must be a JSON object")

	r = a.want(a.do("GET", "/v1/clustertemplates", ""), 200)
	if l := r.body["clustertemplates"].([]any); len(l) != 1 || l[0].(map[string]any)["uuid"] != uuid {
		t.Fatalf("list: %s", r.raw)
	}
	a.want(a.do("GET", "/v1/clustertemplates/k8s", ""), 200)
	a.want(a.do("GET", "/v1/clustertemplates/"+uuid, ""), 200)
	a.wantError(a.do("GET", "/v1/clustertemplates/nope", ""), 404, "ClusterTemplate nope could not be found.")

	r = a.want(a.do("PATCH", "/v1/clustertemplates/k8s", `[{"op": "replace", "path": "/master_lb_enabled", "value": true},
		{"op": "add", "path": "/labels/foo", "value": "bar"}, {"op": "replace", "path": "/keypair_id", "value": "kp"}]`), 200)
	if r.body["master_lb_enabled"] != true || r.body["keypair_id"] != "kp" || r.body["labels"].(map[string]any)["foo"] != "bar" {
		t.Fatalf("patch: %s", r.raw)
	}
	last := a.be.calls[len(a.be.calls)-1]
	if !strings.Contains(last, `"master_lb_enabled":true`) || !strings.Contains(last, `"labels":{"foo":"bar","kube_tag":"v1.31.0"}`) || strings.Contains(last, "image_id") {
		t.Fatalf("backend got %s: want only the changed fields", last)
	}
	a.wantError(a.do("PATCH", "/v1/clustertemplates/k8s", `[{"op": "replace", "path": "/uuid", "value": "x"}]`), 400, "Cannot update attribute uuid")
	a.wantError(a.do("PATCH", "/v1/clustertemplates/k8s", `[{"op": "replace", "path": "/docker_volume_size", "value": "big"}]`), 400, "docker_volume_size")
	a.wantError(a.do("PATCH", "/v1/clustertemplates/k8s", `{"op": "replace"}`), 400, "Invalid JSON patch")
	a.wantError(a.do("PATCH", "/v1/clustertemplates/k8s", `[{"op": "remove", "path": "/labels/none"}]`), 400, "does not exist")

	a.cluster("c1")
	a.wantError(a.do("DELETE", "/v1/clustertemplates/k8s", ""), 400, "is referenced by one or multiple clusters")
	a.want(a.do("DELETE", "/v1/clusters/c1", ""), 204)
	a.want(a.do("DELETE", "/v1/clustertemplates/k8s", ""), 204)
	a.wantError(a.do("DELETE", "/v1/clustertemplates/k8s", ""), 404, "could not be found")
}

func TestClusters(t *testing.T) {
	a := newAPITest(t)
	a.template()
	uuid := a.cluster("c1")
	if !strings.Contains(a.be.calls[1], `"keypair":"k"`) || !strings.Contains(a.be.calls[1], `"node_count":2`) {
		t.Fatalf("backend got %s", a.be.calls[1])
	}
	r := a.want(a.do("GET", "/v1/clusters", ""), 200)
	c := r.body["clusters"].([]any)[0].(map[string]any)
	if c["uuid"] != uuid || c["node_count"] != float64(2) || c["master_count"] != float64(1) || c["status"] != "CREATE_COMPLETE" {
		t.Fatalf("list: %s", r.raw)
	}
	for _, k := range []string{"api_address", "project_id", "labels_added", "created_at"} {
		if _, ok := c[k]; ok {
			t.Fatalf("list shows detail field %s: %s", k, r.raw)
		}
	}
	r = a.want(a.do("GET", "/v1/clusters/detail", ""), 200)
	if d := r.body["clusters"].([]any)[0].(map[string]any); d["api_address"] == nil || d["labels_added"] == nil || d["created_at"] == nil {
		t.Fatalf("detail: %s", r.raw)
	}
	// A client whose endpoint lacks /v1 asks for /clusters.
	r = a.want(a.do("GET", "/clusters/c1", ""), 200)
	if r.body["uuid"] != uuid || r.body["name"] != "c1" || r.body["cluster_template_id"] == nil {
		t.Fatalf("show: %s", r.raw)
	}
	a.wantError(a.do("GET", "/v1/clusters/c9", ""), 404, "Cluster c9 could not be found.")

	// Two clusters of one name (another project's administrator made
	// one): the name is ambiguous.
	a.be.clusters = append(a.be.clusters, &config.COECluster{Meta: config.Meta{UUID: config.NewUUID(), Name: "c1"}, ProjectID: "p2"})
	a.wantError(a.do("GET", "/v1/clusters/c1", ""), 409, "Multiple clusters exist with same name c1")
	a.want(a.do("GET", "/v1/clusters/c1", "", "X-Test-Admin", ""), 200) // p1 sees only its own
	a.be.clusters = a.be.clusters[:1]

	r = a.want(a.do("PATCH", "/v1/clusters/c1", `[{"op": "replace", "path": "/node_count", "value": 4}]`), 202)
	if r.body["uuid"] != uuid || a.be.defaultWorkers(uuid).NodeCount != 4 {
		t.Fatalf("update: %s", r.raw)
	}
	if last := a.be.lastCall(); !strings.HasSuffix(last, `{"node_count":4},false]`) {
		t.Fatalf("update without rollback: %s", last)
	}
	// Magnum's ?rollback=True, as python-magnumclient sends it (after a slash).
	a.want(a.do("PATCH", "/v1/clusters/c1/?rollback=True", `[{"op": "replace", "path": "/node_count", "value": 5}]`), 202)
	if last := a.be.lastCall(); !strings.HasSuffix(last, `{"node_count":5},true]`) {
		t.Fatalf("update with rollback: %s", last)
	}
	a.wantError(a.do("PATCH", "/v1/clusters/c1?rollback=maybe", `[{"op": "replace", "path": "/node_count", "value": 6}]`), 400, "rollback")
	a.wantError(a.do("PATCH", "/v1/clusters/c1", `[{"op": "replace", "path": "/name", "value": "x"}]`), 400, "Cannot update attribute name")
	a.wantError(a.do("PATCH", "/v1/clusters/c1", `[{"op": "replace", "path": "/node_count", "value": -1}]`), 400, "greater or equal to")

	a.want(a.do("POST", "/v1/clusters/"+uuid+"/actions/resize", `{"node_count": 3, "nodes_to_remove": ["n1"], "nodegroup": "default-worker"}`), 202)
	if last := a.be.calls[len(a.be.calls)-1]; !strings.Contains(last, `"NodesToRemove":["n1"]`) || !strings.Contains(last, `"NodeGroup":"default-worker"`) {
		t.Fatalf("resize: backend got %s", last)
	}
	a.wantError(a.do("POST", "/v1/clusters/"+uuid+"/actions/resize", `{"nodes_to_remove": []}`), 400, "node_count. Value: None")
	a.want(a.do("POST", "/v1/clusters/"+uuid+"/actions/upgrade", `{"cluster_template": "k8s", "max_batch_size": 2}`), 202)
	a.wantError(a.do("POST", "/v1/clusters/"+uuid+"/actions/upgrade", `{"cluster_template": "k8s", "max_batch_size": 0}`), 400, "max_batch_size")
	a.wantError(a.do("POST", "/v1/clusters", `{"name": "x"}`), 400, "cluster_template_id. Value: None")
	a.wantError(a.do("POST", "/v1/clusters", `{"name": "x", "cluster_template_id": "none"}`), 400, "ClusterTemplate none could not be found.")
	a.wantError(a.do("POST", "/v1/clusters", `{"name": "c1", "cluster_template_id": "k8s"}`), 409, "already exists")
	a.want(a.do("DELETE", "/v1/clusters/c1", ""), 204)
	a.wantError(a.do("DELETE", "/v1/clusters/c1", ""), 404, "could not be found")
}

func TestNodeGroups(t *testing.T) {
	a := newAPITest(t)
	a.template()
	a.cluster("c1")
	r := a.want(a.do("GET", "/v1/clusters/c1/nodegroups/", ""), 200)
	if l := r.body["nodegroups"].([]any); len(l) != 2 || l[0].(map[string]any)["is_default"] != true {
		t.Fatalf("list: %s", r.raw)
	}
	if _, ok := r.body["nodegroups"].([]any)[0].(map[string]any)["links"]; ok {
		t.Fatalf("list shows links: %s", r.raw)
	}
	r = a.want(a.do("GET", "/v1/clusters/c1/nodegroups/?role=master", ""), 200)
	if l := r.body["nodegroups"].([]any); len(l) != 1 || l[0].(map[string]any)["name"] != "default-master" {
		t.Fatalf("list by role: %s", r.raw)
	}
	r = a.want(a.do("POST", "/v1/clusters/c1/nodegroups/", `{"name": "ng1", "node_count": 2, "max_node_count": 5,
		"min_node_count": 1, "role": "worker", "labels": {"a": "b"}, "flavor_id": "f"}`), 202)
	if r.body["uuid"] == nil || r.body["name"] != "ng1" || r.body["max_node_count"] != float64(5) {
		t.Fatalf("create: %s", r.raw)
	}
	a.wantError(a.do("POST", "/v1/clusters/c1/nodegroups/", `{"name": "ng2", "node_count": 6, "max_node_count": 5}`), 400, "less or equal to max_node_count")
	a.wantError(a.do("POST", "/v1/clusters/c1/nodegroups/", `{"node_count": 1}`), 400, "name. Value: None")
	a.wantError(a.do("POST", "/v1/clusters/c1/nodegroups/", `{"name": "ng1"}`), 409, "already exists")
	r = a.want(a.do("GET", "/v1/clusters/c1/nodegroups/ng1", ""), 200)
	if r.body["labels"].(map[string]any)["a"] != "b" || r.body["links"] == nil {
		t.Fatalf("show: %s", r.raw)
	}
	r = a.want(a.do("PATCH", "/v1/clusters/c1/nodegroups/ng1", `[{"op": "replace", "path": "/max_node_count", "value": 6},
		{"op": "replace", "path": "/min_node_count", "value": 2}]`), 202)
	if r.body["max_node_count"] != float64(6) || r.body["min_node_count"] != float64(2) {
		t.Fatalf("patch: %s", r.raw)
	}
	a.wantError(a.do("PATCH", "/v1/clusters/c1/nodegroups/ng1", `[{"op": "replace", "path": "/min_node_count", "value": 7}]`), 400, "min_node_count (7)")
	a.wantError(a.do("PATCH", "/v1/clusters/c1/nodegroups/ng1", `[{"op": "replace", "path": "/role", "value": "master"}]`), 400, "Cannot update attribute role")
	a.wantError(a.do("DELETE", "/v1/clusters/c1/nodegroups/default-worker", ""), 400, "default nodegroup")
	a.want(a.do("DELETE", "/v1/clusters/c1/nodegroups/ng1/", ""), 204)
	a.wantError(a.do("GET", "/v1/clusters/c1/nodegroups/ng1", ""), 404, "Nodegroup ng1 could not be found.")
	a.wantError(a.do("GET", "/v1/clusters/c2/nodegroups/", ""), 404, "Cluster c2 could not be found.")
}

func TestCertificates(t *testing.T) {
	a := newAPITest(t)
	a.template()
	uuid := a.cluster("c1")
	r := a.want(a.do("GET", "/v1/certificates/"+uuid, ""), 200)
	ca := r.body["pem"].(string)
	if r.body["cluster_uuid"] != uuid || !strings.Contains(ca, "BEGIN CERTIFICATE") || r.body["links"] == nil {
		t.Fatalf("show: %s", r.raw)
	}
	csr := testCSR(t)
	body, _ := json.Marshal(map[string]string{"cluster_uuid": uuid, "csr": csr})
	r = a.want(a.do("POST", "/v1/certificates", string(body)), 201)
	if r.body["csr"] != csr || !strings.Contains(r.body["pem"].(string), "BEGIN CERTIFICATE") || r.body["cluster_uuid"] != uuid {
		t.Fatalf("sign: %s", r.raw)
	}
	a.wantError(a.do("POST", "/v1/certificates", `{"cluster_uuid": "`+uuid+`", "csr": "junk"}`), 400, "The CSR is not PEM.")
	a.wantError(a.do("POST", "/v1/certificates", `{"csr": "junk"}`), 400, "cluster_uuid. Value: None")
	r = a.want(a.do("PATCH", "/v1/certificates/c1", "", "Content-Type", "application/octet-stream"), 202)
	if r.body["uuid"] != uuid || a.be.rotations[uuid] != 1 {
		t.Fatalf("rotate: %s", r.raw)
	}
	if r := a.want(a.do("GET", "/v1/certificates/c1", ""), 200); r.body["pem"] == ca {
		t.Fatal("the CA is the same after a rotation")
	}
}

func TestQuotasStatsServices(t *testing.T) {
	a := newAPITest(t)
	r := a.want(a.do("GET", "/v1/quotas/p1/Cluster", ""), 200)
	if r.body["hard_limit"] != float64(DefaultClusterQuota) || r.body["project_id"] != "p1" || r.body["resource"] != "Cluster" {
		t.Fatalf("default quota: %s", r.raw)
	}
	user := []string{"X-Test-Admin", "", "X-Test-User", "bob"}
	a.wantError(a.do("POST", "/v1/quotas", `{"project_id": "p1", "resource": "Cluster", "hard_limit": 1}`, user...), 403, "Policy doesn't allow quota:create")
	r = a.want(a.do("POST", "/v1/quotas", `{"project_id": "p1", "resource": "Cluster", "hard_limit": 1}`), 201)
	if r.body["hard_limit"] != float64(1) || r.body["id"] == nil || r.body["created_at"] == nil {
		t.Fatalf("create: %s", r.raw)
	}
	a.wantError(a.do("POST", "/v1/quotas", `{"project_id": "p1", "resource": "Cluster", "hard_limit": 1}`), 409, "already exists")
	a.wantError(a.do("POST", "/v1/quotas", `{"project_id": "p1", "resource": "Pod", "hard_limit": 1}`), 400, "resource")
	a.wantError(a.do("POST", "/v1/quotas", `{"project_id": "p1", "resource": "Cluster", "hard_limit": -1}`), 400, "hard_limit")

	a.template()
	a.cluster("c1")
	a.wantError(a.do("POST", "/v1/clusters", `{"cluster_template_id": "k8s", "name": "c2"}`), 403,
		"Resource limit exceeded: You have reached the maximum clusters per project, 1.")

	r = a.want(a.do("GET", "/v1/quotas", "", user...), 200)
	if l := r.body["quotas"].([]any); len(l) != 1 {
		t.Fatalf("list: %s", r.raw)
	}
	a.wantError(a.do("GET", "/v1/quotas?all_tenants=True", "", user...), 403, "quota:get_all")
	a.want(a.do("GET", "/v1/quotas?all_tenants=True", ""), 200)
	a.wantError(a.do("GET", "/v1/quotas/p2/Cluster", "", user...), 403, "quota:get")
	r = a.want(a.do("PATCH", "/v1/quotas/p1/Cluster", `{"project_id": "p1", "resource": "Cluster", "hard_limit": 5}`), 202)
	if r.body["hard_limit"] != float64(5) {
		t.Fatalf("update: %s", r.raw)
	}
	a.wantError(a.do("PATCH", "/v1/quotas/p1/Cluster", `{"project_id": "p2", "hard_limit": 5}`), 400, "differs")
	a.wantError(a.do("PATCH", "/v1/quotas/p9/Cluster", `{"hard_limit": 5}`), 404, "Quota could not be found")
	a.want(a.do("POST", "/v1/clusters", `{"cluster_template_id": "k8s", "name": "c2"}`), 202)
	a.want(a.do("DELETE", "/v1/quotas/p1/Cluster", ""), 204)
	a.wantError(a.do("DELETE", "/v1/quotas/p1/Cluster", ""), 404, "Quota could not be found")

	r = a.want(a.do("GET", "/v1/stats?project_id=p1", ""), 200)
	if r.body["clusters"] != float64(2) || r.body["nodes"] != float64(1+2+1+1) {
		t.Fatalf("stats: %s", r.raw)
	}
	a.wantError(a.do("GET", "/v1/stats?project_id=p2", "", user...), 403, "stats:get_all")
	r = a.want(a.do("GET", "/v1/mservices", ""), 200)
	if l := r.body["mservices"].([]any); len(l) != 2 || l[0].(map[string]any)["binary"] != "magnum-conductor" {
		t.Fatalf("mservices: %s", r.raw)
	}
}

func TestUnknownPath(t *testing.T) {
	a := newAPITest(t)
	a.wantError(a.do("GET", "/v1/bays", ""), 404, "The resource could not be found.")
	a.wantError(a.do("PUT", "/v1/clusters", ""), 404, "")
}

// downBackend fails as the LUXI pool does when no corrald answers.
type downBackend struct{ *fakeBackend }

func (downBackend) ListClusters(context.Context, Caller) ([]*Cluster, error) {
	return nil, &apifront.BackendDownError{Err: errors.New("dial unix /run/x.sock: connection refused")}
}

func TestBackendDownIs503(t *testing.T) {
	a := newAPITest(t)
	a.h = NewHandler(Config{Backend: downBackend{a.be}, Auth: testAuth{}})
	r := a.do("GET", "/v1/clusters", "")
	a.wantError(r, http.StatusServiceUnavailable, "The master daemon is unreachable")
	if strings.Contains(r.raw, "x.sock") {
		t.Fatalf("the cause leaks to the client: %s", r.raw)
	}
}

// quotaBackend refuses a create as a unit may: an OpPrereqError of the
// insufficient-resources class with Magnum's text.
type quotaBackend struct{ *fakeBackend }

func (quotaBackend) CreateCluster(context.Context, Caller, ClusterCreate) error {
	return ecode.Errorf(ecode.NoRes, "Resource limit exceeded: You have reached the maximum clusters per project, 2. You may delete a cluster to make room for a new one.")
}

func TestQuotaRefusalIs403WhateverItsClass(t *testing.T) {
	a := newAPITest(t)
	a.h = NewHandler(Config{Backend: quotaBackend{a.be}, Auth: testAuth{}})
	a.wantError(a.do("POST", "/v1/clusters", `{"cluster_template_id": "k8s", "name": "c"}`), http.StatusForbidden,
		"Resource limit exceeded: You have reached the maximum clusters per project, 2.")
}
