package luxi

import (
	"context"
	"strings"
	"testing"
)

func TestQueryMetrics(t *testing.T) {
	const text = "# HELP corral_jobs Jobs.\n# TYPE corral_jobs gauge\ncorral_jobs{status=\"success\"} 2\n"
	h := &scripted{replies: map[string]string{MethodQueryMetrics: `"# HELP corral_jobs Jobs.\n# TYPE corral_jobs gauge\ncorral_jobs{status=\"success\"} 2\n"`}}
	s := startServer(t, h, ServerOptions{})
	c := dial(t, s.Addr())
	got, err := c.QueryMetrics(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if got != text {
		t.Fatalf("QueryMetrics = %q, want %q", got, text)
	}
	if call := h.last(); !strings.HasPrefix(call, MethodQueryMetrics+" ") {
		t.Fatalf("server saw %q", call)
	}

	// A non-string answer is an error, not an empty exposition.
	h.mu.Lock()
	h.replies[MethodQueryMetrics] = `[1]`
	h.mu.Unlock()
	if got, err := c.QueryMetrics(context.Background()); err == nil {
		t.Fatalf("QueryMetrics of a list = %q, want an error", got)
	}
}
