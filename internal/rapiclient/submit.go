package rapiclient

import (
	"fmt"
	"net/http"
	"net/url"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/corral/corral/internal/ecode"
)

// Request is one RAPI request: method, path, query and JSON body (nil for
// none).
type Request struct {
	Method string
	Path   string
	Query  url.Values
	Body   any
}

// opRoute says how an opcode travels as a RAPI request, in the shape of
// Ganeti's RAPI specification, so the same request suits a Ganeti server.
type opRoute struct {
	method string
	// path names opcode parameters in braces: "/2/instances/{instance_name}".
	path string
	// query maps opcode parameters to query arguments; booleans go as 1
	// (false is every one's default, so it is left out).
	query map[string]string
	// body lists the parameters the body carries; nil means all the others.
	body []string
	// prepare, if set, reshapes the opcode before the rest is applied.
	prepare func(op map[string]any) error
	// finish, if set, turns the body parameters into the body sent.
	finish func(body map[string]any) any
}

var dryRun = map[string]string{"dry_run": "dry-run"}

// opRoutes are the opcodes a job submitted over RAPI may hold.
var opRoutes = map[string]opRoute{
	"OP_INSTANCE_CREATE": {method: http.MethodPost, path: "/2/instances", query: dryRun,
		finish: func(b map[string]any) any { b["__version__"] = 1; return b }},
	// The creations travel as POST /2/instances bodies without their OP_ID.
	"OP_INSTANCE_MULTI_ALLOC": {method: http.MethodPost, path: "/2/instances-multi-alloc", query: dryRun,
		finish: func(b map[string]any) any {
			if l, ok := b["instances"].([]any); ok {
				items := make([]any, len(l))
				for i, it := range l {
					m, ok := it.(map[string]any)
					if !ok {
						items[i] = it
						continue
					}
					c := make(map[string]any, len(m))
					for k, v := range m {
						if k != "OP_ID" {
							c[k] = v
						}
					}
					items[i] = c
				}
				b["instances"] = items
			}
			return b
		}},
	"OP_INSTANCE_REMOVE": {method: http.MethodDelete, path: "/2/instances/{instance_name}", query: dryRun},
	"OP_INSTANCE_STARTUP": {method: http.MethodPut, path: "/2/instances/{instance_name}/startup",
		query: map[string]string{"dry_run": "dry-run", "force": "force", "no_remember": "no_remember"},
		body:  []string{"depends"}},
	"OP_INSTANCE_SHUTDOWN": {method: http.MethodPut, path: "/2/instances/{instance_name}/shutdown",
		query: map[string]string{"dry_run": "dry-run", "no_remember": "no_remember"},
		body:  []string{"force", "ignore_offline_nodes", "timeout", "admin_state_source"}},
	"OP_INSTANCE_REBOOT": {method: http.MethodPost, path: "/2/instances/{instance_name}/reboot",
		query: map[string]string{"dry_run": "dry-run", "ignore_secondaries": "ignore_secondaries", "reboot_type": "type"},
		body:  []string{"shutdown_timeout"}},
	// RAPI's reinstall is one job that shuts the instance down, reinstalls
	// it and (here: not) starts it again.
	"OP_INSTANCE_REINSTALL": {method: http.MethodPost, path: "/2/instances/{instance_name}/reinstall",
		body: []string{"os_type", "osparams"},
		finish: func(b map[string]any) any {
			out := map[string]any{"start": false}
			if v, ok := b["os_type"]; ok {
				out["os"] = v
			}
			if v, ok := b["osparams"]; ok {
				out["osparams"] = v
			}
			return out
		}},
	"OP_INSTANCE_RENAME": {method: http.MethodPut, path: "/2/instances/{instance_name}/rename", query: dryRun,
		body: []string{"new_name", "name_check", "ip_check"}},
	"OP_INSTANCE_SET_PARAMS": {method: http.MethodPut, path: "/2/instances/{instance_name}/modify", query: dryRun},
	"OP_INSTANCE_QUERY_DATA": {method: http.MethodGet, path: "/2/instances/{instance_name}/info",
		query: map[string]string{"static": "static"}, body: []string{},
		prepare: func(op map[string]any) error {
			l, ok := op["instances"].([]any)
			if !ok || len(l) != 1 {
				return notOverRAPI("instance information on anything but one named instance")
			}
			op["instance_name"] = l[0]
			delete(op, "instances")
			return nil
		}},
	"OP_INSTANCE_ACTIVATE_DISKS": {method: http.MethodPut, path: "/2/instances/{instance_name}/activate-disks",
		query: map[string]string{"ignore_size": "ignore_size"}, body: []string{}},
	"OP_INSTANCE_DEACTIVATE_DISKS": {method: http.MethodPut, path: "/2/instances/{instance_name}/deactivate-disks",
		query: map[string]string{"force": "force"}, body: []string{}},
	"OP_INSTANCE_RECREATE_DISKS": {method: http.MethodPost, path: "/2/instances/{instance_name}/recreate-disks",
		body: []string{"disks", "nodes", "iallocator"}},
	"OP_INSTANCE_GROW_DISK": {method: http.MethodPost, path: "/2/instances/{instance_name}/disk/{disk}/grow",
		body: []string{"amount", "absolute", "wait_for_sync", "ignore_ipolicy"}},
	"OP_INSTANCE_FAILOVER": {method: http.MethodPut, path: "/2/instances/{instance_name}/failover",
		body: []string{"shutdown_timeout", "ignore_consistency", "target_node", "iallocator", "cleanup", "ignore_ipolicy"}},
	"OP_INSTANCE_MIGRATE": {method: http.MethodPut, path: "/2/instances/{instance_name}/migrate",
		body: []string{"mode", "live", "target_node", "cleanup", "allow_failover", "allow_runtime_changes",
			"ignore_ipolicy", "iallocator", "ignore_hvversions"}},

	// Exports; listing them (OP_BACKUP_QUERY) has no RAPI resource.
	"OP_BACKUP_PREPARE": {method: http.MethodPut, path: "/2/instances/{instance_name}/prepare-export",
		query: map[string]string{"dry_run": "dry-run", "mode": "mode"}, body: []string{}},
	// Ganeti's RAPI documents the export's target as "destination".
	"OP_BACKUP_EXPORT": {method: http.MethodPut, path: "/2/instances/{instance_name}/export", query: dryRun,
		finish: func(b map[string]any) any {
			if v, ok := b["target_node"]; ok {
				b["destination"] = v
				delete(b, "target_node")
			}
			return b
		}},
	"OP_BACKUP_REMOVE": {method: http.MethodDelete, path: "/2/instances/{instance_name}/export", query: dryRun, body: []string{}},

	"OP_NODE_SET_PARAMS":     {method: http.MethodPost, path: "/2/nodes/{node_name}/modify", query: dryRun},
	"OP_NODE_POWERCYCLE":     {method: http.MethodPost, path: "/2/nodes/{node_name}/powercycle", query: map[string]string{"force": "force"}, body: []string{}},
	"OP_NODE_QUERY_STORAGE":  nodeQueryStorageRoute,
	"OP_NODE_MODIFY_STORAGE": nodeModifyStorageRoute,
	"OP_REPAIR_NODE_STORAGE": repairNodeStorageRoute,

	"OP_GROUP_ADD":          {method: http.MethodPost, path: "/2/groups", query: dryRun},
	"OP_GROUP_REMOVE":       {method: http.MethodDelete, path: "/2/groups/{group_name}", query: dryRun, body: []string{}},
	"OP_GROUP_SET_PARAMS":   {method: http.MethodPut, path: "/2/groups/{group_name}/modify", query: dryRun},
	"OP_GROUP_RENAME":       {method: http.MethodPut, path: "/2/groups/{group_name}/rename", query: dryRun, body: []string{"new_name"}},
	"OP_GROUP_ASSIGN_NODES": {method: http.MethodPut, path: "/2/groups/{group_name}/assign-nodes", query: map[string]string{"dry_run": "dry-run", "force": "force"}, body: []string{"nodes"}},

	"OP_NETWORK_ADD":        {method: http.MethodPost, path: "/2/networks", query: dryRun},
	"OP_NETWORK_REMOVE":     {method: http.MethodDelete, path: "/2/networks/{network_name}", query: dryRun},
	"OP_NETWORK_SET_PARAMS": {method: http.MethodPut, path: "/2/networks/{network_name}/modify"},
	"OP_NETWORK_CONNECT":    {method: http.MethodPut, path: "/2/networks/{network_name}/connect", query: dryRun},
	"OP_NETWORK_DISCONNECT": {method: http.MethodPut, path: "/2/networks/{network_name}/disconnect", query: dryRun},

	"OP_CLUSTER_SET_PARAMS":  {method: http.MethodPut, path: "/2/modify", query: dryRun},
	"OP_CLUSTER_REDIST_CONF": {method: http.MethodPut, path: "/2/redistribute-config", body: []string{}},
	"OP_TAGS_SET":            tagsRoute(http.MethodPut),
	"OP_TAGS_DEL":            tagsRoute(http.MethodDelete),
}

// tagsRoute sends the tags as repeated ?tag= arguments, on the tags
// resource of the object the opcode names.
func tagsRoute(method string) opRoute {
	return opRoute{method: method, path: "{tags_path}", query: dryRun, body: []string{},
		prepare: func(op map[string]any) error {
			kind, _ := op["kind"].(string)
			name, _ := op["name"].(string)
			if kind != "cluster" && name == "" {
				return ecode.Errorf(ecode.Inval, "a %s tag needs the object's name", kind)
			}
			p, err := tagsPath(kind, name)
			if err != nil {
				return err
			}
			op["tags_path"] = p
			delete(op, "kind")
			delete(op, "name")
			return nil
		}}
}

// SubmitRequest is the RAPI request that submits a job of ops, which must
// be a single opcode that has a RAPI resource. The server builds the reason
// trail itself, so the opcode's own is not sent.
func SubmitRequest(ops []map[string]any) (*Request, error) {
	if len(ops) != 1 {
		return nil, notOverRAPI(fmt.Sprintf("a job of %d opcodes", len(ops)))
	}
	id, _ := ops[0]["OP_ID"].(string)
	rt, ok := opRoutes[id]
	if !ok {
		if id == "" {
			return nil, ecode.Errorf(ecode.Inval, "opcode without OP_ID")
		}
		return nil, notOverRAPI(id)
	}
	op := make(map[string]any, len(ops[0]))
	for k, v := range ops[0] {
		if k != "OP_ID" && k != "reason" {
			op[k] = v
		}
	}
	if rt.prepare != nil {
		if err := rt.prepare(op); err != nil {
			return nil, err
		}
	}
	req := &Request{Method: rt.method}
	path, err := fillPath(rt.path, op)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", id, err)
	}
	req.Path = path
	if t, ok := op["tags"].([]any); ok && (id == "OP_TAGS_SET" || id == "OP_TAGS_DEL") {
		req.Query = url.Values{}
		for _, tag := range t {
			s, ok := tag.(string)
			if !ok {
				return nil, ecode.Errorf(ecode.Inval, "%s: tags must be strings", id)
			}
			req.Query.Add("tag", s)
		}
		delete(op, "tags")
	}
	for param, arg := range rt.query {
		v, ok := op[param]
		if !ok {
			continue
		}
		delete(op, param)
		s, send, err := queryValue(v)
		if err != nil {
			return nil, ecode.Errorf(ecode.Inval, "%s: parameter %s: %v", id, param, err)
		}
		if send {
			if req.Query == nil {
				req.Query = url.Values{}
			}
			req.Query.Set(arg, s)
		}
	}
	body := map[string]any{}
	var dropped []string
	for k, v := range op {
		switch {
		case rt.body == nil || slices.Contains(rt.body, k):
			body[k] = v
		case !isZero(v):
			dropped = append(dropped, k)
		}
	}
	if len(dropped) > 0 {
		sort.Strings(dropped)
		return nil, notOverRAPI(fmt.Sprintf("%s with %s", id, strings.Join(dropped, ", ")))
	}
	switch {
	case rt.finish != nil:
		req.Body = rt.finish(body)
	case len(body) > 0:
		req.Body = body
	}
	return req, nil
}

// fillPath replaces each {param} with the opcode's value, escaped, and
// takes the parameter out of op.
func fillPath(tmpl string, op map[string]any) (string, error) {
	var b strings.Builder
	for {
		open := strings.IndexByte(tmpl, '{')
		if open < 0 {
			b.WriteString(tmpl)
			return b.String(), nil
		}
		end := strings.IndexByte(tmpl[open:], '}')
		if end < 0 {
			return "", fmt.Errorf("bad path template %q", tmpl)
		}
		end += open
		param := tmpl[open+1 : end]
		b.WriteString(tmpl[:open])
		var s string
		switch v := op[param].(type) {
		case string:
			s = v
		case float64:
			if v != float64(int64(v)) {
				return "", ecode.Errorf(ecode.Inval, "parameter %s must be an integer", param)
			}
			s = strconv.FormatInt(int64(v), 10)
		case int:
			s = strconv.Itoa(v)
		case int64:
			s = strconv.FormatInt(v, 10)
		}
		if s == "" {
			return "", ecode.Errorf(ecode.Inval, "missing parameter %s", param)
		}
		delete(op, param)
		if param == "tags_path" {
			b.WriteString(s) // built (and escaped) by tagsPath
		} else {
			b.WriteString(url.PathEscape(s))
		}
		tmpl = tmpl[end+1:]
	}
}

// queryValue renders a query argument; send is false for a false boolean
// or null, which RAPI reads as the default.
func queryValue(v any) (s string, send bool, err error) {
	switch v := v.(type) {
	case nil:
		return "", false, nil
	case bool:
		return "1", v, nil
	case string:
		return v, v != "", nil
	case float64:
		return strconv.FormatFloat(v, 'f', -1, 64), true, nil
	case int:
		return strconv.Itoa(v), true, nil
	case int64:
		return strconv.FormatInt(v, 10), true, nil
	}
	return "", false, fmt.Errorf("a %T cannot go in a query", v)
}

// isZero reports a value that leaves a parameter at its default (false,
// 0, "", null, an empty list or dict), which may be left out.
func isZero(v any) bool {
	if v == nil {
		return true
	}
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Map, reflect.Slice, reflect.Array, reflect.String:
		return rv.Len() == 0
	}
	return rv.IsZero()
}
