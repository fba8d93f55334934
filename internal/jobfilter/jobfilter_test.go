package jobfilter

import (
	"encoding/json"
	"testing"
)

func rule(t *testing.T, js string) *Rule {
	t.Helper()
	var r Rule
	if err := json.Unmarshal([]byte(js), &r); err != nil {
		t.Fatalf("rule %s: %v", js, err)
	}
	return &r
}

func job(id int64, ops ...string) *Job {
	raw := make([]json.RawMessage, len(ops))
	for i, o := range ops {
		raw[i] = json.RawMessage(o)
	}
	return NewJob(id, raw)
}

func TestPredicates(t *testing.T) {
	start := job(7, `{"OP_ID":"OP_INSTANCE_STARTUP","instance_name":"web1","beparams":{"memory":512},"tags":["a","b"],"force":true,
		"reason":[["gnt:client:gnt-instance","maintenance window",1700000000000000000]]}`)
	query := job(12, `{"OP_ID":"OP_TEST_DELAY","duration":1}`)
	cases := []struct {
		name  string
		preds string
		job   *Job
		want  bool
	}{
		{"no predicates", `[]`, query, true},
		{"jobid less", `[["jobid", ["<", "id", 10]]]`, start, true},
		{"jobid not less", `[["jobid", ["<", "id", 10]]]`, query, false},
		{"jobid watermark", `[["jobid", [">", "id", "watermark"]]]`, query, true},
		{"jobid at watermark", `[["jobid", [">", "id", "watermark"]]]`, start, false},
		{"jobid other string", `[["jobid", ["==", "id", "seven"]]]`, start, false},
		{"jobid other field", `[["jobid", ["!", ["==", "name", 7]]]]`, start, false},
		{"opcode id", `[["opcode", ["=", "OP_ID", "OP_INSTANCE_STARTUP"]]]`, start, true},
		{"opcode id other", `[["opcode", ["=", "OP_ID", "OP_INSTANCE_STARTUP"]]]`, query, false},
		{"opcode dotted", `[["opcode", [">=", "beparams.memory", 512]]]`, start, true},
		{"opcode regexp", `[["opcode", ["=~", "instance_name", "^web"]]]`, start, true},
		{"opcode contains", `[["opcode", ["=[]", "tags", "b"]]]`, start, true},
		{"opcode truth", `[["opcode", ["?", "force"]]]`, start, true},
		{"opcode missing field is false even negated", `[["opcode", ["!", ["=", "no_such", 1]]]]`, start, false},
		{"opcode regexp on number is false", `[["opcode", ["!", ["=~", "beparams.memory", "5"]]]]`, start, false},
		{"reason source", `[["reason", ["=", "source", "gnt:client:gnt-instance"]]]`, start, true},
		{"reason text regexp is not a comparison", `[["reason", ["=~", "reason", "maint"]]]`, start, false},
		{"reason timestamp", `[["reason", ["<", "timestamp", 1800000000000000000]]]`, start, true},
		{"reason none", `[["reason", ["=", "source", "x"]]]`, query, false},
		{"all must hold", `[["jobid", ["<", "id", 10]], ["opcode", ["=", "OP_ID", "OP_TEST_DELAY"]]]`, start, false},
		{"or", `[["opcode", ["|", ["=", "OP_ID", "OP_TEST_DELAY"], ["=", "OP_ID", "OP_X"]]]]`, query, true},
		{"not equal", `[["opcode", ["!=", "OP_ID", "OP_X"]]]`, query, true},
		{"empty filter", `[["opcode", null]]`, query, true},
	}
	for _, c := range cases {
		r := rule(t, `{"uuid":"u","watermark":10,"priority":0,"action":"REJECT","reason_trail":[],"predicates":`+c.preds+`}`)
		if got := r.Matches(c.job); got != c.want {
			t.Errorf("%s: Matches = %v, want %v", c.name, got, c.want)
		}
	}
}

func TestApplyingOrderAndContinue(t *testing.T) {
	delay := job(5, `{"OP_ID":"OP_TEST_DELAY"}`)
	pause := rule(t, `{"uuid":"b","watermark":3,"priority":10,"action":"PAUSE","predicates":[]}`)
	cont := rule(t, `{"uuid":"c","watermark":1,"priority":0,"action":"CONTINUE","predicates":[]}`)
	reject := rule(t, `{"uuid":"a","watermark":3,"priority":10,"action":"REJECT","predicates":[["opcode",["=","OP_ID","OP_TEST_DELAY"]]]}`)
	other := rule(t, `{"uuid":"d","watermark":0,"priority":5,"action":["RATE_LIMIT",2],"predicates":[["opcode",["=","OP_ID","OP_X"]]]}`)
	rules := []*Rule{pause, cont, reject, other}
	Sort(rules)
	if got := Applying(rules, delay); got != reject {
		t.Fatalf("applying = %+v, want the REJECT rule (same priority and watermark as PAUSE, lower uuid)", got)
	}
	if got := Applying([]*Rule{cont}, delay); got != nil {
		t.Fatalf("a CONTINUE rule alone applied: %+v", got)
	}
	if other.Action != (Action{RateLimit, 2}) {
		t.Fatalf("rate limit parsed as %+v", other.Action)
	}
	b, _ := json.Marshal(other)
	var back Rule
	if err := json.Unmarshal(b, &back); err != nil || back.Action != other.Action || !back.Matches(job(1, `{"OP_ID":"OP_X"}`)) {
		t.Fatalf("round trip %s: %+v %v", b, back, err)
	}
}

func TestParseErrors(t *testing.T) {
	for _, js := range []string{
		`{"action":"accept","predicates":[]}`,
		`{"action":["RATE_LIMIT",0],"predicates":[]}`,
		`{"action":["RATE_LIMIT",1.5],"predicates":[]}`,
		`{"action":"ACCEPT","predicates":[["nosuch",null]]}`,
		`{"action":"ACCEPT","predicates":[["jobid"]]}`,
		`{"action":"ACCEPT","predicates":[["jobid",["<","id",1.5]]]}`,
		`{"action":"ACCEPT","predicates":[["opcode",["~~","OP_ID","x"]]]}`,
		`{"action":"ACCEPT","predicates":[["opcode",["=~","OP_ID","("]]]}`,
		`{"action":"ACCEPT","predicates":[["opcode","OP_ID"]]}`,
	} {
		var r Rule
		if err := json.Unmarshal([]byte(js), &r); err == nil {
			t.Errorf("%s: accepted", js)
		}
	}
}

func FuzzPredicate(f *testing.F) {
	for _, s := range []string{`["opcode", ["&", ["=", "OP_ID", "OP_TEST_DELAY"], ["!", ["=~", "a.b", "x"]]]]`,
		`["jobid", ["|", ["<", "id", "watermark"], [">=", "id", 3]]]`, `["reason", ["=[]", "source", 1]]`, `["opcode", null]`} {
		f.Add(s)
	}
	j := job(3, `{"OP_ID":"OP_TEST_DELAY","a":{"b":"xyz"},"l":[1,2],"reason":[["s","r",5]]}`)
	f.Fuzz(func(t *testing.T, s string) {
		var p Predicate
		if err := json.Unmarshal([]byte(s), &p); err != nil {
			return
		}
		r := &Rule{Watermark: 2, Predicates: []Predicate{p}, Action: Action{Kind: Accept}}
		first := r.Matches(j)
		b, err := json.Marshal(r)
		if err != nil {
			t.Fatalf("marshal: %v", err)
		}
		var back Rule
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatalf("re-reading %s: %v", b, err)
		}
		if back.Matches(j) != first {
			t.Fatalf("%s matches differently after a round trip", s)
		}
	})
}
