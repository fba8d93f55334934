package rapi

import (
	"context"
	"encoding/json"
	"fmt"
	"html"
	"net/http"
	"slices"
	"testing"

	"github.com/corral/corral/internal/ecode"
)

// The fake's job filter rules: enough of corrald's to check what the
// handlers send and how they shape the answers.

func (f *fakeBackend) QueryFilters(_ context.Context, uuids, fields []string) ([][]any, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(uuids) == 0 {
		for id := range f.filters {
			uuids = append(uuids, id)
		}
		slices.Sort(uuids)
	}
	var out [][]any
	for _, id := range uuids {
		r, ok := f.filters[id]
		if !ok {
			return nil, ecode.Errorf(ecode.NoEnt, "Filter uuid %s not found", id)
		}
		row := make([]any, len(fields))
		for i, fl := range fields {
			row[i] = r[fl]
		}
		out = append(out, row)
	}
	return out, nil
}

func (f *fakeBackend) ReplaceFilter(_ context.Context, uuid string, priority int, predicates []any, action any, reason []any) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.filters == nil {
		f.filters = map[string]map[string]any{}
	}
	if uuid == "" {
		uuid = fmt.Sprintf("00000000-0000-0000-0000-%012d", len(f.filters)+1)
	}
	f.filters[uuid] = map[string]any{"uuid": uuid, "priority": priority, "predicates": predicates,
		"action": action, "reason_trail": reason, "watermark": 7}
	return uuid, nil
}

func (f *fakeBackend) DeleteFilter(_ context.Context, uuid string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.filters[uuid]; !ok {
		return ecode.Errorf(ecode.NoEnt, "Filter rule with UUID %s does not exist", uuid)
	}
	delete(f.filters, uuid)
	return nil
}

func TestFilterResources(t *testing.T) {
	be := newFakeBackend()
	h := newTestHandler(t, be, false)
	rec := do(t, h, http.MethodPost, "/2/filters", `{"priority": 3, "predicates": [["jobid", [">", "id", "watermark"]]], "action": "PAUSE", "reason": [["gnt:client", "", 1]]}`, asAdmin)
	if rec.Code != 200 {
		t.Fatalf("POST: %d %s", rec.Code, rec.Body)
	}
	var id string
	if err := json.Unmarshal(rec.Body.Bytes(), &id); err != nil || id == "" {
		t.Fatalf("POST answered %s", rec.Body)
	}
	if r := be.filters[id]; r["priority"] != 3 || r["action"] != "PAUSE" {
		t.Fatalf("stored %v", r)
	}
	// Defaults: priority 0, no predicates, CONTINUE.
	rec = do(t, h, http.MethodPut, "/2/filters/0b6d1f2e-6f3a-4c1e-9a53-3b6c1e0e8a11", `{}`, asAdmin)
	if r := be.filters["0b6d1f2e-6f3a-4c1e-9a53-3b6c1e0e8a11"]; rec.Code != 200 || r["action"] != "CONTINUE" || r["priority"] != 0 {
		t.Fatalf("PUT: %d %s, stored %v", rec.Code, rec.Body, r)
	}
	for body, msg := range map[string]string{
		`{"prio": 1}`:          "Invalid body parameters: filter rule doesn't support the parameter 'prio'",
		`{"priority": "high"}`: "'priority' parameter: Type is 'str', but 'int' is expected",
		`{"priority": 1.5}`:    "'priority' parameter: Type is 'float', but 'int' is expected",
		`{"predicates": {}}`:   "'predicates' parameter: Type is 'dict', but 'list' is expected",
		`{"reason": null}`:     "'reason' parameter: Type is 'NoneType', but 'list' is expected",
		`[1]`:                  "Invalid body contents, not a dictionary",
	} {
		rec := do(t, h, http.MethodPost, "/2/filters", body, asAdmin)
		var e struct{ Message string }
		_ = json.Unmarshal(rec.Body.Bytes(), &e)
		if rec.Code != 400 || html.UnescapeString(e.Message) != msg {
			t.Errorf("POST %s: %d %s, want 400 with %q", body, rec.Code, rec.Body, msg)
		}
	}
	if rec := do(t, h, http.MethodPost, "/2/filters", `{}`, asViewer); rec.Code != 403 {
		t.Errorf("POST by a reader: %d", rec.Code)
	}
	rec = do(t, h, http.MethodGet, "/2/filters", "", asViewer)
	var list []map[string]any
	if err := json.Unmarshal(rec.Body.Bytes(), &list); err != nil || len(list) != 2 || list[0]["uri"] != "/2/filters/"+id {
		t.Fatalf("GET list: %s", rec.Body)
	}
	rec = do(t, h, http.MethodGet, "/2/filters/"+id, "", asViewer)
	var one map[string]any
	if err := json.Unmarshal(rec.Body.Bytes(), &one); err != nil || one["action"] != "PAUSE" || len(one) != len(filterRuleFields) {
		t.Fatalf("GET one: %s", rec.Body)
	}
	if rec := do(t, h, http.MethodDelete, "/2/filters/"+id, "", asAdmin); rec.Code != 200 {
		t.Fatalf("DELETE: %d %s", rec.Code, rec.Body)
	}
	for _, m := range []string{http.MethodGet, http.MethodDelete} {
		if rec := do(t, h, m, "/2/filters/"+id, "", asAdmin); rec.Code != 404 {
			t.Errorf("%s of a deleted rule: %d", m, rec.Code)
		}
	}
}
