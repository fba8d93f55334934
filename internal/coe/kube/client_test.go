package kube

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/corral/corral/internal/coe/certs"
	"github.com/corral/corral/internal/ecode"
)

// fakeAPI is an HTTPS server that requires a client certificate of the
// cluster CA, as a kube-apiserver does, and answers with handler.
type fakeAPI struct {
	srv    *httptest.Server
	bundle *certs.Bundle
	client *Client
}

var testBundle = sync.OnceValues(func() (*certs.Bundle, error) {
	return certs.NewBundle(certs.BundleSpec{ClusterName: "t", APIAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}})
})

func newFakeAPI(t *testing.T, handler http.HandlerFunc) *fakeAPI {
	t.Helper()
	b, err := testBundle()
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tls.X509KeyPair(b.APIServer.CertPEM, []byte(b.APIServer.KeyPEM.Reveal()))
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(b.CA.CertPEM())
	srv := httptest.NewUnstartedServer(handler)
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{pair}, ClientCAs: pool, ClientAuth: tls.RequireAndVerifyClientCert}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	c, err := New(srv.URL, b.CA.CertPEM(), b.Admin.CertPEM, b.Admin.KeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return &fakeAPI{srv: srv, bundle: b, client: c}
}

func status(w http.ResponseWriter, code int, reason, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(map[string]any{"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": reason, "message": msg, "code": code})
}

func TestReadyzListsTheFailedChecks(t *testing.T) {
	ready := false
	f := newFakeAPI(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/readyz" {
			t.Errorf("path %s", r.URL.Path)
		}
		if ready {
			io.WriteString(w, "ok")
			return
		}
		w.WriteHeader(http.StatusInternalServerError)
		io.WriteString(w, "[+]ping ok\n[+]log ok\n[-]etcd failed: reason withheld\n[+]informer-sync ok\n[-]poststarthook/rbac/bootstrap-roles failed: reason withheld\nreadyz check failed\n")
	})
	err := f.client.Readyz(context.Background())
	if err == nil {
		t.Fatal("Readyz succeeded on a 500")
	}
	if ecode.ClassOf(err) != ecode.TempNoRes || !strings.Contains(err.Error(), "etcd failed: reason withheld; poststarthook/rbac/bootstrap-roles failed") {
		t.Errorf("Readyz: %v (class %s)", err, ecode.ClassOf(err))
	}
	ready = true
	if err := f.client.Readyz(context.Background()); err != nil {
		t.Errorf("Readyz on ok: %v", err)
	}
}

func TestErrorStatusesAreClassified(t *testing.T) {
	var code int
	var reason string
	f := newFakeAPI(t, func(w http.ResponseWriter, r *http.Request) {
		if reason == "" {
			w.WriteHeader(code)
			io.WriteString(w, "upstream connect error\n")
			return
		}
		status(w, code, reason, "nodes \"w1\" "+strings.ToLower(reason))
	})
	for _, c := range []struct {
		code   int
		reason string
		class  ecode.Class
	}{
		{404, "NotFound", ecode.NoEnt},
		{409, "AlreadyExists", ecode.Exists},
		{409, "Conflict", ecode.State},
		{422, "Invalid", ecode.Inval},
		{403, "Forbidden", ecode.Environ},
		{401, "Unauthorized", ecode.Environ},
		{429, "TooManyRequests", ecode.TempNoRes},
		{503, "", ecode.TempNoRes},
		{500, "InternalError", ecode.Fault},
	} {
		code, reason = c.code, c.reason
		err := f.client.DeleteNode(context.Background(), "w1")
		if ecode.ClassOf(err) != c.class {
			t.Errorf("%d %s: class %s, want %s (%v)", c.code, c.reason, ecode.ClassOf(err), c.class, err)
		}
		var ae *APIError
		if !errors.As(err, &ae) || ae.Code != c.code {
			t.Errorf("%d %s: no APIError with the code in %v", c.code, c.reason, err)
			continue
		}
		if c.reason != "" && (ae.Reason != c.reason || !strings.Contains(ae.Message, "w1")) {
			t.Errorf("%d: APIError %+v", c.code, ae)
		}
		if c.reason == "" && !strings.Contains(err.Error(), "upstream connect error") {
			t.Errorf("%d without a Status: %v does not carry the body", c.code, err)
		}
	}
}

func TestListNodesFollowsPages(t *testing.T) {
	since := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	var queries []string
	f := newFakeAPI(t, func(w http.ResponseWriter, r *http.Request) {
		queries = append(queries, r.URL.RawQuery)
		if r.URL.Path != "/api/v1/nodes" {
			t.Errorf("path %s", r.URL.Path)
		}
		page := map[string]any{"kind": "NodeList", "metadata": map[string]any{"continue": "tok2"}, "items": []any{
			map[string]any{
				"metadata": map[string]any{"name": "w1", "labels": map[string]string{"type": "kwok"}, "creationTimestamp": "2026-11-29T09:00:00Z"},
				"spec":     map[string]any{"unschedulable": true},
				"status": map[string]any{"conditions": []any{
					map[string]any{"type": "MemoryPressure", "status": "False", "lastTransitionTime": "2026-11-29T09:00:00Z"},
					map[string]any{"type": "Ready", "status": "True", "lastTransitionTime": since.Format(time.RFC3339)},
				}},
			},
		}}
		if r.URL.Query().Get("continue") == "tok2" {
			page = map[string]any{"metadata": map[string]any{}, "items": []any{map[string]any{"metadata": map[string]any{"name": "w2"}}}}
		}
		json.NewEncoder(w).Encode(page)
	})
	nodes, err := f.client.ListNodes(context.Background(), "type=kwok")
	if err != nil {
		t.Fatal(err)
	}
	if len(queries) != 2 || !strings.Contains(queries[0], "labelSelector=type%3Dkwok") || !strings.Contains(queries[0], "limit=500") || !strings.Contains(queries[1], "continue=tok2") {
		t.Errorf("queries %q", queries)
	}
	if len(nodes) != 2 {
		t.Fatalf("%d nodes", len(nodes))
	}
	w1, w2 := nodes[0], nodes[1]
	if w1.Name != "w1" || w1.Ready != ConditionTrue || !w1.ReadySince.Equal(since) || !w1.Unschedulable || w1.Labels["type"] != "kwok" {
		t.Errorf("w1 = %+v", w1)
	}
	if w2.Name != "w2" || w2.Ready != "" || w2.Labels == nil {
		t.Errorf("w2 (no status yet) = %+v", w2)
	}
}

func TestCountPodsByNode(t *testing.T) {
	f := newFakeAPI(t, func(w http.ResponseWriter, r *http.Request) {
		if got := r.URL.Query().Get("fieldSelector"); got != "spec.nodeName!=,status.phase!=Succeeded,status.phase!=Failed" {
			t.Errorf("fieldSelector %q", got)
		}
		io.WriteString(w, `{"metadata":{},"items":[{"spec":{"nodeName":"w1"}},{"spec":{"nodeName":"w2"}},{"spec":{"nodeName":"w1"}}]}`)
	})
	counts, err := f.client.CountPodsByNode(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(counts) != 2 || counts["w1"] != 2 || counts["w2"] != 1 {
		t.Errorf("counts %v", counts)
	}
}

func TestCountUnscheduledPods(t *testing.T) {
	f := newFakeAPI(t, func(w http.ResponseWriter, r *http.Request) {
		if got := r.URL.Query().Get("fieldSelector"); got != "spec.nodeName=,status.phase=Pending" {
			t.Errorf("fieldSelector %q", got)
		}
		io.WriteString(w, `{"metadata":{},"items":[{"spec":{}},{"spec":{}}]}`)
	})
	if n, err := f.client.CountUnscheduledPods(context.Background()); err != nil || n != 2 {
		t.Fatalf("%d %v", n, err)
	}
}

func TestNodeWritesSendWhatKubernetesExpects(t *testing.T) {
	type req struct {
		method, path, ctype string
		body                map[string]any
	}
	var got []req
	f := newFakeAPI(t, func(w http.ResponseWriter, r *http.Request) {
		var body map[string]any
		json.NewDecoder(r.Body).Decode(&body)
		got = append(got, req{r.Method, r.URL.EscapedPath(), r.Header.Get("Content-Type"), body})
		io.WriteString(w, "{}")
	})
	ctx := context.Background()
	if err := f.client.CreateKwokNode(ctx, KwokNode{Name: "w1", Labels: map[string]string{"magnum.openstack.org/nodegroup": "default-worker", "type": "other"}}); err != nil {
		t.Fatal(err)
	}
	if err := f.client.CreateKwokNode(ctx, KwokNode{Name: "w2", Tainted: true, CPU: "8"}); err != nil {
		t.Fatal(err)
	}
	must := func(err error) {
		if err != nil {
			t.Fatal(err)
		}
	}
	must(f.client.SetNodeLabel(ctx, "w1", "role", "x"))
	must(f.client.RemoveNodeLabel(ctx, "w1", "type"))
	must(f.client.Cordon(ctx, "w1", true))
	must(f.client.DeleteNode(ctx, "w/1"))

	js := func(v any) string { b, _ := json.Marshal(v); return string(b) }
	c1 := got[0]
	if c1.method != "POST" || c1.path != "/api/v1/nodes" || c1.ctype != "application/json" {
		t.Errorf("create: %s %s %s", c1.method, c1.path, c1.ctype)
	}
	meta := c1.body["metadata"].(map[string]any)
	labels := meta["labels"].(map[string]any)
	if labels["type"] != "kwok" || labels["magnum.openstack.org/nodegroup"] != "default-worker" || labels["kubernetes.io/hostname"] != "w1" {
		t.Errorf("create labels %v: type must stay kwok, the rest be added", labels)
	}
	if ann := js(meta["annotations"]); !strings.Contains(ann, `"kwok.x-k8s.io/node":"fake"`) {
		t.Errorf("create annotations %s", ann)
	}
	if _, tainted := c1.body["spec"]; tainted {
		t.Errorf("untainted node has a spec: %v", c1.body["spec"])
	}
	if st := js(c1.body["status"]); st != `{"allocatable":{"cpu":"4","memory":"8Gi","pods":"110"},"capacity":{"cpu":"4","memory":"8Gi","pods":"110"}}` {
		t.Errorf("create status %s", st)
	}
	if sp := js(got[1].body["spec"]); sp != `{"taints":[{"effect":"NoSchedule","key":"kwok.x-k8s.io/node","value":"fake"}]}` {
		t.Errorf("tainted node spec %s", sp)
	}
	for i, want := range []struct{ path, body string }{
		{"/api/v1/nodes/w1", `{"metadata":{"labels":{"role":"x"}}}`},
		{"/api/v1/nodes/w1", `{"metadata":{"labels":{"type":null}}}`},
		{"/api/v1/nodes/w1", `{"spec":{"unschedulable":true}}`},
	} {
		g := got[2+i]
		if g.method != "PATCH" || g.path != want.path || g.ctype != "application/merge-patch+json" || js(g.body) != want.body {
			t.Errorf("patch %d: %s %s %s %s, want %s", i, g.method, g.path, g.ctype, js(g.body), want.body)
		}
	}
	if d := got[5]; d.method != "DELETE" || d.path != "/api/v1/nodes/w%2F1" {
		t.Errorf("delete: %s %s", d.method, d.path)
	}
}

func TestClientRefusesAServerOfAnotherCA(t *testing.T) {
	f := newFakeAPI(t, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
	other, err := certs.NewBundle(certs.BundleSpec{ClusterName: "other"})
	if err != nil {
		t.Fatal(err)
	}
	c, err := New(f.srv.URL, other.CA.CertPEM(), other.Admin.CertPEM, other.Admin.KeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	err = c.Readyz(context.Background())
	var uae x509.UnknownAuthorityError
	if !errors.As(err, &uae) {
		t.Errorf("Readyz against a server of another CA: %v, want an unknown authority error", err)
	}
}

func TestNewRefusesBadInput(t *testing.T) {
	b, err := testBundle()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, server string
		ca           []byte
	}{
		{"http", "http://127.0.0.1:6443", b.CA.CertPEM()},
		{"no CA", "https://127.0.0.1:6443", []byte("junk")},
	} {
		if _, err := New(c.server, c.ca, b.Admin.CertPEM, b.Admin.KeyPEM); ecode.ClassOf(err) != ecode.Inval {
			t.Errorf("%s: %v, want %s", c.name, err, ecode.Inval)
		}
	}
	if _, err := New("https://127.0.0.1:6443", b.CA.CertPEM(), b.Admin.CertPEM, b.Scheduler.KeyPEM); ecode.ClassOf(err) != ecode.Inval {
		t.Errorf("a key of another certificate: %v", err)
	}
}
