package opcodes

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestRedact(t *testing.T) {
	tab := Default()
	in := json.RawMessage(`{"OP_ID":"OP_INSTANCE_CREATE","instance_name":"i1","osparams":{"a":"pub"},` +
		`"osparams_private":{"p":"priv-value"},"osparams_secret":{"s":"secret-value"}}`)
	tests := []struct {
		from       Sensitivity
		hide, keep []string
	}{
		{Public, nil, []string{"pub", "priv-value", "secret-value"}},
		{Secret, []string{"secret-value"}, []string{"pub", "priv-value", `"s":"<redacted>"`}},
		{Private, []string{"secret-value", "priv-value"}, []string{"pub", `"p":"<redacted>"`, `"s":"<redacted>"`, `"instance_name":"i1"`}},
	}
	for _, tc := range tests {
		// encoding/json escapes < and >.
		out := strings.NewReplacer(`\u003c`, "<", `\u003e`, ">").Replace(string(tab.Redact(in, tc.from)))
		for _, h := range tc.hide {
			if strings.Contains(out, h) {
				t.Errorf("from %d: %q still in %s", tc.from, h, out)
			}
		}
		for _, k := range tc.keep {
			if !strings.Contains(out, k) {
				t.Errorf("from %d: %q missing from %s", tc.from, k, out)
			}
		}
	}
	// A value that is not a dict goes whole; an escaped name is still found.
	odd := json.RawMessage(`{"OP_ID":"OP_INSTANCE_REINSTALL","instance_name":"i1","osparams\u005fsecret":"whole-secret"}`)
	if out := string(tab.Redact(odd, Secret)); strings.Contains(out, "whole-secret") {
		t.Errorf("escaped secret kept: %s", out)
	}
	// Nothing to hide: the very same bytes come back.
	plain := json.RawMessage(`{"OP_ID":"OP_INSTANCE_STARTUP",  "instance_name":"i1"}`)
	if out := tab.Redact(plain, Private); string(out) != string(plain) {
		t.Errorf("changed %s to %s", plain, out)
	}
	// RedactOps takes decoded ops as a LUXI client gives them.
	var decoded any
	_ = json.Unmarshal([]byte(`[`+string(in)+`]`), &decoded)
	b, _ := json.Marshal(tab.RedactOps(decoded, Private))
	if strings.Contains(string(b), "priv-value") || strings.Contains(string(b), "secret-value") {
		t.Errorf("RedactOps kept a value: %s", b)
	}
	if b, _ := json.Marshal(tab.RedactOps(42, Private)); string(b) != `"\u003credacted\u003e"` {
		t.Errorf("unreadable ops answered %s", b)
	}
}

// The creations nested in OP_INSTANCE_MULTI_ALLOC lose their secrets as a
// lone creation does; an item that is not a known opcode goes whole.
func TestRedactNestedCreations(t *testing.T) {
	tab := Default()
	in := json.RawMessage(`{"OP_ID":"OP_INSTANCE_MULTI_ALLOC","instances":[` +
		`{"OP_ID":"OP_INSTANCE_CREATE","instance_name":"i1","osparams_secret":{"s":"secret-one"},"osparams_private":{"p":"priv-one"}},` +
		`{"instance_name":"i2","osparams_secret":{"s":"secret-two"}},` +
		`{"OP_ID":"OP_INSTANCE_CREATE","instance_name":"i3"}]}`)
	out := string(tab.Redact(in, Secret))
	for _, h := range []string{"secret-one", "secret-two"} {
		if strings.Contains(out, h) {
			t.Errorf("%q kept in %s", h, out)
		}
	}
	for _, k := range []string{"priv-one", `"instance_name":"i1"`, `"instance_name":"i3"`} {
		if !strings.Contains(out, k) {
			t.Errorf("%q missing from %s", k, out)
		}
	}
	if out := string(tab.Redact(in, Private)); strings.Contains(out, "priv-one") {
		t.Errorf("private value kept from Private: %s", out)
	}
}
