package e2e

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/corral/corral/internal/devcluster"
)

// coeHTTP sends requests to a dev cluster's Container Infra API with
// coe.env's credentials and CA, as Magnum's client does.
type coeHTTP struct {
	t              *testing.T
	url, user, pwd string
	client         *http.Client
}

func newCOEHTTP(t *testing.T, c *cluster) *coeHTTP {
	t.Helper()
	env, err := devcluster.ReadCOEEnv(c.st.StateDir)
	if err != nil {
		t.Fatal(err)
	}
	h := &coeHTTP{t: t, url: c.st.COEURL}
	pool := x509.NewCertPool()
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		switch k {
		case "OS_USERNAME":
			h.user = v
		case "OS_PASSWORD":
			h.pwd = v
		case "OS_CACERT":
			pem, err := os.ReadFile(v)
			if err != nil || !pool.AppendCertsFromPEM(pem) {
				t.Fatalf("the API's CA %s: %v", v, err)
			}
		}
	}
	h.client = &http.Client{Timeout: time.Minute, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	return h
}

// do sends a request and decodes the JSON reply (nil for none).
func (h *coeHTTP) do(method, path, body string) (int, map[string]any) {
	h.t.Helper()
	req, err := http.NewRequest(method, h.url+path, bytes.NewBufferString(body))
	if err != nil {
		h.t.Fatal(err)
	}
	req.SetBasicAuth(h.user, h.pwd)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("OpenStack-API-Version", "container-infra latest")
	resp, err := h.client.Do(req)
	if err != nil {
		h.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var doc map[string]any
	if len(raw) > 0 {
		if err := json.Unmarshal(raw, &doc); err != nil {
			h.t.Fatalf("%s %s: %d %q is not JSON", method, path, resp.StatusCode, raw)
		}
	}
	return resp.StatusCode, doc
}

func (h *coeHTTP) want(code int, method, path, body string) map[string]any {
	h.t.Helper()
	got, doc := h.do(method, path, body)
	if got != code {
		h.t.Fatalf("%s %s: %d, want %d: %v", method, path, got, code, doc)
	}
	return doc
}

// wantError checks Magnum's error body's status and title.
func (h *coeHTTP) wantError(code int, title, method, path, body string) {
	h.t.Helper()
	doc := h.want(code, method, path, body)
	errs, _ := doc["errors"].([]any)
	if len(errs) != 1 || !strings.Contains(errs[0].(map[string]any)["title"].(string), title) {
		h.t.Fatalf("%s %s: errors %v, want a title with %q", method, path, doc, title)
	}
}

// waitFederation polls a federation until its status is want.
func (h *coeHTTP) waitFederation(ident, want string) map[string]any {
	h.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		doc := h.want(http.StatusOK, "GET", "/federations/"+ident, "")
		if doc["status"] == want {
			return doc
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("federation %s: %v, want status %s", ident, doc, want)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// TestCOEFederationsOverHTTP drives Magnum's federation requests against
// a dev cluster's API front, through corrald's jobs: clusters of the
// in-process fake driver, a federation created, joined, unjoined, its
// zone changed, listed by `corral coe federation`, refusals as Magnum's
// (an unknown host, a member twice, a cluster of another project), and
// the delete.
func TestCOEFederationsOverHTTP(t *testing.T) {
	c := newClusterWith(t, devcluster.Options{Nodes: 1, WatcherEvery: time.Hour})
	x := coeCLI{t: t, c: c}
	h := newCOEHTTP(t, c)
	x.must("template", "create", "ft", "--coe", "kubernetes", "--image", "none", "--cluster-distro", "fake")
	for _, k := range []string{"host", "m1", "m2"} {
		x.must("cluster", "create", k, "--template", "ft", "--node-count", "1", "--project", "admin", "--wait=120")
	}
	var clusters []map[string]any
	x.json(&clusters, "cluster", "list")
	uuid := map[string]string{}
	for _, k := range clusters {
		uuid[k["name"].(string)] = k["uuid"].(string)
	}

	h.wantError(http.StatusNotFound, "Cluster nope could not be found.", "POST", "/federations",
		`{"name": "f1", "hostcluster_id": "nope", "properties": {"dns-zone": "example.com."}}`)
	h.wantError(http.StatusBadRequest, "No DNS zone specified.", "POST", "/federations",
		`{"name": "f1", "hostcluster_id": "host", "properties": {}}`)
	h.wantError(http.StatusConflict, "is already a member of the federation f1.", "POST", "/federations",
		`{"name": "f1", "hostcluster_id": "host", "member_ids": ["m1", "`+uuid["m1"]+`"], "properties": {"dns-zone": "example.com."}}`)

	doc := h.want(http.StatusAccepted, "POST", "/federations",
		`{"name": "f1", "hostcluster_id": "host", "member_ids": ["m1"], "properties": {"dns-zone": "example.com."}}`)
	fed, _ := doc["uuid"].(string)
	doc = h.waitFederation(fed, "CREATE_COMPLETE")
	if doc["name"] != "f1" || doc["hostcluster_id"] != uuid["host"] || !reflect.DeepEqual(doc["member_ids"], []any{uuid["m1"]}) ||
		doc["project_id"] != "admin" || doc["status_reason"] != "CREATE completed successfully" || doc["created_at"] == nil {
		t.Fatalf("federation after its create: %v", doc)
	}

	h.want(http.StatusAccepted, "PATCH", "/federations/f1", `[{"op": "add", "path": "/member_ids", "value": "m2"}]`)
	doc = h.waitFederation("f1", "UPDATE_COMPLETE")
	if !reflect.DeepEqual(doc["member_ids"], []any{uuid["m1"], uuid["m2"]}) {
		t.Fatalf("members after the join: %v", doc["member_ids"])
	}
	h.wantError(http.StatusConflict, "is already a member of the federation f1.", "PATCH", "/federations/f1",
		`[{"op": "add", "path": "/member_ids", "value": "m2"}]`)
	h.want(http.StatusAccepted, "PATCH", "/federations/f1", `[{"op": "remove", "path": "/member_ids", "value": "`+uuid["m1"]+`"}]`)
	h.want(http.StatusOK, "GET", "/federations/f1", "")
	doc = h.waitFederation("f1", "UPDATE_COMPLETE")
	if !reflect.DeepEqual(doc["member_ids"], []any{uuid["m2"]}) {
		t.Fatalf("members after the unjoin: %v", doc["member_ids"])
	}
	h.wantError(http.StatusNotFound, "is not a member of the federation f1.", "PATCH", "/federations/f1",
		`[{"op": "remove", "path": "/member_ids", "value": "m1"}]`)

	// A cluster of another project cannot join, even for an
	// administrator: corrald refuses it in the request.
	x.must("cluster", "create", "theirs", "--template", "ft", "--node-count", "1", "--project", "other", "--wait=120")
	h.wantError(http.StatusNotFound, "could not be found.", "PATCH", "/federations/f1",
		`[{"op": "add", "path": "/member_ids", "value": "theirs"}]`)

	// The command line sees and changes the same federation.
	if out := x.must("federation", "list", "--no-headers", "-o", "name,status"); out != "f1 UPDATE_COMPLETE\n" {
		t.Fatalf("federation list: %q", out)
	}
	x.must("federation", "update", "f1", "--join", "m1", "--dns-zone", "other.org.")
	doc = h.waitFederation("f1", "UPDATE_COMPLETE")
	if !reflect.DeepEqual(doc["member_ids"], []any{uuid["m2"], uuid["m1"]}) ||
		!reflect.DeepEqual(doc["properties"], map[string]any{"dns-zone": "other.org."}) {
		t.Fatalf("federation after the command line's update: %v", doc)
	}
	list := h.want(http.StatusOK, "GET", "/federations", "")["federations"].([]any)
	if len(list) != 1 || list[0].(map[string]any)["project_id"] != nil || list[0].(map[string]any)["links"] == nil {
		t.Fatalf("federation list: %v", list)
	}

	if code, _ := h.do("DELETE", "/federations/f1", ""); code != http.StatusNoContent {
		t.Fatalf("delete: %d", code)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		code, _ := h.do("GET", "/federations/"+fed, "")
		if code == http.StatusNotFound {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the federation is still there after its delete: %d", code)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if out := x.must("federation", "list", "--no-headers"); out != "" {
		t.Fatalf("federations left: %q", out)
	}
	// The command line's own create, show and delete (a federation of no
	// project, as the command line acts for every project).
	if out := x.must("federation", "create", "f2", "--hostcluster", "host", "--member", "m1", "--dns-zone", "cli.example."); !strings.Contains(out, "Request to create federation ") {
		t.Fatalf("federation create: %s", out)
	}
	var shown map[string]any
	deadline = time.Now().Add(30 * time.Second)
	for x.json(&shown, "federation", "show", "f2"); shown["status"] != "CREATE_COMPLETE"; x.json(&shown, "federation", "show", "f2") {
		if time.Now().After(deadline) {
			t.Fatalf("federation f2: %v", shown)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if shown["hostcluster_id"] != uuid["host"] || !reflect.DeepEqual(shown["member_ids"], []any{uuid["m1"]}) || shown["project_id"] != nil {
		t.Fatalf("federation f2: %v", shown)
	}
	if out, err := x.run("federation", "update", "f2", "--unjoin", "m2"); err == nil || !strings.Contains(out, "is not a member of the federation f2.") {
		t.Fatalf("unjoin of a non-member: %v\n%s", err, out)
	}
	x.must("federation", "delete", "f2")
	deadline = time.Now().Add(30 * time.Second)
	for x.must("federation", "list", "--no-headers") != "" {
		if time.Now().After(deadline) {
			t.Fatal("federation f2 is still there after its delete")
		}
		time.Sleep(200 * time.Millisecond)
	}
	x.must("cluster", "delete", "host", "m1", "m2", "theirs", "--wait=120")
}
