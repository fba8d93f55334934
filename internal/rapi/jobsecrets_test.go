package rapi

import (
	"net/http"
	"strings"
	"testing"
)

// TestJobPrivateParamsRedacted: a job's private OS parameters reach only
// callers that authenticated with write rights; secret ones reach nobody,
// even when the backend (corrald) answered them.
func TestJobPrivateParamsRedacted(t *testing.T) {
	be := newFakeBackend()
	be.jobs[8] = map[string]any{
		"id": 8.0, "ops": []any{map[string]any{
			"OP_ID": "OP_INSTANCE_CREATE", "instance_name": "web2",
			"osparams_private": map[string]any{"api_token": "private-value"},
			"osparams_secret":  map[string]any{"root_password": "secret-value"},
		}},
		"status": "running", "summary": []any{"INSTANCE_CREATE(web2)"}, "opstatus": []any{"running"},
		"received_ts": []any{1.0, 2.0}, "start_ts": []any{1.0, 3.0}, "end_ts": nil,
		"oplog": []any{[]any{}}, "opresult": []any{nil},
	}
	h := newTestHandler(t, be, false)
	for _, tc := range []struct {
		name        string
		path        string
		c           *creds
		seesPrivate bool
	}{
		{"anonymous", "/2/jobs/8", nil, false},
		{"read user", "/2/jobs/8", asViewer, false},
		{"write user", "/2/jobs/8", asAdmin, true},
		{"anonymous bulk", "/2/jobs?bulk=1", nil, false},
		{"write user bulk", "/2/jobs?bulk=1", asAdmin, true},
		{"read user query", "/2/query/job?fields=id,ops", asViewer, false},
		{"write user query", "/2/query/job?fields=id,ops", asAdmin, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := do(t, h, http.MethodGet, tc.path, "", tc.c)
			if rec.Code != http.StatusOK {
				t.Fatalf("status %d: %s", rec.Code, rec.Body)
			}
			body := rec.Body.String()
			if strings.Contains(body, "secret-value") {
				t.Errorf("the secret parameter is answered: %s", body)
			}
			if got := strings.Contains(body, "private-value"); got != tc.seesPrivate {
				t.Errorf("private value shown = %v, want %v: %s", got, tc.seesPrivate, body)
			}
			if !tc.seesPrivate && !strings.Contains(body, `"api_token":"\u003credacted\u003e"`) {
				t.Errorf("the private parameter's name with the redaction marker is missing: %s", body)
			}
			if !strings.Contains(body, `"instance_name":"web2"`) {
				t.Errorf("other parameters lost: %s", body)
			}
		})
	}
}
