package e2e

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/corral/corral/internal/devcluster"
	"github.com/corral/corral/internal/metrics"
)

// TestMetrics scrapes the dev cluster's corral-rapi /metrics after some
// jobs and RAPI requests: the answer needs credentials, parses as the text
// exposition format, and carries both corral-rapi's and corrald's numbers.
func TestMetrics(t *testing.T) {
	requireRoot(t)
	c := newCluster(t, clusterOpts{nodes: 1, hypervisors: []string{"fake"}})
	env, err := devcluster.ReadRAPIEnv(c.dir)
	if err != nil {
		t.Fatalf("rapi.env: %v", err)
	}
	(&rapiServer{env: env}).waitUser(t, env.User, env.Password)
	caPEM, err := os.ReadFile(env.CA)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		t.Fatalf("no certificate in %s", env.CA)
	}
	hc := &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	defer hc.CloseIdleConnections()
	get := func(path string, auth bool) (int, string, string) {
		t.Helper()
		req, err := http.NewRequest(http.MethodGet, env.URL+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		if auth {
			req.SetBasicAuth(env.User, env.Password)
		}
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		return resp.StatusCode, resp.Header.Get("Content-Type"), string(b)
	}

	rows, err := c.luxi.QueryNodes(context.Background(), nil, []string{"name"}, false)
	if err != nil || len(rows) == 0 {
		t.Fatalf("nodes: %v, %v", rows, err)
	}
	node, _ := rows[0][0].(string)
	const jobs = 2
	for range jobs {
		c.mustSucceed(map[string]any{"OP_ID": "OP_TEST_DELAY", "duration": 0, "on_master": false, "on_nodes": []any{node}})
	}
	const infos = 3
	for range infos {
		if code, _, body := get("/2/info", true); code != http.StatusOK {
			t.Fatalf("/2/info: %d %s", code, body)
		}
	}

	if code, _, _ := get("/metrics", false); code != http.StatusUnauthorized {
		t.Fatalf("/metrics without credentials: %d, want 401", code)
	}
	code, ct, body := get("/metrics", true)
	if code != http.StatusOK || ct != metrics.ContentType {
		t.Fatalf("/metrics: %d, Content-Type %q\n%s", code, ct, body)
	}
	fams, err := metrics.ParseText(body)
	if err != nil {
		t.Fatalf("/metrics does not parse: %v\n%s", err, body)
	}
	atLeast := func(what string, min float64, name string, labels ...string) {
		t.Helper()
		if v, ok := fams.Value(name, labels...); !ok || v < min {
			t.Errorf("%s: %s%v = %v (found %v), want at least %v", what, name, labels, v, ok, min)
		}
	}
	atLeast("corrald answered", 1, "corral_up")
	atLeast("jobs run", jobs, "corral_jobs", "status", "success")
	atLeast("job durations", jobs, "corral_job_seconds_count", "op", "OP_TEST_DELAY")
	atLeast("/2/info requests", infos, "corral_rapi_requests_total", "route", "/2/info", "method", "GET", "code", "200")
	atLeast("/metrics refusals", 1, "corral_rapi_requests_total", "route", "/metrics", "code", "401")
	atLeast("LUXI submissions", jobs, "corral_luxi_requests_total", "method", "SubmitJob", "outcome", "success")
	atLeast("LUXI cluster info", infos, "corral_luxi_requests_total", "method", "QueryClusterInfo", "outcome", "success")
	rpcs := 0.0
	if f := fams.Get("corral_node_rpc_seconds"); f != nil {
		for _, s := range f.Samples {
			if s.Name == "corral_node_rpc_seconds_count" && s.Labels["outcome"] == "success" {
				rpcs += s.Value
			}
		}
	}
	if rpcs < jobs {
		t.Errorf("successful node RPCs counted: %v, want at least %d (the delays on %s)", rpcs, jobs, node)
	}
	if t.Failed() {
		t.Logf("/metrics:\n%s", body)
	}
}
