package query

import (
	"encoding/json"
	"testing"

	"github.com/corral/corral/internal/qlang"
)

// TestParsedFiltersSelect runs parsed filters over rows, end to end.
func TestParsedFiltersSelect(t *testing.T) {
	type row struct {
		name string
		tags []string
		n    int
	}
	res := NewResource("t", []Field[row]{
		{Name: "name", Kind: KText, Get: func(r row) (any, int) { return ok(r.name) }},
		{Name: "tags", Kind: KOther, Get: func(r row) (any, int) { return ok(r.tags) }},
		{Name: "n", Kind: KNumber, Get: func(r row) (any, int) { return ok(r.n) }},
	})
	rows := []row{{"web1.example.com", []string{"gpu"}, 1}, {"web2", nil, 5}, {"db1", []string{"gpu"}, 3}}
	for text, want := range map[string]string{
		`name =* "web*"`:                   "web1.example.com,web2",
		`"gpu" in tags and n >= 3`:         "db1",
		`not (name =~ m/^WEB/i) or n == 1`: "web1.example.com,db1",
		`n != 5`:                           "web1.example.com,db1",
	} {
		f, err := qlang.ParseText(text)
		if err != nil {
			t.Fatalf("%s: %v", text, err)
		}
		got, err := Filter(res, rows, f)
		if err != nil {
			t.Fatalf("%s: %v", text, err)
		}
		names := ""
		for i, r := range got {
			if i > 0 {
				names += ","
			}
			names += r.name
		}
		if names != want {
			t.Errorf("%s: %s, want %s", text, names, want)
		}
	}
}

func FuzzParseText(f *testing.F) {
	for _, s := range []string{`name == "a" and not (b or "c" in d)`, `x =~ m#a\#b#is`, `n >= -4`, `a !* "w?*"`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, err := qlang.ParseText(s)
		if err != nil {
			return
		}
		// Whatever parses is a filter the server side compiles.
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatalf("%q: %v", s, err)
		}
		var back any
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatal(err)
		}
		if _, err := Compile(back, func(string) bool { return true }); err != nil {
			t.Fatalf("%q parsed to %s, which does not compile: %v", s, b, err)
		}
	})
}

func TestRequestedNames(t *testing.T) {
	parse := func(s string) any {
		var v any
		if err := json.Unmarshal([]byte(s), &v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	for in, want := range map[string]string{
		`null`: `[]`,
		`["|", ["=", "uuid", "a"], ["==", "uuid", "b"]]`: `["a","b"]`,
		`["=", "uuid", "a"]`:                             `["a"]`,
		`["|", ["=", "uuid", "a"], ["?", "x"]]`:          `no`,
		`["=", "name", "a"]`:                             `no`,
		`["=", "uuid", 5]`:                               `no`,
		`["&", ["=", "uuid", "a"]]`:                      `no`,
	} {
		names, ok := RequestedNames(parse(in), "uuid")
		got := "no"
		if ok {
			b, _ := json.Marshal(append([]string{}, names...))
			got = string(b)
		}
		if got != want {
			t.Errorf("%s: %s, want %s", in, got, want)
		}
	}
}
