package rapiclient

import (
	"net/http"
	"strings"

	"github.com/corral/corral/internal/ecode"
)

// Node storage units: Ganeti's /2/nodes/N/storage resources take their
// parameters in the query, one node at a time.
var (
	nodeQueryStorageRoute = opRoute{method: http.MethodGet, path: "/2/nodes/{node_name}/storage",
		query: map[string]string{"storage_type": "storage_type", "output_fields": "output_fields"}, body: []string{},
		prepare: func(op map[string]any) error {
			nodes, _ := op["nodes"].([]any)
			if len(nodes) != 1 {
				return notOverRAPI("the storage units of anything but one named node")
			}
			op["node_name"] = nodes[0]
			delete(op, "nodes")
			fields, _ := op["output_fields"].([]any)
			names := make([]string, len(fields))
			for i, f := range fields {
				s, ok := f.(string)
				if !ok {
					return ecode.Errorf(ecode.Inval, "output_fields must be strings")
				}
				names[i] = s
			}
			op["output_fields"] = strings.Join(names, ",")
			return nil
		}}
	nodeModifyStorageRoute = opRoute{method: http.MethodPut, path: "/2/nodes/{node_name}/storage/modify",
		query: map[string]string{"storage_type": "storage_type", "name": "name", "allocatable": "allocatable"}, body: []string{},
		prepare: func(op map[string]any) error {
			changes, _ := op["changes"].(map[string]any)
			for k, v := range changes {
				allocatable, isBool := v.(bool)
				if k != "allocatable" || !isBool {
					return notOverRAPI("a storage change of " + k)
				}
				// The resource reads an integer; false must go as 0.
				op["allocatable"] = 0
				if allocatable {
					op["allocatable"] = 1
				}
			}
			delete(op, "changes")
			return nil
		}}
	repairNodeStorageRoute = opRoute{method: http.MethodPut, path: "/2/nodes/{node_name}/storage/repair",
		query: map[string]string{"storage_type": "storage_type", "name": "name"}, body: []string{}}
)
