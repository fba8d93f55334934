package rapi

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

// BenchmarkHandlerInfo is the handler's own share of GET /2/info with
// credentials: routing, authentication, metrics and JSON, the backend
// being an in-memory fake.
func BenchmarkHandlerInfo(b *testing.B) {
	h := NewHandler(Config{Backend: newFakeBackend(), Users: ParseUsers([]byte("admin s3cret write\n")), MaxClients: 20})
	req := httptest.NewRequest(http.MethodGet, "/2/info", nil)
	req.SetBasicAuth("admin", "s3cret")
	b.ReportAllocs()
	for b.Loop() {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != http.StatusOK {
			b.Fatalf("status %d", rec.Code)
		}
	}
}
