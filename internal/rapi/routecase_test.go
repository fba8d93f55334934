package rapi

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// routeCase is one request of a route table and what must come of it.
type routeCase struct {
	name         string
	method, path string
	body         string
	as           *creds
	status       int
	want         string         // substring of the JSON answer
	op           map[string]any // parameters the submitted opcode must have; nil: no job
}

// opID is the op of a case that checks only which opcode was submitted.
func opID(id string) map[string]any { return map[string]any{"OP_ID": id} }

// runRoutes serves each case to a handler over a fresh fake backend and
// checks what every route shares: the status; a JSON answer holding want; an
// error answer in Ganeti's shape, with the Basic challenge on 401; and the
// submitted opcode, none when op is nil, else one carrying op's parameters
// as JSON decodes them (as corrald sees them). more, when not nil, checks what
// is particular to a table; op is nil there when no job was submitted.
func runRoutes(t *testing.T, tests []routeCase, more func(t *testing.T, tc routeCase, op map[string]any)) {
	t.Helper()
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			be := newFakeBackend()
			rec := do(t, newTestHandler(t, be, false), tc.method, tc.path, tc.body, tc.as)
			if rec.Code != tc.status {
				t.Fatalf("status %d, want %d; body %s", rec.Code, tc.status, rec.Body)
			}
			decode(t, rec)
			if !strings.Contains(rec.Body.String(), tc.want) {
				t.Errorf("body %s does not contain %s", rec.Body, tc.want)
			}
			if tc.status >= 400 {
				var e map[string]any
				_ = json.Unmarshal(rec.Body.Bytes(), &e)
				if e["code"] != float64(tc.status) || e["explain"] == "" || e["message"] == "" {
					t.Errorf("error body %v", e)
				}
			}
			if tc.status == 401 && rec.Header().Get("WWW-Authenticate") != `Basic realm="Ganeti Remote API"` {
				t.Errorf("WWW-Authenticate = %q", rec.Header().Get("WWW-Authenticate"))
			}
			op := plainOp(t, be)
			switch {
			case tc.op == nil && op != nil:
				t.Fatalf("unexpected job %v", op)
			case tc.op != nil && op == nil:
				t.Fatal("no job submitted")
			}
			for k, v := range tc.op {
				if !reflect.DeepEqual(op[k], v) {
					t.Errorf("%s = %#v, want %#v", k, op[k], v)
				}
			}
			if more != nil {
				more(t, tc, op)
			}
		})
	}
}
