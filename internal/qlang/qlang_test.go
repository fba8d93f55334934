package qlang

import (
	"encoding/json"
	"testing"
)

func TestParseText(t *testing.T) {
	cases := map[string]string{
		`name == "web1"`:                `["==","name","web1"]`,
		`name = 'web1'`:                 `["==","name","web1"]`,
		`pinst_cnt > 0 and not offline`: `["\u0026",["\u003e","pinst_cnt",0],["!",["?","offline"]]]`,
		`a or b and c`:                  `["|",["?","a"],["\u0026",["?","b"],["?","c"]]]`,
		`(a or b) and c`:                `["\u0026",["|",["?","a"],["?","b"]],["?","c"]]`,
		`a and b and c`:                 `["\u0026",["?","a"],["?","b"],["?","c"]]`,
		`name =~ m/^web\d+$/i`:          `["=~","name","(?i)^web\\d+$"]`,
		`name !~ #a/b#`:                 `["!",["=~","name","a/b"]]`,
		`name =~ /a\/b/`:                `["=~","name","a/b"]`,
		`"gpu" in tags`:                 `["=[]","tags","gpu"]`,
		`5 not in disk.sizes`:           `["!",["=[]","disk.sizes",5]]`,
		`name =* "web*"`:                `["=~","name","^web[^.]*(\\..*)?$"]`,
		`name !* "w?b"`:                 `["!",["=~","name","^w[^.]b(\\..*)?$"]]`,
		`mtime <= -3 or x != "y"`:       `["|",["\u003c=","mtime",-3],["!=","x","y"]]`,
		`not not drained`:               `["!",["!",["?","drained"]]]`,
		"  status==\"running\"\t":       `["==","status","running"]`,
		`nic.mode/0 == "bridged"`:       `["==","nic.mode/0","bridged"]`,
	}
	for in, want := range cases {
		f, err := ParseText(in)
		if err != nil {
			t.Errorf("%s: %v", in, err)
			continue
		}
		b, _ := json.Marshal(f)
		if string(b) != want {
			t.Errorf("%s:\n got %s\nwant %s", in, b, want)
		}
	}
	for _, bad := range []string{``, `name ==`, `== 1`, `(a`, `a)`, `name =~ m/x/q`, `name =~ /(/`, `"x" in`, `"x" tags`,
		`name == unquoted`, `a and`, `name =* 5`, `name == "open`, `1 == name`, `name @ 1`} {
		if f, err := ParseText(bad); err == nil {
			t.Errorf("%q parsed as %v", bad, f)
		}
	}
}

func TestMakeFilter(t *testing.T) {
	cases := []struct {
		args    []string
		force   bool
		numeric bool
		want    string
	}{
		{nil, false, false, `null`},
		{[]string{"web1", "db*"}, false, false, `["|",["=","name","web1"],["=~","name","^db[^.]*(\\..*)?$"]]`},
		{[]string{"admin_state == \"up\""}, false, false, `["==","admin_state","up"]`},
		{[]string{"offline"}, true, false, `["?","offline"]`},
		{[]string{"7", "9"}, false, true, `["|",["=","id",7],["=","id",9]]`},
	}
	for _, c := range cases {
		field := ""
		if c.numeric {
			field = "id"
		}
		f, err := MakeFilter(c.args, c.force, field, c.numeric)
		if err != nil {
			t.Errorf("%v: %v", c.args, err)
			continue
		}
		if b, _ := json.Marshal(f); string(b) != c.want {
			t.Errorf("%v: got %s want %s", c.args, b, c.want)
		}
	}
	if _, err := MakeFilter([]string{"a", "b"}, true, "", false); err == nil {
		t.Error("two arguments taken as one filter")
	}
	if _, err := MakeFilter([]string{"x"}, false, "id", true); err == nil {
		t.Error("a non-numeric job id accepted")
	}
}
