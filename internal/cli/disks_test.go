package cli

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/corral/corral/internal/ecode"
)

// diskFake is a fake master whose disk and OS jobs answer with results
// shaped as corrald's.
func diskFake(t *testing.T) *fakeMaster {
	t.Helper()
	f := newFake(t)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.outcome = func(op map[string]any) jobOutcome {
		switch op["OP_ID"] {
		case "OP_INSTANCE_ACTIVATE_DISKS":
			return jobOutcome{status: "success", result: []any{
				[]any{"node1", "disk/0", "/srv/file/u1/d0.raw"}, []any{"node1", "disk/1", "/srv/file/u1/d1.raw"}}}
		case "OP_INSTANCE_GROW_DISK":
			if op["amount"].(float64) > 1<<20 {
				return jobOutcome{status: "error", result: encErr(ecode.OpPrereqError, ecode.NoRes, "Not enough disk space on node node1")}
			}
			return jobOutcome{status: "success", logs: []any{"Growing disk 0 of instance 'web1'"}}
		case "OP_OS_DIAGNOSE":
			fields, _ := op["output_fields"].([]any)
			if len(fields) == 2 {
				return jobOutcome{status: "success", result: []any{[]any{"noop", []any{}}, []any{"debian", []any{"trixie", "bookworm"}}}}
			}
			return jobOutcome{status: "success", result: []any{
				[]any{"debian", true, []any{"bookworm"}, map[string]any{
					"node2": []any{[]any{"/os/debian", true, "", []any{"bookworm"}, []any{}, []any{20.0}}},
					"node1": []any{[]any{"/os/debian", true, "", []any{"bookworm", "trixie"}, []any{}, []any{20.0}}},
				}, false, false},
				[]any{"broken", false, []any{}, map[string]any{
					"node1": []any{[]any{"/os/broken", false, "missing create script", []any{}, []any{}, []any{}}},
					"node2": []any{},
				}, true, false},
			}}
		}
		return jobOutcome{status: "success"}
	}
	return f
}

func TestInstanceDiskCommands(t *testing.T) {
	cases := []struct {
		name   string
		args   []string
		code   int
		stdout string         // exact, when set
		stderr string         // substring
		op     map[string]any // parameters of the submitted opcode
		absent []string       // parameters it must not carry
	}{
		{name: "activate", args: []string{"instance", "activate-disks", "web1"},
			stdout: "node1:disk/0:/srv/file/u1/d0.raw\nnode1:disk/1:/srv/file/u1/d1.raw\n",
			op:     map[string]any{"OP_ID": "OP_INSTANCE_ACTIVATE_DISKS", "instance_name": "web1"}, absent: []string{"ignore_size"}},
		{name: "activate ignore size", args: []string{"instance", "activate-disks", "--ignore-size", "web1"},
			op: map[string]any{"ignore_size": true}},
		{name: "deactivate", args: []string{"instance", "deactivate-disks", "web1"},
			op: map[string]any{"OP_ID": "OP_INSTANCE_DEACTIVATE_DISKS", "instance_name": "web1"}, absent: []string{"force"}},
		{name: "deactivate force", args: []string{"instance", "deactivate-disks", "-f", "web1"},
			op: map[string]any{"force": true}},
		{name: "grow by", args: []string{"instance", "grow-disk", "web1", "1", "1G"},
			op: map[string]any{"OP_ID": "OP_INSTANCE_GROW_DISK", "instance_name": "web1", "disk": 1.0, "amount": 1024.0}, absent: []string{"absolute", "wait_for_sync"}},
		{name: "grow to", args: []string{"instance", "grow-disk", "--absolute", "--no-wait-for-sync", "web1", "0", "512"},
			op: map[string]any{"disk": 0.0, "amount": 512.0, "absolute": true, "wait_for_sync": false}},
		{name: "grow no room", args: []string{"instance", "grow-disk", "web1", "0", "2T"}, code: 6, stderr: "Not enough disk space"},
		{name: "grow bad amount", args: []string{"instance", "grow-disk", "web1", "0", "lots"}, code: 2, stderr: "lots"},
		{name: "grow bad index", args: []string{"instance", "grow-disk", "web1", "first", "1G"}, code: 2, stderr: "invalid disk index"},
		{name: "recreate all", args: []string{"instance", "recreate-disks", "web1"},
			op: map[string]any{"OP_ID": "OP_INSTANCE_RECREATE_DISKS", "instance_name": "web1"}, absent: []string{"disks", "nodes", "iallocator"}},
		{name: "recreate sized", args: []string{"instance", "recreate-disks", "--disk", "1", "--disk", "0:size=2G,mode=ro", "-n", "node2", "web1"},
			op: map[string]any{"disks": []any{[]any{1.0, map[string]any{}}, []any{0.0, map[string]any{"size": 2048.0, "mode": "ro"}}}, "nodes": []any{"node2"}}},
		{name: "recreate allocator", args: []string{"instance", "recreate-disks", "-I", "hail", "web1"},
			op: map[string]any{"iallocator": "hail"}, absent: []string{"nodes"}},
		{name: "recreate both", args: []string{"instance", "recreate-disks", "-I", "hail", "-n", "node2", "web1"}, code: 2, stderr: "not both"},
		{name: "recreate bad key", args: []string{"instance", "recreate-disks", "--disk", "0:name=x", "web1"}, code: 2, stderr: "unknown parameter"},
		{name: "recreate bad index", args: []string{"instance", "recreate-disks", "--disk", "a:size=1G", "web1"}, code: 2, stderr: "invalid disk index"},
		{name: "grow missing amount", args: []string{"instance", "grow-disk", "web1", "0"}, code: 2, stderr: "expected the instance name, the disk index and the amount"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := diskFake(t)
			r := f.run(t, tc.args...)
			if r.code != tc.code {
				t.Fatalf("exit %d, want %d: %+v", r.code, tc.code, r)
			}
			if tc.stdout != "" && r.stdout != tc.stdout {
				t.Fatalf("stdout %q, want %q", r.stdout, tc.stdout)
			}
			if !strings.Contains(r.stderr, tc.stderr) {
				t.Fatalf("stderr %q does not contain %q", r.stderr, tc.stderr)
			}
			ops := f.submitted()
			if tc.op == nil {
				if tc.code == 2 && len(ops) != 0 {
					t.Fatalf("a rejected command submitted %v", ops)
				}
				return
			}
			if len(ops) != 1 {
				t.Fatalf("submitted %v", ops)
			}
			for k, v := range tc.op {
				if !reflect.DeepEqual(ops[0][k], v) {
					t.Errorf("%s = %#v, want %#v", k, ops[0][k], v)
				}
			}
			for _, k := range tc.absent {
				if _, ok := ops[0][k]; ok {
					t.Errorf("%s present in %v", k, ops[0])
				}
			}
		})
	}
}

func TestOSCommands(t *testing.T) {
	cases := []struct {
		args   []string
		stdout string
	}{
		{[]string{"os", "list"}, "Name\ndebian+bookworm\ndebian+trixie\nnoop\n"},
		{[]string{"os", "list", "--no-headers"}, "debian+bookworm\ndebian+trixie\nnoop\n"},
		{[]string{"os", "diagnose"}, `OS: debian [global status: valid]
  Variants: bookworm
  Node: node1, status: valid (path: /os/debian)
    variants: bookworm, trixie
  Node: node2, status: valid (path: /os/debian)
    variants: bookworm

OS: broken [global status: invalid] [hidden]
  Node: node1, status: invalid - missing create script (path: /os/broken)
  Node: node2, status: not found

`},
	}
	for _, tc := range cases {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			f := diskFake(t)
			r := f.run(t, tc.args...)
			if r.code != 0 || r.stdout != tc.stdout {
				t.Fatalf("exit %d, stdout:\n%s\nwant:\n%s\nstderr: %s", r.code, r.stdout, tc.stdout, r.stderr)
			}
			ops := f.submitted()
			if len(ops) != 1 || ops[0]["OP_ID"] != "OP_OS_DIAGNOSE" {
				t.Fatalf("submitted %v", ops)
			}
		})
	}
}

// FuzzDiskResultPrinters feeds arbitrary job results to the printers of
// activate-disks, os list and os diagnose: whatever corrald answers, they
// print or fail, never panic.
func FuzzDiskResultPrinters(f *testing.F) {
	for _, seed := range []string{
		`[["node1","disk/0","/srv/a.raw"]]`,
		`[["node1","disk/0",null]]`,
		`[["node1"]]`,
		`[["debian",true,["a"],{"n1":[["/os/debian",true,"",["a"],[],[20]]],"n2":[]},false,true]]`,
		`[["x",false,null,{"n1":[["/p"]]},null,null]]`,
		`[["x",1,2,3,4,5]]`,
		`{"a":1}`, `null`, `"text"`, `[[]]`, `[null]`,
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		var v any
		if json.Unmarshal([]byte(raw), &v) != nil {
			return
		}
		var b strings.Builder
		_ = printDiskInfo(&b, v)
		_ = printOSDiagnose(&b, v)
		if l, ok := v.([]any); ok {
			for _, r := range l {
				if row, ok := r.([]any); ok && len(row) == 2 {
					if names := osNames(row[0], row[1]); len(names) == 0 {
						t.Fatalf("osNames(%v) gave no name", row)
					}
				}
			}
		}
	})
}
