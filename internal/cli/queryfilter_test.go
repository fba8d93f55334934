package cli

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestListFilterFromArguments(t *testing.T) {
	cases := []struct {
		args    []string
		force   bool
		numeric bool
		want    string // "" when the classic query serves
	}{
		{nil, false, false, ""},
		{[]string{"web1", "web2"}, false, false, ""},
		{[]string{"web*"}, false, false, `["|",["=~","name","^web[^.]*(\\..*)?$"]]`},
		{[]string{`admin_state == "up"`}, false, false, `["==","admin_state","up"]`},
		{[]string{"offline"}, true, false, `["?","offline"]`},
		{[]string{"7"}, false, true, ""},
		{[]string{"id > 7"}, false, true, `["\u003e","id",7]`},
	}
	for _, c := range cases {
		o := listOpts{filter: c.force}
		f, err := o.listFilter(c.args, "name", c.numeric)
		if err != nil {
			t.Errorf("%v: %v", c.args, err)
			continue
		}
		got := ""
		if f != nil {
			b, _ := json.Marshal(f)
			got = string(b)
		}
		if got != c.want {
			t.Errorf("%v (force %v): %s, want %s", c.args, c.force, got, c.want)
		}
	}
	o := listOpts{filter: true}
	if _, err := o.listFilter([]string{"a", "b"}, "name", false); err == nil {
		t.Error("-F with two arguments accepted")
	}
	if _, err := o.listFilter([]string{"name =="}, "name", false); err == nil || !strings.Contains(err.Error(), "Failed to parse query filter") {
		t.Errorf("bad filter: %v", err)
	}
}

func TestFilterRuleFlags(t *testing.T) {
	r := filterRuleFlags{predicates: `[["jobid", [">", "id", "watermark"]]]`, action: "RATE_LIMIT 3", reason: "maintenance"}
	preds, action, reason, err := r.parts()
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal([]any{preds, action})
	if string(b) != `[[["jobid",["\u003e","id","watermark"]]],["RATE_LIMIT",3]]` {
		t.Errorf("parts: %s", b)
	}
	if len(reason) != 1 || reason[0].([]any)[0] != "gnt:user" || reason[0].([]any)[1] != "maintenance" {
		t.Errorf("reason %v", reason)
	}
	r = filterRuleFlags{predicates: `{"not": "a list"}`, action: "PAUSE"}
	if _, _, _, err := r.parts(); err == nil {
		t.Error("predicates that are not a list accepted")
	}
	var out strings.Builder
	rows := [][]any{{"u-1", 12.0, 0.0, []any{[]any{"jobid", nil}}, []any{"RATE_LIMIT", 2.0}, []any{}}, {"u-2", 3.0, 5.0, []any{}, "PAUSE", []any{}}}
	if err := writeFilterInfo(&out, rows); err != nil {
		t.Fatal(err)
	}
	want := "UUID: u-1\n  Watermark: 12\n  Priority: 0\n  Predicates: [[\"jobid\",null]]\n  Action: [\"RATE_LIMIT\",2]\n  Reason trail: []\n" +
		"UUID: u-2\n  Watermark: 3\n  Priority: 5\n  Predicates: []\n  Action: PAUSE\n  Reason trail: []\n"
	if out.String() != want {
		t.Errorf("info:\n%s\nwant:\n%s", out.String(), want)
	}
}
