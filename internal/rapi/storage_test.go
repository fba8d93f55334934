package rapi

import "testing"

// TestNodeStorageRoutes: the storage resources submit Ganeti's opcodes
// with Ganeti's parameters, the query as a job for writers only.
func TestNodeStorageRoutes(t *testing.T) {
	runRoutes(t, []routeCase{
		{"query", "GET", "/2/nodes/node1/storage?storage_type=file&output_fields=name,size,free", "", asAdmin, 200, `101`,
			map[string]any{"OP_ID": "OP_NODE_QUERY_STORAGE", "nodes": []any{"node1"}, "storage_type": "file", "output_fields": []any{"name", "size", "free"}}},
		{"query default type", "GET", "/2/nodes/node1/storage?output_fields=name", "", asAdmin, 200, `101`,
			map[string]any{"OP_ID": "OP_NODE_QUERY_STORAGE", "storage_type": nil, "output_fields": []any{"name"}}},
		{"query no fields", "GET", "/2/nodes/node1/storage?storage_type=file", "", asAdmin, 400, `Missing the required &#x27;output_fields&#x27; parameter`, nil},
		{"query needs write", "GET", "/2/nodes/node1/storage?output_fields=name", "", asViewer, 403, ``, nil},
		{"query anonymous", "GET", "/2/nodes/node1/storage?output_fields=name", "", nil, 401, ``, nil},
		{"modify", "PUT", "/2/nodes/node1/storage/modify?storage_type=lvm-pv&name=/dev/sda1&allocatable=0", "", asAdmin, 200, `101`,
			map[string]any{"OP_ID": "OP_NODE_MODIFY_STORAGE", "node_name": "node1", "storage_type": "lvm-pv", "name": "/dev/sda1", "changes": map[string]any{"allocatable": false}}},
		{"modify no change", "PUT", "/2/nodes/node1/storage/modify?storage_type=file&name=/srv", "", asAdmin, 200, `101`,
			map[string]any{"OP_ID": "OP_NODE_MODIFY_STORAGE", "changes": map[string]any{}}},
		{"modify bad allocatable", "PUT", "/2/nodes/node1/storage/modify?storage_type=lvm-pv&name=x&allocatable=yes", "", asAdmin, 400, `Invalid value for the &#x27;allocatable&#x27; parameter`, nil},
		{"modify no name", "PUT", "/2/nodes/node1/storage/modify?storage_type=file", "", asAdmin, 400, `Missing the required &#x27;name&#x27; parameter`, nil},
		{"modify GET", "GET", "/2/nodes/node1/storage/modify", "", asAdmin, 501, `Method GET`, nil},
		{"repair", "PUT", "/2/nodes/node1/storage/repair?storage_type=lvm-vg&name=xenvg", "", asAdmin, 200, `101`,
			map[string]any{"OP_ID": "OP_REPAIR_NODE_STORAGE", "node_name": "node1", "storage_type": "lvm-vg", "name": "xenvg"}},
		{"repair no name", "PUT", "/2/nodes/node1/storage/repair?storage_type=lvm-vg", "", asAdmin, 400, `Missing the required &#x27;name&#x27; parameter`, nil},
		{"repair viewer", "PUT", "/2/nodes/node1/storage/repair?storage_type=lvm-vg&name=xenvg", "", asViewer, 403, ``, nil},
	}, nil)
}
