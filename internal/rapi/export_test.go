package rapi

import (
	"testing"
)

func TestExportRoutes(t *testing.T) {
	remoteDest := `[["192.0.2.7",1234,"magic0","hmac0","salt0"]]`
	tests := []routeCase{
		{"prepare remote", "PUT", "/2/instances/web1/prepare-export?mode=remote", "", asAdmin, 200, "101",
			map[string]any{"OP_ID": "OP_BACKUP_PREPARE", "instance_name": "web1", "mode": "remote"}},
		{"prepare local, body ignored", "PUT", "/2/instances/web1/prepare-export?mode=local", `{"mode":"remote"}`, asAdmin, 200, "101",
			map[string]any{"OP_ID": "OP_BACKUP_PREPARE", "mode": "local"}},
		{"prepare without mode", "PUT", "/2/instances/web1/prepare-export", "", asAdmin, 400, "mode", nil},
		{"prepare read-only user", "PUT", "/2/instances/web1/prepare-export?mode=remote", "", asViewer, 403, "", nil},
		{"prepare anonymous", "PUT", "/2/instances/web1/prepare-export?mode=remote", "", nil, 401, "", nil},
		{"prepare GET", "GET", "/2/instances/web1/prepare-export?mode=remote", "", asAdmin, 501, "Method GET", nil},

		{"export local defaults", "PUT", "/2/instances/web1/export", `{"destination":"node2"}`, asAdmin, 200, "101",
			map[string]any{"OP_ID": "OP_BACKUP_EXPORT", "instance_name": "web1", "target_node": "node2", "mode": "local",
				"shutdown": true, "shutdown_timeout": 120.0, "remove_instance": false, "compress": "none"}},
		{"export local options", "PUT", "/2/instances/web1/export?dry-run=1",
			`{"target_node":"node2","shutdown":false,"remove_instance":true,"ignore_remove_failures":true,"compress":"zstd","shutdown_timeout":5}`,
			asAdmin, 200, "101",
			map[string]any{"target_node": "node2", "shutdown": false, "remove_instance": true, "ignore_remove_failures": true,
				"compress": "zstd", "shutdown_timeout": 5.0, "dry_run": true}},
		{"export remote", "PUT", "/2/instances/web1/export",
			`{"mode":"remote","destination":` + remoteDest + `,"x509_key_name":["x509-1-a","hmac","salt"],"destination_x509_ca":"X-Ganeti-Signature: s/h\n\n-----BEGIN CERTIFICATE-----"}`,
			asAdmin, 200, "101",
			map[string]any{"mode": "remote", "target_node": mustJSONValue(remoteDest),
				"x509_key_name": []any{"x509-1-a", "hmac", "salt"}, "destination_x509_ca": "X-Ganeti-Signature: s/h\n\n-----BEGIN CERTIFICATE-----"}},
		{"export destination and target_node", "PUT", "/2/instances/web1/export", `{"destination":"a","target_node":"b"}`, asAdmin, 400, "renamed", nil},
		{"export instance in body", "PUT", "/2/instances/web1/export", `{"destination":"a","instance_name":"x"}`, asAdmin, 400, "static parameters instance_name", nil},
		{"export unknown key", "PUT", "/2/instances/web1/export", `{"destination":"a","nosuch":1}`, asAdmin, 400, "nosuch", nil},
		{"export bad body", "PUT", "/2/instances/web1/export", `["node2"]`, asAdmin, 400, "not a dictionary", nil},
		{"export read-only user", "PUT", "/2/instances/web1/export", `{"destination":"a"}`, asViewer, 403, "", nil},
		{"export POST", "POST", "/2/instances/web1/export", `{}`, asAdmin, 501, "Method POST", nil},

		{"remove export", "DELETE", "/2/instances/web1/export", "", asAdmin, 200, "101",
			map[string]any{"OP_ID": "OP_BACKUP_REMOVE", "instance_name": "web1"}},
		{"remove export body ignored", "DELETE", "/2/instances/web1/export", `{"instance_name":"other"}`, asAdmin, 200, "101",
			map[string]any{"OP_ID": "OP_BACKUP_REMOVE", "instance_name": "web1"}},
		{"remove export read-only user", "DELETE", "/2/instances/web1/export", "", asViewer, 403, "", nil},

		{"create remote-import", "POST", "/2/instances",
			`{"__version__":1,"mode":"remote-import","name":"web9","os":"noop","disk_template":"file","disks":[{"size":1024}],"nics":[],
			  "pnode":"node1","source_handshake":[0,"hmac","salt"],"source_x509_ca":"X-Ganeti-Signature: s/h\n\nPEM",
			  "source_instance_name":"web1","source_shutdown_timeout":60,"compress":"gzip"}`,
			asAdmin, 200, "101",
			map[string]any{"OP_ID": "OP_INSTANCE_CREATE", "mode": "remote-import", "instance_name": "web9",
				"source_handshake": []any{0.0, "hmac", "salt"}, "source_x509_ca": "X-Ganeti-Signature: s/h\n\nPEM",
				"source_instance_name": "web1", "source_shutdown_timeout": 60.0, "compress": "gzip"}},
		{"create import", "POST", "/2/instances",
			`{"__version__":1,"mode":"import","name":"web9","disk_template":"file","disks":[],"nics":[],"pnode":"node1",
			  "src_node":"node2","src_path":"/srv/corral/export/web1"}`,
			asAdmin, 200, "101",
			map[string]any{"mode": "import", "src_node": "node2", "src_path": "/srv/corral/export/web1"}},
	}
	absent := map[string][]string{
		"export local defaults": {"destination", "x509_key_name", "dry_run"},
		"remove export":         {"dry_run"},
	}
	runRoutes(t, tests, func(t *testing.T, tc routeCase, op map[string]any) {
		for _, k := range absent[tc.name] {
			if _, ok := op[k]; ok {
				t.Errorf("%s present: %v", k, op)
			}
		}
	})
}

func mustJSONValue(s string) any {
	v, err := DecodeBody([]byte(s))
	if err != nil {
		panic(err)
	}
	return v
}
