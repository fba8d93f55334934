package opcodes

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/corral/corral/internal/ecode"
)

func TestDecode(t *testing.T) {
	tab := Default()
	cases := []struct {
		in      string
		wantErr string
		class   ecode.Class
	}{
		{`{"OP_ID":"OP_TEST_DELAY","duration":0}`, "", ""},
		{`{"OP_ID":"OP_TEST_DELAY","duration":1.5,"priority":-10,"comment":"x"}`, "", ""},
		{`{"OP_ID":"OP_TEST_DELAY"}`, `required parameter "duration"`, ecode.Inval},
		{`{"OP_ID":"OP_TEST_DELAY","duration":"x"}`, "expected non-negative number, got string", ecode.Inval},
		{`{"OP_ID":"OP_TEST_DELAY","duration":1,"bogus":1}`, `unknown parameter "bogus"`, ecode.Inval},
		{`{"OP_ID":"OP_NOPE"}`, `unknown opcode "OP_NOPE"`, ecode.Inval},
		{`{"duration":1}`, "no OP_ID", ecode.Inval},
		{`[1]`, "not a JSON object", ecode.Inval},
		{`{"OP_ID":"OP_TEST_DELAY","duration":1,"priority":1.5}`, "expected int", ecode.Inval},
		{`{"OP_ID":"OP_INSTANCE_RENAME","instance_name":"a","new_name":""}`, "must not be empty", ecode.Inval},
	}
	for _, c := range cases {
		op, err := tab.Decode(json.RawMessage(c.in))
		if c.wantErr == "" {
			if err != nil {
				t.Errorf("%s: %v", c.in, err)
				continue
			}
			if op.Params["dry_run"] != false || op.Params["debug_level"] == nil {
				t.Errorf("%s: common defaults not filled: %v", c.in, op.Params)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), c.wantErr) {
			t.Errorf("%s: got %v, want error containing %q", c.in, err, c.wantErr)
			continue
		}
		if ecode.ClassOf(err) != c.class {
			t.Errorf("%s: class %s, want %s", c.in, ecode.ClassOf(err), c.class)
		}
	}
}

func TestSummary(t *testing.T) {
	tab := Default()
	got := tab.Summary("OP_INSTANCE_CREATE", json.RawMessage(`{"OP_ID":"OP_INSTANCE_CREATE","instance_name":"web1"}`))
	if got != "INSTANCE_CREATE(web1)" {
		t.Fatal(got)
	}
	if got := tab.Summary("OP_TEST_DELAY", json.RawMessage(`{"duration":2}`)); got != "TEST_DELAY(2)" {
		t.Fatal(got)
	}
	if got := tab.Summary("OP_CLUSTER_VERIFY", nil); got != "CLUSTER_VERIFY" {
		t.Fatal(got)
	}
}

func TestTableHasUniqueParams(t *testing.T) {
	for _, d := range Defs() {
		seen := map[string]bool{}
		for _, p := range append(d.Params, commonParams...) {
			if seen[p.Name] {
				t.Errorf("%s: duplicate parameter %s", d.ID, p.Name)
			}
			seen[p.Name] = true
		}
	}
}

func FuzzDecode(f *testing.F) {
	f.Add([]byte(`{"OP_ID":"OP_TEST_DELAY","duration":0}`))
	f.Add([]byte(`{"OP_ID":"OP_INSTANCE_CREATE","instance_name":"x","disk_template":"file","disks":[{"size":1}],"nics":[]}`))
	f.Add([]byte(`{"OP_ID":1}`))
	f.Add([]byte(`null`))
	f.Add([]byte(`{"OP_ID":"OP_CLUSTER_SET_PARAMS","vg_name":"","modify_etc_hosts":false,"hv_state":{}}`))
	f.Add([]byte(`{"OP_ID":"OP_INSTANCE_CREATE","instance_name":"x","disks":[],"nics":[],"forthcoming":true}`))
	f.Add([]byte(`{"OP_ID":"OP_NODE_EVACUATE","node_name":"n1"}`))
	tab := Default()
	f.Fuzz(func(t *testing.T, b []byte) {
		op, err := tab.Decode(b)
		if err != nil {
			if _, ok := ecode.As(err); !ok {
				t.Fatalf("unclassified error %v", err)
			}
			return
		}
		for _, p := range op.Def.Params {
			v, ok := op.Params[p.Name]
			if !ok {
				t.Fatalf("param %s not filled", p.Name)
			}
			if p.Unsupported != "" && !honoured(&p, v) {
				t.Fatalf("param %s: unsupported value %v accepted", p.Name, v)
			}
		}
	})
}
