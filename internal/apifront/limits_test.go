package apifront

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestLimiter(t *testing.T) {
	l := NewLimiter(2)
	r1, ok1 := l.Acquire()
	r2, ok2 := l.Acquire()
	if !ok1 || !ok2 {
		t.Fatal("two slots: both must be granted")
	}
	if _, ok := l.Acquire(); ok {
		t.Error("third request admitted over a limit of 2")
	}
	r1()
	r3, ok := l.Acquire()
	if !ok {
		t.Error("slot not given back")
	}
	r2()
	r3()
	unlimited := NewLimiter(0)
	for range 100 {
		if _, ok := unlimited.Acquire(); !ok {
			t.Fatal("limit 0 refused a request")
		}
	}
}

func TestRequestMetrics(t *testing.T) {
	m := NewRequestMetrics("test", "Test API")
	serve := func(method string, code int) {
		r := httptest.NewRequest(method, "/things/abc", nil)
		w, done := m.Instrument(httptest.NewRecorder(), r, func(*http.Request) string { return "/things/{name}" })
		if code != 0 {
			w.WriteHeader(code)
		}
		w.Write([]byte("x"))
		done()
	}
	serve(http.MethodGet, 0)
	serve(http.MethodGet, 0)
	serve(http.MethodPut, http.StatusNotFound)
	serve("BREW", http.StatusNotImplemented)
	var buf bytes.Buffer
	if err := m.Registry.WriteText(&buf); err != nil {
		t.Fatal(err)
	}
	text := buf.String()
	for _, want := range []string{
		`corral_test_requests_total{route="/things/{name}",method="GET",code="200"} 2`,
		`corral_test_requests_total{route="/things/{name}",method="PUT",code="404"} 1`,
		`corral_test_requests_total{route="/things/{name}",method="other",code="501"} 1`,
		`corral_test_request_seconds_count{route="/things/{name}",method="GET"} 2`,
		`corral_test_requests_in_flight 0`,
		`# HELP corral_test_requests_total Test API requests answered`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("missing %s in\n%s", want, text)
		}
	}
	if strings.Contains(text, "abc") {
		t.Error("a path made it into a label")
	}
}
