package rapi

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/corral/corral/internal/ecode"
)

const testUsers = `
# comment
admin  secret write
viewer {cleartext}look read
nobody pw
`

type creds struct{ user, pass string }

var (
	asAdmin  = &creds{"admin", "secret"}
	asViewer = &creds{"viewer", "look"}
	asNobody = &creds{"nobody", "pw"}
	asWrong  = &creds{"admin", "nope"}
)

func newTestHandler(t *testing.T, be *fakeBackend, requireAuth bool) *Handler {
	t.Helper()
	return NewHandler(Config{Backend: be, Users: ParseUsers([]byte(testUsers)), RequireAuth: requireAuth,
		Now: func() time.Time { return time.Unix(100, 5) }})
}

func do(t *testing.T, h http.Handler, method, path, body string, c *creds) *httptest.ResponseRecorder {
	t.Helper()
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if c != nil {
		req.SetBasicAuth(c.user, c.pass)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

func decode(t *testing.T, rec *httptest.ResponseRecorder) any {
	t.Helper()
	if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
		t.Fatalf("Content-Type = %q", ct)
	}
	var v any
	if err := json.Unmarshal(rec.Body.Bytes(), &v); err != nil {
		t.Fatalf("body %q: %v", rec.Body.String(), err)
	}
	return v
}

func TestRoutes(t *testing.T) {
	tests := []routeCase{
		{"root", "GET", "/", "", nil, 200, "null", nil},
		{"version", "GET", "/version", "", nil, 200, "2", nil},
		{"features", "GET", "/2/features", "", nil, 200, `"instance-create-reqv1"`, nil},
		{"info aliases", "GET", "/2/info", "", nil, 200, `"vg_name":"v"`, nil},
		{"instances list", "GET", "/2/instances", "", nil, 200, `[{"id":"web1","uri":"/2/instances/web1"}]`, nil},
		{"instances bulk", "GET", "/2/instances?bulk=1", "", nil, 200, `"memory":128`, nil},
		{"bad bulk", "GET", "/2/instances?bulk=yes", "", nil, 400, `Invalid value for the &#x27;bulk&#x27; parameter`, nil},
		{"instance", "GET", "/2/instances/web1", "", nil, 200, `"status":"running"`, nil},
		{"instance missing", "GET", "/2/instances/nope", "", nil, 404, `"message":"Not Found"`, nil},
		{"bad name", "GET", "/2/instances/a%20b", "", nil, 404, `Nothing matches`, nil},
		{"trailing slash", "GET", "/2/instances/", "", nil, 404, ``, nil},
		{"no path", "GET", "/2/nosuchthing", "", nil, 404, `"explain":"Nothing matches the given URI"`, nil},
		{"method", "DELETE", "/2/info", "", asAdmin, 501, `Method DELETE is unsupported for path /2/info`, nil},
		{"other method", "PATCH", "/2/info", "", nil, 501, `Unsupported method`, nil},
		{"networks", "GET", "/2/networks", "", nil, 200, `[{"name":"net1","uri":"/2/networks/net1"}]`, nil},
		{"network", "GET", "/2/networks/net1", "", nil, 200, `"external_reservations":"192.0.2.0, 192.0.2.1, 192.0.2.7"`, nil},
		{"network missing", "GET", "/2/networks/nope", "", nil, 404, ``, nil},
		{"network rename is not Ganeti 3.0's", "PUT", "/2/networks/net1/rename", "", asAdmin, 404, ``, nil},
		{"network add", "POST", "/2/networks?dry-run=1", `{"name":"net2","network":"10.0.0.0/24"}`, asAdmin, 200, `101`, opID("OP_NETWORK_ADD")},
		{"network connect", "PUT", "/2/networks/net1/connect", `{"group_name":"default","network_mode":"bridged","network_link":"br0"}`, asAdmin, 200, `101`, opID("OP_NETWORK_CONNECT")},
		{"network disconnect", "PUT", "/2/networks/net1/disconnect", `{"group_name":"default"}`, asAdmin, 200, `101`, opID("OP_NETWORK_DISCONNECT")},
		{"network modify", "PUT", "/2/networks/net1/modify", `{"gateway":"none"}`, asAdmin, 200, `101`, opID("OP_NETWORK_SET_PARAMS")},
		{"network remove", "DELETE", "/2/networks/net1", "", asAdmin, 200, `101`, opID("OP_NETWORK_REMOVE")},
		{"migrate", "PUT", "/2/instances/web1/migrate", `{"mode":"live","target_node":"node2","cleanup":false,"allow_failover":true}`, asAdmin, 200, `101`,
			map[string]any{"OP_ID": "OP_INSTANCE_MIGRATE", "instance_name": "web1", "mode": "live", "target_node": "node2", "cleanup": false, "allow_failover": true}},
		{"migrate bad param", "PUT", "/2/instances/web1/migrate", `{"bogus":1}`, asAdmin, 400, `Invalid body parameters`, nil},
		{"migrate POST", "POST", "/2/instances/web1/migrate", `{}`, asAdmin, 501, `Method POST`, nil},
		{"failover", "PUT", "/2/instances/web1/failover", `{"ignore_consistency":true,"shutdown_timeout":30}`, asAdmin, 200, `101`,
			map[string]any{"OP_ID": "OP_INSTANCE_FAILOVER", "instance_name": "web1", "ignore_consistency": true, "shutdown_timeout": float64(30)}},
		{"recreate-disks", "POST", "/2/instances/web1/recreate-disks", `{"disks":[[0,{"size":2048}]],"nodes":["node2"]}`, asAdmin, 200, `101`,
			map[string]any{"OP_ID": "OP_INSTANCE_RECREATE_DISKS", "instance_name": "web1", "disks": []any{[]any{float64(0), map[string]any{"size": float64(2048)}}}, "nodes": []any{"node2"}}},
		{"recreate-disks PUT", "PUT", "/2/instances/web1/recreate-disks", `{}`, asAdmin, 501, `Method PUT`, nil},
		{"replace-disks 501", "POST", "/2/instances/web1/replace-disks", "", asAdmin, 501, `OP_INSTANCE_REPLACE_DISKS`, nil},
		{"instance tags", "GET", "/2/instances/web1/tags", "", nil, 200, `["a:instance"]`, nil},
		{"instance tags missing", "GET", "/2/instances/nope/tags", "", nil, 404, ``, nil},
		{"info job", "GET", "/2/instances/web1/info?static=1", "", nil, 200, `101`, opID("OP_INSTANCE_QUERY_DATA")},
		{"startup", "PUT", "/2/instances/web1/startup?force=1", "", asAdmin, 200, `101`, opID("OP_INSTANCE_STARTUP")},
		{"shutdown", "PUT", "/2/instances/web1/shutdown?dry-run=1", `{"timeout":0}`, asAdmin, 200, `101`, opID("OP_INSTANCE_SHUTDOWN")},
		{"shutdown static clash", "PUT", "/2/instances/web1/shutdown", `{"instance_name":"x"}`, asAdmin, 400, `Can&#x27;t overwrite static parameters instance_name`, nil},
		{"shutdown reason in body", "PUT", "/2/instances/web1/shutdown", `{"reason":[]}`, asAdmin, 400, `static parameters reason`, nil},
		{"shutdown bad param", "PUT", "/2/instances/web1/shutdown", `{"bogus":1}`, asAdmin, 400, `Invalid body parameters`, nil},
		{"shutdown bad type", "PUT", "/2/instances/web1/shutdown", `{"timeout":"x"}`, asAdmin, 400, `Invalid body parameters`, nil},
		{"shutdown not dict", "PUT", "/2/instances/web1/shutdown", `"x"`, asAdmin, 400, `not a dictionary`, nil},
		{"reboot", "POST", "/2/instances/web1/reboot?type=hard", "", asAdmin, 200, `101`, opID("OP_INSTANCE_REBOOT")},
		{"reboot PUT", "PUT", "/2/instances/web1/reboot", "", asAdmin, 501, `Method PUT`, nil},
		{"delete", "DELETE", "/2/instances/web1?dry-run=1", "", asAdmin, 200, `101`, opID("OP_INSTANCE_REMOVE")},
		{"create", "POST", "/2/instances", `{"__version__":1,"mode":"create","name":"new1","os":"noop","disks":[],"nics":[],"pnode":"node1"}`, asAdmin, 200, `101`, opID("OP_INSTANCE_CREATE")},
		{"create v0", "POST", "/2/instances", `{"mode":"create"}`, asAdmin, 400, `version 0 is no longer supported`, nil},
		{"create v2", "POST", "/2/instances", `{"__version__":2}`, asAdmin, 400, `Unsupported request data version`, nil},
		{"create missing name", "POST", "/2/instances", `{"__version__":1,"mode":"create","disks":[],"nics":[]}`, asAdmin, 400, `Invalid body parameters`, nil},
		{"create dry_run in body", "POST", "/2/instances?dry-run=1", `{"__version__":1,"mode":"create","name":"n","disks":[],"nics":[],"dry_run":true}`, asAdmin, 400, `static parameters dry_run`, nil},
		{"bad json", "POST", "/2/instances", `{`, asAdmin, 400, `Unable to parse JSON data`, nil},
		{"nodes", "GET", "/2/nodes", "", nil, 200, `[{"id":"node1","uri":"/2/nodes/node1"}]`, nil},
		{"nodes bulk", "GET", "/2/nodes?bulk=1", "", nil, 200, `"cnos":null`, nil},
		{"node", "GET", "/2/nodes/node1", "", nil, 200, `"secondary_ip":"192.0.2.1"`, nil},
		{"node missing", "GET", "/2/nodes/nope", "", nil, 404, ``, nil},
		{"node role", "GET", "/2/nodes/node1/role", "", nil, 200, `"master"`, nil},
		{"node role set", "PUT", "/2/nodes/node1/role?auto-promote=1", `"drained"`, asAdmin, 200, `101`, opID("OP_NODE_SET_PARAMS")},
		{"node role master", "PUT", "/2/nodes/node1/role", `"master"`, asAdmin, 400, `Can&#x27;t set &#x27;master&#x27; role`, nil},
		{"node role not string", "PUT", "/2/nodes/node1/role", `{"role":"drained"}`, asAdmin, 400, `role string`, nil},
		{"rename", "PUT", "/2/instances/web1/rename", `{"new_name":"web2"}`, asAdmin, 200, `101`, opID("OP_INSTANCE_RENAME")},
		{"rename no name", "PUT", "/2/instances/web1/rename", `{}`, asAdmin, 400, `Invalid body parameters`, nil},
		{"modify", "PUT", "/2/instances/web1/modify", `{"custom_beparams":{"vcpus":2}}`, asAdmin, 200, `101`, opID("OP_INSTANCE_SET_PARAMS")},
		{"modify both names", "PUT", "/2/instances/web1/modify", `{"custom_beparams":{},"beparams":{}}`, asAdmin, 400, `renamed`, nil},
		{"reinstall", "POST", "/2/instances/web1/reinstall", `{"os":"noop","start":false}`, asAdmin, 200, `101`, opID("OP_INSTANCE_SHUTDOWN")},
		{"reinstall mixed", "POST", "/2/instances/web1/reinstall?os=x", `{"os":"noop"}`, asAdmin, 400, `combine`, nil},
		{"reinstall bad key", "POST", "/2/instances/web1/reinstall", `{"bogus":1}`, asAdmin, 400, `bogus`, nil},
		{"groups", "GET", "/2/groups", "", nil, 200, `[{"name":"default","uri":"/2/groups/default"}]`, nil},
		{"groups bulk", "GET", "/2/groups?bulk=1", "", nil, 200, `"custom_ipolicy":{}`, nil},
		{"group", "GET", "/2/groups/default", "", nil, 200, `"alloc_policy":"preferred"`, nil},
		{"group missing", "GET", "/2/groups/nope", "", nil, 404, ``, nil},
		{"group add", "POST", "/2/groups", `{"group_name":"g"}`, asAdmin, 200, `101`, opID("OP_GROUP_ADD")},
		{"jobs", "GET", "/2/jobs", "", nil, 200, `[{"id":7,"uri":"/2/jobs/7"}]`, nil},
		{"jobs bulk", "GET", "/2/jobs?bulk=1", "", nil, 200, `"summary":["INSTANCE_STARTUP(web1)"]`, nil},
		{"job", "GET", "/2/jobs/7", "", nil, 200, `"opresult":[null]`, nil},
		{"job unknown", "GET", "/2/jobs/8", "", nil, 404, ``, nil},
		{"job bad id", "GET", "/2/jobs/x", "", nil, 404, ``, nil},
		{"job cancel", "DELETE", "/2/jobs/7", "", asAdmin, 200, `[true,"Job 7 canceled"]`, nil},
		{"job cancel unknown", "DELETE", "/2/jobs/8", "", asAdmin, 404, ``, nil},
		{"job wait", "GET", "/2/jobs/7/wait", `{"fields":["status"],"previous_job_info":null,"previous_log_serial":null}`, asAdmin, 200, `{"job_info":["success"],"log_entries":[]}`, nil},
		{"job wait PUT", "PUT", "/2/jobs/7/wait", `{"fields":["status"]}`, asAdmin, 200, `"job_info":["success"]`, nil},
		{"job wait nochange", "GET", "/2/jobs/7/wait", `{"fields":["status"],"previous_job_info":["success"]}`, asAdmin, 200, `null`, nil},
		{"job wait unknown", "GET", "/2/jobs/8/wait", `{"fields":["status"]}`, asAdmin, 404, ``, nil},
		{"job wait no fields", "GET", "/2/jobs/7/wait", `{}`, asAdmin, 400, `fields`, nil},
		{"job wait read user", "GET", "/2/jobs/7/wait", `{"fields":["status"]}`, asViewer, 403, `Forbidden`, nil},
		{"query", "GET", "/2/query/instance?fields=name,status", "", asViewer, 200, `"data":[[[0,"web1"],[0,"running"]]]`, nil},
		{"query anonymous", "GET", "/2/query/instance?fields=name", "", nil, 401, ``, nil},
		{"query no fields", "GET", "/2/query/instance", "", asViewer, 400, `Missing &#x27;fields&#x27;`, nil},
		{"query PUT filter", "PUT", "/2/query/instance", `{"fields":["name"],"qfilter":["=","name","web1"]}`, asViewer, 200, `"doc":"[= name web1]"`, nil},
		{"query bad resource", "GET", "/2/query/bogus?fields=name", "", asViewer, 400, `Unknown resource`, nil},
		{"query fields", "GET", "/2/query/instance/fields?fields=name", "", nil, 200, `{"fields":[{"name":"name"`, nil},
		{"anonymous write", "PUT", "/2/instances/web1/startup", "", nil, 401, `Unauthorized`, nil},
		{"wrong password", "GET", "/2/info", "", asWrong, 401, `Unauthorized`, nil},
		{"read user write", "PUT", "/2/instances/web1/startup", "", asViewer, 403, `Forbidden`, nil},
		{"no options write", "DELETE", "/2/instances/web1", "", asNobody, 403, ``, nil},
		{"no options read", "GET", "/2/info", "", asNobody, 200, ``, nil},
	}
	runRoutes(t, tests, nil)
}

func TestOpcodeParameters(t *testing.T) {
	be := newFakeBackend()
	h := newTestHandler(t, be, false)
	rec := do(t, h, "PUT", "/2/instances/web1/shutdown?dry-run=1&no_remember=1&reason=maint", `{"timeout":5}`, asAdmin)
	if rec.Code != 200 {
		t.Fatalf("status %d: %s", rec.Code, rec.Body)
	}
	op := be.lastOp()
	want := map[string]any{"instance_name": "web1", "dry_run": true, "no_remember": true, "timeout": 5.0}
	for k, v := range want {
		if op[k] != v {
			t.Errorf("%s = %v, want %v", k, op[k], v)
		}
	}
	trail, _ := json.Marshal(op["reason"])
	if got := string(trail); got != `[["gnt:user","maint",100000000005],["gnt:library:rlib2:instances_name_shutdown","",100000000005]]` {
		t.Errorf("reason trail %s", got)
	}

	rec = do(t, h, "POST", "/2/instances", `{"__version__":1,"mode":"create","name":"n1","os":"noop","disks":[],"nics":[]}`, asAdmin)
	if rec.Code != 200 {
		t.Fatalf("create: %d %s", rec.Code, rec.Body)
	}
	op = be.lastOp()
	if op["instance_name"] != "n1" || op["os_type"] != "noop" || op["disk_template"] != "file" || op["name"] != nil {
		t.Errorf("create op %v", op)
	}
}

func TestMultiOpcodeJobs(t *testing.T) {
	tests := []struct {
		name, body, query string
		want              []string
		os                any
	}{
		{"body form", `{"os":"noop","osparams":{"a":"b"}}`, "", []string{"OP_INSTANCE_SHUTDOWN", "OP_INSTANCE_REINSTALL", "OP_INSTANCE_STARTUP"}, "noop"},
		{"no start", `{"start":false}`, "", []string{"OP_INSTANCE_SHUTDOWN", "OP_INSTANCE_REINSTALL"}, nil},
		{"legacy query", "", "?os=deb&nostartup=1", []string{"OP_INSTANCE_SHUTDOWN", "OP_INSTANCE_REINSTALL"}, "deb"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			be := newFakeBackend()
			rec := do(t, newTestHandler(t, be, false), "POST", "/2/instances/web1/reinstall"+tc.query, tc.body, asAdmin)
			if rec.Code != 200 {
				t.Fatalf("status %d: %s", rec.Code, rec.Body)
			}
			ops := be.submitted[0]
			var ids []string
			for _, op := range ops {
				m := op.(map[string]any)
				ids = append(ids, m["OP_ID"].(string))
				if m["instance_name"] != "web1" {
					t.Errorf("op %v not for web1", m)
				}
			}
			if strings.Join(ids, ",") != strings.Join(tc.want, ",") {
				t.Errorf("ops %v, want %v", ids, tc.want)
			}
			if os := ops[1].(map[string]any)["os_type"]; os != tc.os {
				t.Errorf("os_type %v, want %v", os, tc.os)
			}
		})
	}
}

func TestRequireAuthentication(t *testing.T) {
	h := newTestHandler(t, newFakeBackend(), true)
	if rec := do(t, h, "GET", "/2/info", "", nil); rec.Code != 401 {
		t.Errorf("anonymous GET with --require-authentication: %d", rec.Code)
	}
	if rec := do(t, h, "GET", "/2/info", "", asViewer); rec.Code != 200 {
		t.Errorf("viewer GET: %d", rec.Code)
	}
	// A header sent on an anonymous resource is still checked.
	h = newTestHandler(t, newFakeBackend(), false)
	if rec := do(t, h, "GET", "/2/info", "", asWrong); rec.Code != 401 {
		t.Errorf("bad credentials on anonymous GET: %d", rec.Code)
	}
}

func TestReloadUsers(t *testing.T) {
	h := newTestHandler(t, newFakeBackend(), false)
	if rec := do(t, h, "PUT", "/2/instances/web1/startup", "", asAdmin); rec.Code != 200 {
		t.Fatalf("before reload: %d", rec.Code)
	}
	h.SetUsers(ParseUsers([]byte("admin other write\n")))
	if rec := do(t, h, "PUT", "/2/instances/web1/startup", "", asAdmin); rec.Code != 401 {
		t.Errorf("old password after reload: %d", rec.Code)
	}
}

func TestBodyLimits(t *testing.T) {
	h := newTestHandler(t, newFakeBackend(), false)
	req := httptest.NewRequest("PUT", "/2/instances/web1/shutdown", strings.NewReader(`{"timeout":1}`))
	req.Header.Set("Content-Type", "text/plain")
	req.SetBasicAuth("admin", "secret")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != 415 {
		t.Errorf("text/plain body: %d", rec.Code)
	}
	big := `{"timeout":1,"x":"` + strings.Repeat("a", MaxBodyBytes) + `"}`
	rec = do(t, h, "PUT", "/2/instances/web1/shutdown", big, asAdmin)
	if rec.Code != 413 {
		t.Errorf("oversized body: %d", rec.Code)
	}
}

func TestBackendErrors(t *testing.T) {
	be := newFakeBackend()
	h := newTestHandler(t, be, false)
	be.submitErr = ecode.New(ecode.JobQueueDrainErr, ecode.State, "Job queue is drained, cannot submit")
	if rec := do(t, h, "PUT", "/2/instances/web1/startup", "", asAdmin); rec.Code != 503 || !strings.Contains(rec.Body.String(), "drained") {
		t.Errorf("drained queue: %d %s", rec.Code, rec.Body)
	}
	be.down = true
	if rec := do(t, h, "GET", "/2/info", "", nil); rec.Code != 502 {
		t.Errorf("corrald down: %d %s", rec.Code, rec.Body)
	}
}

func TestMaxClients(t *testing.T) {
	h := NewHandler(Config{Backend: newFakeBackend(), MaxClients: 1})
	release, ok := h.limit.Acquire() // one request in flight
	if !ok {
		t.Fatal("no slot free")
	}
	if rec := do(t, h, "GET", "/version", "", nil); rec.Code != 503 {
		t.Errorf("over the limit: %d", rec.Code)
	}
	release()
	if rec := do(t, h, "GET", "/version", "", nil); rec.Code != 200 {
		t.Errorf("under the limit: %d", rec.Code)
	}
}

func FuzzDecodeCreateBody(f *testing.F) {
	for _, s := range []string{`{"__version__":1,"mode":"create","name":"a","os":"b"}`, `{"__version__":0}`,
		`{}`, `[]`, `"x"`, `{"__version__":1,"name":"a","instance_name":"b"}`, `{"__version__":"1"}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		body, err := DecodeBody(data)
		if err != nil {
			return
		}
		out, err := DecodeCreateBody(body)
		if err != nil {
			return
		}
		if _, ok := out["__version__"]; ok {
			t.Errorf("__version__ kept: %v", out)
		}
		if _, ok := out["name"]; ok {
			t.Errorf("alias name kept: %v", out)
		}
	})
}

func FuzzDecodeWaitBody(f *testing.F) {
	for _, s := range []string{`{"fields":["status"],"previous_job_info":null,"previous_log_serial":null}`,
		`{"fields":["id"],"previous_job_info":["x"],"previous_log_serial":3}`, `{"fields":[1]}`,
		`{"fields":["a"],"previous_log_serial":1.5}`, `null`, `[]`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		body, err := DecodeBody(data)
		if err != nil {
			return
		}
		wb, err := DecodeWaitBody(body)
		if err != nil {
			return
		}
		if wb.Fields == nil && len(body.(map[string]any)["fields"].([]any)) != 0 {
			t.Errorf("fields lost")
		}
	})
}

// FuzzHandler feeds arbitrary paths, queries and bodies through the whole
// handler: every answer must be well-formed JSON, errors must carry the
// Ganeti error body, and nothing may panic.
func FuzzHandler(f *testing.F) {
	f.Add("GET", "/2/instances", "bulk=1", "")
	f.Add("PUT", "/2/instances/web1/shutdown", "dry-run=1", `{"timeout":1}`)
	f.Add("POST", "/2/instances", "", `{"__version__":1,"mode":"create","name":"x","disks":[],"nics":[]}`)
	f.Add("GET", "/2/jobs/7/wait", "", `{"fields":["status"]}`)
	f.Add("PUT", "/2/query/instance", "fields=name", `{"qfilter":["=","name","web1"]}`)
	f.Add("PUT", "/2/nodes/node1/role", "", `"offline"`)
	f.Add("POST", "/2/instances/web1/reinstall", "os=a&nostartup=x", "")
	f.Fuzz(func(t *testing.T, method, path, query, body string) {
		switch method {
		case "GET", "PUT", "POST", "DELETE":
		default:
			method = "GET"
		}
		if !strings.HasPrefix(path, "/") || strings.ContainsAny(path, "?# \t\r\n") || strings.ContainsAny(query, "# \t\r\n") {
			return
		}
		target := path
		if query != "" {
			target += "?" + query
		}
		be := newFakeBackend()
		h := newTestHandler(t, be, false)
		req, err := http.NewRequest(method, "http://rapi"+target, strings.NewReader(body))
		if err != nil {
			return
		}
		req.Header.Set("Content-Type", "application/json")
		req.SetBasicAuth("admin", "secret")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		var v any
		if err := json.Unmarshal(rec.Body.Bytes(), &v); err != nil {
			t.Fatalf("%s %s: body %q is not JSON", method, target, rec.Body)
		}
		if rec.Code >= 400 {
			e, ok := v.(map[string]any)
			if !ok || e["code"] != float64(rec.Code) {
				t.Fatalf("%s %s: error body %s", method, target, rec.Body)
			}
		} else if rec.Code != 200 {
			t.Fatalf("%s %s: status %d", method, target, rec.Code)
		}
	})
}
