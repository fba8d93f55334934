package rapi

import (
	"context"
	"strings"
	"testing"
	"time"
)

// switchBackend reports the cluster's master_capability_rapi_modifiable.
type switchBackend struct {
	*fakeBackend
	on any
}

func (b switchBackend) QueryClusterInfo(ctx context.Context) (map[string]any, error) {
	ci, err := b.fakeBackend.QueryClusterInfo(ctx)
	if err == nil && b.on != nil {
		ci["master_capability_rapi_modifiable"] = b.on
	}
	return ci, err
}

func TestMasterCapableOverRAPI(t *testing.T) {
	for _, tc := range []struct {
		name       string
		on         any
		path, body string
		code       int
	}{
		{"switch off", false, "/2/nodes/node1/modify", `{"master_capable":true}`, 403},
		{"switch unknown", nil, "/2/nodes/node1/modify", `{"master_capable":false}`, 403},
		{"switch off, query", false, "/2/nodes/node1/modify?master_capable=0", `{}`, 403},
		{"switch on", true, "/2/nodes/node1/modify", `{"master_capable":false}`, 200},
		{"other flags need no switch", false, "/2/nodes/node1/modify", `{"drained":true}`, 200},
	} {
		t.Run(tc.name, func(t *testing.T) {
			be := newFakeBackend()
			h := NewHandler(Config{Backend: switchBackend{be, tc.on}, Users: ParseUsers([]byte(testUsers)), RequireAuth: false,
				Now: func() time.Time { return time.Unix(100, 5) }})
			rec := do(t, h, "POST", tc.path, tc.body, asAdmin)
			if rec.Code != tc.code {
				t.Fatalf("status %d, want %d: %s", rec.Code, tc.code, rec.Body)
			}
			if tc.code == 403 {
				if !strings.Contains(rec.Body.String(), "master_capability_rapi_modifiable") {
					t.Fatalf("403 without naming the switch: %s", rec.Body)
				}
				if be.lastOp() != nil {
					t.Fatalf("a job was submitted: %v", be.lastOp())
				}
			}
		})
	}
	// The switch itself cannot be turned on over RAPI.
	rec := do(t, newTestHandler(t, newFakeBackend(), false), "PUT", "/2/modify", `{"master_capability_rapi_modifiable":true}`, asAdmin)
	if rec.Code != 403 {
		t.Fatalf("switch over RAPI: status %d: %s", rec.Code, rec.Body)
	}
}
