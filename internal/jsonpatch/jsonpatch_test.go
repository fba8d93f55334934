package jsonpatch

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

func mustDoc(t testing.TB, s string) any {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatal(err)
	}
	return v
}

func TestApply(t *testing.T) {
	cases := []struct {
		name, doc, patch, want, err string
	}{
		{"add nested", `{"driver_info": {}}`, `[{"op": "add", "path": "/driver_info/ipmi_address", "value": "10.0.0.1"}]`,
			`{"driver_info": {"ipmi_address": "10.0.0.1"}}`, ""},
		{"replace nested", `{"properties": {"cpus": 1}}`, `[{"op": "replace", "path": "/properties/cpus", "value": 8}]`,
			`{"properties": {"cpus": 8}}`, ""},
		{"replace missing", `{"properties": {}}`, `[{"op": "replace", "path": "/properties/cpus", "value": 8}]`, "", `member "cpus" does not exist`},
		{"remove", `{"a": {"b": 1, "c": 2}}`, `[{"op": "remove", "path": "/a/b"}]`, `{"a": {"c": 2}}`, ""},
		{"list insert and append", `{"l": [1, 3]}`, `[{"op": "add", "path": "/l/1", "value": 2}, {"op": "add", "path": "/l/-", "value": 4}]`,
			`{"l": [1, 2, 3, 4]}`, ""},
		{"list remove", `{"l": [1, 2, 3]}`, `[{"op": "remove", "path": "/l/0"}]`, `{"l": [2, 3]}`, ""},
		{"list index out of range", `{"l": [1]}`, `[{"op": "add", "path": "/l/5", "value": 2}]`, "", "out of range"},
		{"leading zero", `{"l": [1, 2]}`, `[{"op": "remove", "path": "/l/01"}]`, "", "not a list index"},
		{"escapes", `{"a/b": {"c~d": 1}}`, `[{"op": "replace", "path": "/a~1b/c~0d", "value": 2}]`, `{"a/b": {"c~d": 2}}`, ""},
		{"bad escape", `{"a": 1}`, `[{"op": "remove", "path": "/a~2"}]`, "", "bad escape"},
		{"test passes", `{"a": {"b": [1, {"c": null}]}}`, `[{"op": "test", "path": "/a/b", "value": [1, {"c": null}]}]`, `{"a": {"b": [1, {"c": null}]}}`, ""},
		{"test fails", `{"a": 1}`, `[{"op": "test", "path": "/a", "value": 2}]`, "", "test failed"},
		{"move", `{"a": {"x": 1}, "b": {}}`, `[{"op": "move", "from": "/a/x", "path": "/b/y"}]`, `{"a": {}, "b": {"y": 1}}`, ""},
		{"move into itself", `{"a": {"x": 1}}`, `[{"op": "move", "from": "/a", "path": "/a/x/y"}]`, "", "into itself"},
		{"copy is deep", `{"a": {"x": [1]}, "b": {}}`, `[{"op": "copy", "from": "/a", "path": "/b/c"}, {"op": "add", "path": "/b/c/x/-", "value": 2}]`,
			`{"a": {"x": [1]}, "b": {"c": {"x": [1, 2]}}}`, ""},
		{"through a scalar", `{"a": 1}`, `[{"op": "add", "path": "/a/b", "value": 2}]`, "", "neither an object nor a list"},
		{"second op fails, named", `{"a": 1}`, `[{"op": "replace", "path": "/a", "value": 2}, {"op": "remove", "path": "/zz"}]`, "",
			"operation 1 (remove /zz)"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ops, err := Decode([]byte(c.patch))
			if err != nil {
				t.Fatalf("decode: %v", err)
			}
			got, err := Apply(mustDoc(t, c.doc), ops)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("error %v, want one containing %q", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if want := mustDoc(t, c.want); !reflect.DeepEqual(got, want) {
				t.Errorf("got %v, want %v", got, want)
			}
		})
	}
}

func TestDecodeRefusesMalformedOperations(t *testing.T) {
	for body, want := range map[string]string{
		`[]`:                                       "no operations",
		`[{"op": "add", "path": "/a"}]`:            "has no value",
		`[{"op": "move", "path": "/a"}]`:           "has no from",
		`[{"op": "jump", "path": "/a"}]`:           "unknown op",
		`[{"op": "remove"}]`:                       "has no path",
		`[{"op": "remove", "path": "a"}]`:          "must start with /",
		`[{"op": "remove", "path": 1}]`:            "path must be a string",
		`[{"op": "remove", "path": "/a", "x": 1}]`: `unknown member "x"`,
		`{"op": "remove"}`:                         "JSON list",
	} {
		if _, err := Decode([]byte(body)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v, want %q", body, err, want)
		}
	}
	// A null value is a value.
	if _, err := Decode([]byte(`[{"op": "replace", "path": "/a", "value": null}]`)); err != nil {
		t.Errorf("null value: %v", err)
	}
}

// FuzzApply checks that any patch on any document either fails or
// leaves a document that still encodes as JSON, never panics, and that a
// passing test of a path right after an add of that path holds.
func FuzzApply(f *testing.F) {
	f.Add(`{"driver_info": {"a": 1}, "l": [1, 2]}`, `[{"op": "add", "path": "/driver_info/b", "value": {"x": [1]}}]`)
	f.Add(`{"l": [1, 2]}`, `[{"op": "remove", "path": "/l/1"}, {"op": "add", "path": "/l/-", "value": 3}]`)
	f.Add(`{"a": {"b": {}}}`, `[{"op": "move", "from": "/a/b", "path": "/c"}, {"op": "copy", "from": "/c", "path": "/a/d"}]`)
	f.Add(`{"a~b": 1}`, `[{"op": "test", "path": "/a~0b", "value": 1}]`)
	f.Fuzz(func(t *testing.T, doc, patch string) {
		var d any
		if json.Unmarshal([]byte(doc), &d) != nil {
			return
		}
		ops, err := Decode([]byte(patch))
		if err != nil {
			return
		}
		out, err := Apply(d, ops)
		if err != nil {
			return
		}
		if _, err := json.Marshal(out); err != nil {
			t.Fatalf("patched document does not encode: %v", err)
		}
		last := ops[len(ops)-1]
		if last.Op == "add" || last.Op == "replace" {
			var v any
			if json.Unmarshal(last.Value, &v) != nil {
				return
			}
			tokens, _ := splitPointer(last.Path)
			if tokens[len(tokens)-1] == "-" {
				return
			}
			got, err := get(out, tokens)
			if err != nil || !reflect.DeepEqual(got, v) {
				t.Fatalf("after %s %s the value is %v (%v), want %v", last.Op, last.Path, got, err, v)
			}
		}
	})
}
