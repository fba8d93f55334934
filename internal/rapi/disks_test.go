package rapi

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// firstJob is the id the fake backend gives the first job submitted.
const firstJob = 101

// finishedJob makes the fake's next job one that ended with status and result.
func finishedJob(be *fakeBackend, status string, result any) {
	be.jobs[firstJob] = map[string]any{"id": float64(firstJob), "status": status, "opresult": []any{result}}
}

// sampleSetup prepares the fake backend for recorded samples whose answer
// comes from a job run to completion.
var sampleSetup = map[string]func(*fakeBackend){
	"/2/os": func(be *fakeBackend) { finishedJob(be, "success", []any{[]any{"noop", []any{}}}) },
}

// plainOp is the last submitted opcode as JSON decodes it, as corrald sees it.
func plainOp(t *testing.T, be *fakeBackend) map[string]any {
	t.Helper()
	op := be.lastOp()
	if op == nil {
		return nil
	}
	b, err := json.Marshal(op)
	if err != nil {
		t.Fatal(err)
	}
	var out map[string]any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestDiskRoutes(t *testing.T) {
	tests := []routeCase{
		{"activate", "PUT", "/2/instances/web1/activate-disks", "", asAdmin, 200, "101",
			map[string]any{"OP_ID": "OP_INSTANCE_ACTIVATE_DISKS", "instance_name": "web1"}},
		{"activate ignore_size", "PUT", "/2/instances/web1/activate-disks?ignore_size=1", `{"force":true}`, asAdmin, 200, "101",
			map[string]any{"OP_ID": "OP_INSTANCE_ACTIVATE_DISKS", "ignore_size": true}},
		{"activate bad flag", "PUT", "/2/instances/web1/activate-disks?ignore_size=x", "", asAdmin, 400, "ignore_size", nil},
		{"activate read-only user", "PUT", "/2/instances/web1/activate-disks", "", asViewer, 403, "", nil},
		{"activate POST", "POST", "/2/instances/web1/activate-disks", "", asAdmin, 501, "Method POST", nil},
		{"deactivate", "PUT", "/2/instances/web1/deactivate-disks", "", asAdmin, 200, "101",
			map[string]any{"OP_ID": "OP_INSTANCE_DEACTIVATE_DISKS", "instance_name": "web1"}},
		{"deactivate force", "PUT", "/2/instances/web1/deactivate-disks?force=1", "", asAdmin, 200, "101",
			map[string]any{"OP_ID": "OP_INSTANCE_DEACTIVATE_DISKS", "force": true}},
		{"grow", "POST", "/2/instances/web1/disk/0/grow", `{"amount":1024,"wait_for_sync":false}`, asAdmin, 200, "101",
			map[string]any{"OP_ID": "OP_INSTANCE_GROW_DISK", "instance_name": "web1", "disk": 0.0, "amount": 1024.0, "wait_for_sync": false}},
		{"grow absolute", "POST", "/2/instances/web1/disk/2/grow", `{"amount":4096,"absolute":true}`, asAdmin, 200, "101",
			map[string]any{"OP_ID": "OP_INSTANCE_GROW_DISK", "disk": 2.0, "amount": 4096.0, "absolute": true}},
		{"grow without amount", "POST", "/2/instances/web1/disk/0/grow", `{}`, asAdmin, 400, "amount", nil},
		{"grow bad amount", "POST", "/2/instances/web1/disk/0/grow", `{"amount":"lots"}`, asAdmin, 400, "amount", nil},
		{"grow disk in body", "POST", "/2/instances/web1/disk/0/grow", `{"amount":1,"disk":1}`, asAdmin, 400, "static parameters disk", nil},
		{"grow bad index", "POST", "/2/instances/web1/disk/x/grow", `{"amount":1}`, asAdmin, 404, "Not Found", nil},
		{"grow index too big", "POST", "/2/instances/web1/disk/16/grow", `{"amount":1}`, asAdmin, 400, "Invalid disk index", nil},
		{"grow unknown key", "POST", "/2/instances/web1/disk/0/grow", `{"amount":1,"nosuch":1}`, asAdmin, 400, "nosuch", nil},
		{"grow anonymous", "POST", "/2/instances/web1/disk/0/grow", `{"amount":1}`, nil, 401, "", nil},
	}
	// The parameters the submitted opcode must not have, by case.
	absent := map[string][]string{
		"activate":             {"ignore_size"},
		"activate ignore_size": {"force"},
		"deactivate":           {"force"},
		"grow":                 {"absolute"},
	}
	runRoutes(t, tests, func(t *testing.T, tc routeCase, op map[string]any) {
		for _, k := range absent[tc.name] {
			if _, ok := op[k]; ok {
				t.Errorf("%s present: %v", k, op)
			}
		}
	})
}

func TestInstanceConsole(t *testing.T) {
	dict := map[string]any{"instance": "web1", "kind": "ssh", "host": "node1", "user": "root",
		"command": []any{"socat", "STDIO,raw,echo=0,escape=0x1d", "UNIX-CONNECT:/run/s.sock"}}
	tests := []struct {
		name    string
		prepare func(be *fakeBackend)
		path    string
		as      *creds
		status  int
		want    any    // the decoded body on success
		msg     string // part of the error body
	}{
		{name: "running", prepare: func(be *fakeBackend) { finishedJob(be, "success", dict) }, as: asViewer, status: 200, want: dict},
		{name: "stopped", prepare: func(be *fakeBackend) { be.instances["web1"]["oper_state"] = false }, as: asAdmin, status: 503, msg: "Instance console unavailable"},
		{name: "unknown instance", path: "/2/instances/nope/console", as: asAdmin, status: 404},
		{name: "anonymous", as: nil, status: 401},
		{name: "job failed", prepare: func(be *fakeBackend) {
			finishedJob(be, "error", []any{"OpExecError", []any{"Instance web1 is not running (state ERROR_down)"}})
		}, as: asAdmin, status: 500, msg: "is not running"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			be := newFakeBackend()
			if tc.prepare != nil {
				tc.prepare(be)
			}
			path := tc.path
			if path == "" {
				path = "/2/instances/web1/console"
			}
			rec := do(t, newTestHandler(t, be, false), "GET", path, "", tc.as)
			if rec.Code != tc.status {
				t.Fatalf("status %d, want %d: %s", rec.Code, tc.status, rec.Body)
			}
			got := decode(t, rec)
			if tc.status == 200 && !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %#v, want %#v", got, tc.want)
			}
			if !strings.Contains(rec.Body.String(), tc.msg) {
				t.Fatalf("body %s does not contain %q", rec.Body, tc.msg)
			}
			if tc.status == 200 {
				if op := be.lastOp(); op == nil || op["OP_ID"] != "OP_INSTANCE_CONSOLE" || op["instance_name"] != "web1" {
					t.Fatalf("submitted %v", op)
				}
			}
		})
	}
}

func TestOSList(t *testing.T) {
	rows := []any{[]any{"debian", []any{"bookworm", "trixie"}}, []any{"noop", []any{}}}
	bulkRow := []any{"debian", true, []any{"bookworm"}, []any{[]any{"mirror", "where to fetch from"}}, []any{20.0}, false, false, true}
	tests := []struct {
		name   string
		path   string
		result any
		status int
		want   string // the body, as JSON
		fields []any  // output_fields of the submitted opcode
	}{
		{"names", "/2/os", rows, 200, `["debian+bookworm","debian+trixie","noop"]`, []any{"name", "variants"}},
		{"none", "/2/os", []any{}, 200, `[]`, []any{"name", "variants"}},
		{"bulk", "/2/os?bulk=1", []any{bulkRow}, 200,
			`[{"api_versions":[20],"blacklisted":false,"hidden":false,"name":"debian","parameters":[{"description":"where to fetch from","name":"mirror"}],"trusted":true,"valid":true,"variants":["bookworm"]}]`,
			[]any{"name", "valid", "variants", "parameters", "api_versions", "blacklisted", "hidden", "trusted"}},
		{"bad result", "/2/os", "garbage", 502, ``, []any{"name", "variants"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			be := newFakeBackend()
			finishedJob(be, "success", tc.result)
			rec := do(t, newTestHandler(t, be, false), "GET", tc.path, "", nil)
			if rec.Code != tc.status {
				t.Fatalf("status %d, want %d: %s", rec.Code, tc.status, rec.Body)
			}
			if tc.want != "" {
				var got, want any
				_ = json.Unmarshal(rec.Body.Bytes(), &got)
				_ = json.Unmarshal([]byte(tc.want), &want)
				if !reflect.DeepEqual(got, want) {
					t.Fatalf("body %s, want %s", rec.Body, tc.want)
				}
			}
			op := plainOp(t, be)
			if op == nil || op["OP_ID"] != "OP_OS_DIAGNOSE" || !reflect.DeepEqual(op["output_fields"], tc.fields) {
				t.Fatalf("submitted %#v", op)
			}
		})
	}
}

func TestOSNames(t *testing.T) {
	cases := []struct {
		name     any
		variants any
		want     []string
	}{
		{"deb", []any{"a", "b"}, []string{"deb+a", "deb+b"}},
		{"deb", []any{}, []string{"deb"}},
		{"deb", nil, []string{"deb"}},
	}
	for _, c := range cases {
		if got := osNames(c.name, c.variants); !reflect.DeepEqual(got, c.want) {
			t.Errorf("osNames(%v, %v) = %v, want %v", c.name, c.variants, got, c.want)
		}
	}
}

// FuzzOSResult feeds arbitrary OP_OS_DIAGNOSE results to /2/os, plain and
// bulk: the answer is a list or a 502, never a panic.
func FuzzOSResult(f *testing.F) {
	for _, seed := range []string{
		`[["debian",["a","b"]],["noop",[]]]`,
		`[["debian",true,["a"],[["p","d"]],[20],false,false,true]]`,
		`[["debian",null]]`, `[["x"]]`, `[[1,2]]`, `[null]`, `[]`, `"garbage"`, `null`, `{"a":1}`,
		`[["debian",true,["a"],[["p"],null,3],[20],false,false,true]]`,
	} {
		f.Add(seed, false)
		f.Add(seed, true)
	}
	f.Fuzz(func(t *testing.T, raw string, bulk bool) {
		var result any
		if json.Unmarshal([]byte(raw), &result) != nil {
			return
		}
		be := newFakeBackend()
		finishedJob(be, "success", result)
		path := "/2/os"
		if bulk {
			path += "?bulk=1"
		}
		rec := do(t, newTestHandler(t, be, false), "GET", path, "", nil)
		switch rec.Code {
		case 200:
			if _, ok := decode(t, rec).([]any); !ok {
				t.Fatalf("200 with %s, want a list", rec.Body)
			}
		case 502:
		default:
			t.Fatalf("status %d: %s", rec.Code, rec.Body)
		}
	})
}
