package cli

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
)

// withBackups makes f answer the export opcodes as corrald does: node1
// keeps the exports in its list, node2 (offline) cannot be asked, and an
// export of "halfdisk" loses its second disk.
func withBackups(f *fakeMaster) {
	f.mu.Lock()
	defer f.mu.Unlock()
	exports := map[string][]any{"node1": {"web1", "db1"}}
	f.outcome = func(op map[string]any) jobOutcome {
		name, _ := op["instance_name"].(string)
		switch op["OP_ID"] {
		case "OP_BACKUP_QUERY":
			res := map[string]any{}
			want := strs(op["nodes"])
			for _, n := range []string{"node1", "node2"} {
				if len(want) > 0 && !slices.Contains(want, n) {
					continue
				}
				if n == "node2" {
					res[n] = false
				} else {
					res[n] = slices.Clone(exports[n])
				}
			}
			return jobOutcome{status: "success", result: res}
		case "OP_BACKUP_EXPORT":
			if name == "halfdisk" {
				return jobOutcome{status: "success", result: []any{true, []any{true, false}}}
			}
			node, _ := op["target_node"].(string)
			if !slices.Contains(exports[node], any(name)) {
				exports[node] = append(exports[node], name)
			}
			return jobOutcome{status: "success", result: []any{true, []any{true}},
				logs: []any{"Shutting down instance " + name, "Exporting disk/0 to " + node, "Finalizing export on " + node}}
		case "OP_BACKUP_REMOVE":
			for n, l := range exports {
				exports[n] = slices.DeleteFunc(l, func(e any) bool { return e == name })
			}
			return jobOutcome{status: "success"}
		}
		return f.defaultOutcome(op)
	}
}

func TestBackupScripts(t *testing.T) {
	runScripts(t, "testdata/backup", withBackups)
}

func TestBackupOpcodesSent(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"backup", "export", "-n", "node1", "web1"},
			`{"OP_ID":"OP_BACKUP_EXPORT","instance_name":"web1","mode":"local","target_node":"node1","shutdown":true,"compress":"none"}`},
		{[]string{"backup", "export", "-n", "node1", "--noshutdown", "--shutdown-timeout", "30", "--remove-instance",
			"--ignore-remove-failures", "--compress", "zstd", "web1"},
			`{"OP_ID":"OP_BACKUP_EXPORT","instance_name":"web1","mode":"local","target_node":"node1","shutdown":false,
			  "compress":"zstd","shutdown_timeout":30,"remove_instance":true,"ignore_remove_failures":true}`},
		{[]string{"backup", "import", "-n", "node1", "-t", "file", "--src-node", "node2", "--src-dir", "/srv/export/web1", "web2"},
			`{"OP_ID":"OP_INSTANCE_CREATE","mode":"import","instance_name":"web2","pnode":"node1","src_node":"node2",
			  "src_path":"/srv/export/web1","disk_template":"file","disks":[],"nics":[],"hvparams":{},"beparams":{},"start":true}`},
		{[]string{"backup", "import", "-n", "node1", "-t", "file", "--disk", "0:size=2G", "--net", "0:link=br1",
			"-B", "vcpus=2", "-H", "kvm:acpi=false", "--no-start", "web1"},
			`{"OP_ID":"OP_INSTANCE_CREATE","mode":"import","instance_name":"web1","pnode":"node1","src_path":"web1",
			  "disk_template":"file","disks":[{"size":2048}],"nics":[{"link":"br1"}],"hypervisor":"kvm",
			  "hvparams":{"acpi":"false"},"beparams":{"vcpus":2},"start":false}`},
		{[]string{"backup", "list"}, `{"OP_ID":"OP_BACKUP_QUERY","nodes":[],"use_locking":false}`},
		{[]string{"backup", "list", "--node", "node1", "--node", "node2"},
			`{"OP_ID":"OP_BACKUP_QUERY","nodes":["node1","node2"],"use_locking":false}`},
		{[]string{"backup", "remove", "web1"}, `{"OP_ID":"OP_BACKUP_REMOVE","instance_name":"web1"}`},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			f := newFake(t)
			withBackups(f)
			if r := f.run(t, tc.args...); r.code != 0 {
				t.Fatalf("exit %d: %s", r.code, r.stderr)
			}
			sub := f.submitted()
			if len(sub) != 1 {
				t.Fatalf("submitted %v", sub)
			}
			op := sub[0]
			delete(op, "reason")
			if !sameJSON(t, op, tc.want) {
				b, _ := json.Marshal(op)
				t.Errorf("opcode %s\nwant %s", b, tc.want)
			}
		})
	}
}

func TestBackupRefusals(t *testing.T) {
	f := newFake(t)
	withBackups(f)
	for _, tc := range []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"backup", "export", "web1"}, ExitUsage, "the target node (-n NODE) is required"},
		{[]string{"backup", "export", "-n", "node1"}, ExitUsage, "expected the instance name"},
		{[]string{"backup", "export", "-n", "node1", "--compress", "lzma", "web1"}, 2, `unknown compression "lzma"`},
		{[]string{"backup", "export", "-n", "node1", "--shutdown-timeout", "-1", "web1"}, 2, "must not be negative"},
		{[]string{"backup", "import", "-t", "file", "web1"}, ExitUsage, "the primary node (-n NODE) is required"},
		{[]string{"backup", "import", "-n", "node1", "web1"}, ExitUsage, "the disk template"},
		{[]string{"backup", "import", "-n", "node1", "-t", "file", "--net", "1:link=br0", "web1"}, 2, "NIC 0 is missing"},
		{[]string{"backup", "list", "extra"}, ExitUsage, "unexpected argument"},
		{[]string{"backup", "remove"}, ExitUsage, "expected the instance name"},
		{[]string{"backup", "frobnicate"}, ExitUsage, "unknown command"},
	} {
		r := f.run(t, tc.args...)
		if r.code != tc.code || !strings.Contains(r.stderr, tc.msg) {
			t.Errorf("%v: exit %d, stderr %q; want %d with %q", tc.args, r.code, r.stderr, tc.code, tc.msg)
		}
	}
	if sub := f.submitted(); len(sub) != 0 {
		t.Fatalf("refused commands submitted jobs: %v", sub)
	}
}

// osInfoFake answers OP_OS_DIAGNOSE as corrald: rows of the fields asked
// for, hidden and blacklisted OSes only when those fields are asked for.
func osInfoFake(t *testing.T) *fakeMaster {
	t.Helper()
	f := newFake(t)
	f.mu.Lock()
	defer f.mu.Unlock()
	oses := []map[string]any{
		{"name": "debian", "valid": true, "hidden": false, "blacklisted": false, "trusted": true,
			"variants": []any{"bookworm", "trixie"}, "parameters": []any{[]any{"dhcp", "use DHCP on the first NIC"}, []any{"mirror", "package mirror URL"}},
			"api_versions": []any{20.0}},
		{"name": "old", "valid": true, "hidden": true, "blacklisted": false, "trusted": true,
			"variants": []any{}, "parameters": []any{}, "api_versions": []any{15.0, 20.0}},
		{"name": "banned", "valid": true, "hidden": false, "blacklisted": true, "trusted": false,
			"variants": []any{}, "parameters": []any{}, "api_versions": []any{20.0}},
		{"name": "broken", "valid": false, "hidden": false, "blacklisted": false, "trusted": true,
			"variants": []any{}, "parameters": []any{}, "api_versions": []any{}},
	}
	f.outcome = func(op map[string]any) jobOutcome {
		fields := strs(op["output_fields"])
		names := strs(op["names"])
		rows := []any{}
		for _, o := range oses {
			if len(names) > 0 && !slices.Contains(names, o["name"].(string)) {
				continue
			}
			skip := false
			for _, flag := range []string{"hidden", "blacklisted"} {
				skip = skip || (o[flag] == true && !slices.Contains(fields, flag))
			}
			if skip || (o["valid"] != true && !slices.Contains(fields, "valid")) {
				continue
			}
			row := []any{}
			for _, fl := range fields {
				row = append(row, o[fl])
			}
			rows = append(rows, row)
		}
		return jobOutcome{status: "success", result: rows}
	}
	return f
}

func TestOSInfoAndListAll(t *testing.T) {
	for _, tc := range []struct {
		args   []string
		code   int
		stdout string
		stderr string
	}{
		{args: []string{"os", "list", "--no-headers"}, stdout: "debian+bookworm\ndebian+trixie\n"},
		{args: []string{"os", "list", "--all"}, stdout: "Name\nbanned\ndebian+bookworm\ndebian+trixie\nold\n"},
		{args: []string{"os", "info", "debian", "broken"}, stdout: `broken:
  - valid: False
  - hidden: False
  - blacklisted: False
  - trusted: True

debian:
  - valid: True
  - hidden: False
  - blacklisted: False
  - trusted: True
  - API versions:
    - 20
  - variants:
    - bookworm
    - trixie
  - parameters:
    - dhcp: use DHCP on the first NIC
    - mirror: package mirror URL

`},
		{args: []string{"os", "info", "old"}, stdout: "old:\n  - valid: True\n  - hidden: True\n  - blacklisted: False\n  - trusted: True\n" +
			"  - API versions:\n    - 15\n    - 20\n  - variants:\n  - parameters:\n\n"},
		{args: []string{"os", "info", "debian", "nope"}, code: 3, stderr: "OS(es) not found: nope"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			f := osInfoFake(t)
			r := f.run(t, tc.args...)
			if r.code != tc.code || (tc.stdout != "" && r.stdout != tc.stdout) || !strings.Contains(r.stderr, tc.stderr) {
				t.Fatalf("exit %d, stdout:\n%s\nwant:\n%s\nstderr: %s", r.code, r.stdout, tc.stdout, r.stderr)
			}
		})
	}
	f := osInfoFake(t)
	f.run(t, "os", "info")
	if sub := f.submitted(); len(sub) != 1 || !sameJSON(t, sub[0]["output_fields"],
		`["name","valid","hidden","blacklisted","trusted","variants","parameters","api_versions"]`) || !sameJSON(t, sub[0]["names"], `[]`) {
		t.Fatalf("submitted %v", sub)
	}
}

// FuzzBackupPrinters feeds arbitrary results to the export, export list
// and OS info printers: they print or fail, never panic.
func FuzzBackupPrinters(f *testing.F) {
	for _, seed := range []string{
		`[true,[true,false]]`, `[false,[]]`, `[true]`, `{"node1":["a","b"],"node2":false}`, `{"n":[1,null]}`,
		`[["debian",true,false,false,true,["a"],[["p","d"],"odd"],[20]]]`, `[["x",1,2,3,4,5,6,7]]`, `null`, `"s"`, `[[]]`,
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		var v any
		if json.Unmarshal([]byte(raw), &v) != nil {
			return
		}
		var b strings.Builder
		_ = printExportResult(&b, v)
		_ = writeExportList(&b, &b, v, false, "")
		_ = printOSInfo(&b, []string{"debian"}, v)
	})
}
