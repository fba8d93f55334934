package rapiclient

import (
	"net/url"
	"reflect"
	"strings"
	"testing"
)

func TestSubmitRequestBackup(t *testing.T) {
	for _, tc := range []struct {
		name   string
		op     map[string]any
		method string
		path   string
		query  url.Values
		body   any
	}{
		{"prepare", map[string]any{"OP_ID": "OP_BACKUP_PREPARE", "instance_name": "web1", "mode": "remote"},
			"PUT", "/2/instances/web1/prepare-export", url.Values{"mode": {"remote"}}, nil},
		{"export", map[string]any{"OP_ID": "OP_BACKUP_EXPORT", "instance_name": "web1", "mode": "local", "target_node": "node2",
			"shutdown": false, "compress": "zstd", "reason": []any{}},
			"PUT", "/2/instances/web1/export", nil,
			map[string]any{"mode": "local", "destination": "node2", "shutdown": false, "compress": "zstd"}},
		{"export dry run", map[string]any{"OP_ID": "OP_BACKUP_EXPORT", "instance_name": "web1", "target_node": "node2", "dry_run": true},
			"PUT", "/2/instances/web1/export", url.Values{"dry-run": {"1"}}, map[string]any{"destination": "node2"}},
		{"remove", map[string]any{"OP_ID": "OP_BACKUP_REMOVE", "instance_name": "web1"},
			"DELETE", "/2/instances/web1/export", nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, err := SubmitRequest([]map[string]any{tc.op})
			if err != nil {
				t.Fatal(err)
			}
			if req.Method != tc.method || req.Path != tc.path || !reflect.DeepEqual(req.Query, tc.query) || !reflect.DeepEqual(req.Body, tc.body) {
				t.Errorf("got %s %s ?%v body %#v\nwant %s %s ?%v body %#v", req.Method, req.Path, req.Query, req.Body,
					tc.method, tc.path, tc.query, tc.body)
			}
		})
	}
	// Listing exports has no RAPI resource: the refusal says so.
	if _, err := SubmitRequest([]map[string]any{{"OP_ID": "OP_BACKUP_QUERY", "nodes": []any{}}}); err == nil ||
		!strings.Contains(err.Error(), "OP_BACKUP_QUERY is not available over RAPI") {
		t.Fatalf("OP_BACKUP_QUERY: %v", err)
	}
}
