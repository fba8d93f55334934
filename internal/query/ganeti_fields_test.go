package query

import (
	"encoding/json"
	"os"
	"slices"
	"testing"
)

// ganetiFields reads testdata/ganeti-3.0-fields.json: per resource,
// [name, title, kind] of every field Ganeti 3.0.2 declares (written by
// testdata/ganeti-fields.py from Ganeti's own field lists).
func ganetiFields(t *testing.T) map[string][][3]string {
	t.Helper()
	raw, err := os.ReadFile("testdata/ganeti-3.0-fields.json")
	if err != nil {
		t.Fatal(err)
	}
	var all map[string]json.RawMessage
	if err := json.Unmarshal(raw, &all); err != nil {
		t.Fatal(err)
	}
	out := map[string][][3]string{}
	for res, v := range all {
		if res == "_source" {
			continue
		}
		var l [][3]string
		if err := json.Unmarshal(v, &l); err != nil {
			t.Fatalf("%s: %v", res, err)
		}
		out[res] = l
	}
	return out
}

// corralOnlyFields are fields Corral has beyond Ganeti's, per resource.
var corralOnlyFields = map[string][]string{
	"node":     {"version", "status"},
	"instance": {"rescue_state"},
	"group":    {"hv_state", "disk_state"},
}

// AllDefs is what QueryFields answers for every resource; the test below
// holds it to Ganeti's lists.
func TestEveryGanetiFieldExists(t *testing.T) {
	want := ganetiFields(t)
	for _, res := range []string{"instance", "node", "group", "job", "cluster", "os", "export", "lock", "network", "filter"} {
		defs, found := AllDefs(res)
		if !found {
			t.Errorf("resource %s: not known", res)
			continue
		}
		got := map[string]FieldDef{}
		for _, d := range defs {
			got[d.Name] = d
		}
		if len(want[res]) == 0 {
			t.Errorf("resource %s: no Ganeti fields in testdata", res)
		}
		for _, w := range want[res] {
			d, ok := got[w[0]]
			switch {
			case !ok:
				t.Errorf("%s: field %s missing", res, w[0])
			case d.Title != w[1] || string(d.Kind) != w[2]:
				t.Errorf("%s: field %s is (%s, %s), Ganeti's is (%s, %s)", res, w[0], d.Title, d.Kind, w[1], w[2])
			case d.Doc == "":
				t.Errorf("%s: field %s has no description", res, w[0])
			}
			delete(got, w[0])
		}
		for name := range got {
			if !slices.Contains(corralOnlyFields[res], name) {
				t.Errorf("%s: field %s is not Ganeti's; add it to corralOnlyFields (and docs/GANETI.md) if meant", res, name)
			}
		}
	}
	if _, found := AllDefs("nonsense"); found {
		t.Error("an unknown resource has fields")
	}
}
