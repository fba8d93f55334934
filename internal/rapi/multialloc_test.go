package rapi

import "testing"

// The answers' messages are HTML-escaped, as Ganeti's.

func TestInstancesMultiAllocRoute(t *testing.T) {
	one := `{"mode":"create","name":"a1","os":"noop","disk_template":"diskless","disks":[],"nics":[{}]}`
	tests := []routeCase{
		{"allocate", "POST", "/2/instances-multi-alloc?dry-run=1", `{"instances":[` + one + `],"iallocator":"hail"}`, asAdmin, 200, "101",
			map[string]any{"OP_ID": "OP_INSTANCE_MULTI_ALLOC", "dry_run": true, "iallocator": "hail",
				"instances": []any{map[string]any{"OP_ID": "OP_INSTANCE_CREATE", "mode": "create", "instance_name": "a1", "os_type": "noop",
					"disk_template": "diskless", "disks": []any{}, "nics": []any{map[string]any{}}}}}},
		{"no instances", "POST", "/2/instances-multi-alloc", `{"iallocator":"hail"}`, asAdmin, 400, "Request is missing required &#x27;instances&#x27; field in body", nil},
		{"both names", "POST", "/2/instances-multi-alloc", `{"instances":[{"name":"a","instance_name":"a"}]}`, asAdmin, 400, "Parameter &#x27;name&#x27; was renamed to &#x27;instance_name&#x27;, but both are specified", nil},
		{"not a creation", "POST", "/2/instances-multi-alloc", `{"instances":[{"name":"a","disks":[],"nics":[],"bogus":1}]}`, asAdmin, 400, "instances[0]: OP_INSTANCE_CREATE: unknown parameter &quot;bogus&quot;", nil},
		{"item not a dict", "POST", "/2/instances-multi-alloc", `{"instances":[1]}`, asAdmin, 400, "instances[0] is not a dictionary", nil},
		{"read-only user", "POST", "/2/instances-multi-alloc", `{"instances":[]}`, asViewer, 403, "", nil},
	}
	runRoutes(t, tests, nil)
}
