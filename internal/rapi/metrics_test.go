package rapi

import (
	"net/http"
	"strings"
	"testing"

	"github.com/corral/corral/internal/metrics"
)

// fakeMetrics is what the fake backend's corrald answers to QueryMetrics.
const fakeMetrics = "# HELP corral_jobs Jobs in the queue (not archived) by status.\n" +
	"# TYPE corral_jobs gauge\n" +
	"corral_jobs{status=\"success\"} 2\n"

func scrape(t *testing.T, h http.Handler, c *creds) (metrics.Families, *http.Response) {
	t.Helper()
	rec := do(t, h, http.MethodGet, MetricsPath, "", c)
	res := rec.Result()
	if rec.Code != http.StatusOK {
		return nil, res
	}
	if ct := rec.Header().Get("Content-Type"); ct != metrics.ContentType {
		t.Fatalf("Content-Type = %q", ct)
	}
	fams, err := metrics.ParseText(rec.Body.String())
	if err != nil {
		t.Fatalf("exposition does not parse: %v\n%s", err, rec.Body.String())
	}
	return fams, res
}

func TestMetricsEndpoint(t *testing.T) {
	be := newFakeBackend()
	h := newTestHandler(t, be, false)

	// Credentials are required even though RAPI reads are anonymous here.
	for _, c := range []*creds{nil, asWrong} {
		rec := do(t, h, http.MethodGet, MetricsPath, "", c)
		if rec.Code != http.StatusUnauthorized || rec.Header().Get("WWW-Authenticate") == "" {
			t.Fatalf("%v: code %d, WWW-Authenticate %q", c, rec.Code, rec.Header().Get("WWW-Authenticate"))
		}
	}
	if rec := do(t, h, http.MethodPost, MetricsPath, "", asAdmin); rec.Code != http.StatusNotImplemented {
		t.Fatalf("POST: code %d", rec.Code)
	}

	// Some traffic: two instance reads (one route whatever the name), an
	// unknown instance, an unmatched path and an anonymous /2/info.
	for _, p := range []string{"/2/instances/web1", "/2/instances/web1", "/2/instances/nope", "/2/nothing", "/2/info"} {
		do(t, h, http.MethodGet, p, "", nil)
	}

	// Any valid user may read, even one without options.
	for _, c := range []*creds{asViewer, asNobody} {
		if _, res := scrape(t, h, c); res.StatusCode != http.StatusOK {
			t.Fatalf("%v: code %d", c, res.StatusCode)
		}
	}
	fams, _ := scrape(t, h, asAdmin)
	checks := []struct {
		name   string
		labels []string
		want   float64
	}{
		{"corral_rapi_requests_total", []string{"route", "/2/instances/{name}", "method", "GET", "code", "200"}, 2},
		{"corral_rapi_requests_total", []string{"route", "/2/instances/{name}", "method", "GET", "code", "404"}, 1},
		{"corral_rapi_requests_total", []string{"route", "unmatched", "method", "GET", "code", "404"}, 1},
		{"corral_rapi_requests_total", []string{"route", "/2/info", "method", "GET", "code", "200"}, 1},
		{"corral_rapi_requests_total", []string{"route", MetricsPath, "method", "GET", "code", "401"}, 2},
		{"corral_rapi_requests_total", []string{"route", MetricsPath, "method", "POST", "code", "501"}, 1},
		{"corral_rapi_requests_total", []string{"route", MetricsPath, "method", "GET", "code", "200"}, 2},
		{"corral_rapi_request_seconds_count", []string{"route", "/2/instances/{name}", "method", "GET"}, 3},
		{"corral_rapi_requests_in_flight", nil, 1}, // this scrape
		{"corral_up", nil, 1},
		{"corral_jobs", []string{"status", "success"}, 2},
	}
	for _, c := range checks {
		if got, ok := fams.Value(c.name, c.labels...); !ok || got != c.want {
			t.Errorf("%s%v = %v (found %v), want %v", c.name, c.labels, got, ok, c.want)
		}
	}
	for _, f := range fams {
		for _, s := range f.Samples {
			if strings.Contains(s.Labels["route"], "web1") || strings.Contains(s.Labels["route"], "nope") {
				t.Errorf("raw path in a route label: %v", s)
			}
		}
	}

	// corrald down: corral-rapi's own metrics and corral_up 0, still 200.
	be.down = true
	fams, res := scrape(t, h, asViewer)
	if res.StatusCode != http.StatusOK {
		t.Fatalf("corrald down: code %d", res.StatusCode)
	}
	if got, ok := fams.Value("corral_up"); !ok || got != 0 {
		t.Errorf("corral_up = %v (%v), want 0", got, ok)
	}
	if fams.Get("corral_jobs") != nil {
		t.Error("corrald's metrics present while it is down")
	}
	if _, ok := fams.Value("corral_rapi_requests_total", "route", "/2/info"); !ok {
		t.Error("own metrics missing while corrald is down")
	}
}

// TestMetricsCountsRejections: with RequireAuth, /metrics behaves the same
// (401 without credentials), and a 503 from the client limit is counted.
func TestMetricsCountsRejections(t *testing.T) {
	be := newFakeBackend()
	h := NewHandler(Config{Backend: be, Users: ParseUsers([]byte(testUsers)), RequireAuth: true, MaxClients: 1})
	if rec := do(t, h, http.MethodGet, MetricsPath, "", nil); rec.Code != http.StatusUnauthorized {
		t.Fatalf("code %d", rec.Code)
	}
	// Hold the only slot, so the next request is refused.
	release, ok := h.limit.Acquire()
	if !ok {
		t.Fatal("no slot free")
	}
	if rec := do(t, h, http.MethodGet, "/2/info", "", asAdmin); rec.Code != http.StatusServiceUnavailable {
		t.Fatalf("code %d, want 503", rec.Code)
	}
	release()
	fams, _ := scrape(t, h, asAdmin)
	if got, _ := fams.Value("corral_rapi_requests_total", "route", "/2/info", "code", "503"); got != 1 {
		t.Errorf("503s counted = %v, want 1", got)
	}
}
