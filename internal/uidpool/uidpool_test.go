package uidpool

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/corral/corral/internal/ecode"
)

func TestParse(t *testing.T) {
	tests := []struct {
		in   string
		want string
		err  bool
	}{
		{"", "", false},
		{"1000", "1000", false},
		{"1000-1009, 2000", "1000-1009, 2000", false},
		{" 2000 ,1000 - 1009,, ", "1000-1009, 2000", false},
		{"5-5", "5", false},
		{"0-4294967295", "0-4294967295", false},
		{"10-5", "", true},
		{"1-2-3", "", true},
		{"x", "", true},
		{"-5", "", true},
		{"5-", "", true},
		{"4294967296", "", true},
		{"-1", "", true},
	}
	for _, tt := range tests {
		p, err := Parse(tt.in)
		if tt.err {
			if err == nil {
				t.Errorf("Parse(%q) = %v, want an error", tt.in, p)
			} else if ecode.ClassOf(err) != ecode.Inval {
				t.Errorf("Parse(%q) error class %v, want inval", tt.in, ecode.ClassOf(err))
			}
			continue
		}
		if err != nil {
			t.Errorf("Parse(%q): %v", tt.in, err)
			continue
		}
		if got := p.String(); got != tt.want {
			t.Errorf("Parse(%q).String() = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestLinesAndJSON(t *testing.T) {
	p, err := Parse("2000, 1000-1009")
	if err != nil {
		t.Fatal(err)
	}
	if got := p.Lines(); got != "1000-1009\n2000\n" {
		t.Errorf("Lines = %q", got)
	}
	data, _ := json.Marshal(p)
	if string(data) != "[[1000,1009],[2000,2000]]" {
		t.Errorf("JSON = %s", data)
	}
	var back any
	_ = json.Unmarshal(data, &back)
	q, err := FromPairs(back)
	if err != nil || q.String() != p.String() {
		t.Errorf("FromPairs = %v, %v", q, err)
	}
	if p.Size() != 11 || !p.Contains(1005) || p.Contains(1010) {
		t.Errorf("Size %d / Contains wrong", p.Size())
	}
	for _, bad := range []any{"x", []any{[]any{1.0}}, []any{[]any{2.0, 1.0}}, []any{[]any{-1.0, 1.0}}, []any{[]any{1.5, 2.0}}} {
		if _, err := FromPairs(bad); err == nil {
			t.Errorf("FromPairs(%v) accepted", bad)
		}
	}
}

func TestAddRemove(t *testing.T) {
	p, _ := Parse("1000-1009")
	add, _ := Parse("2000, 1000-1009")
	got, err := Add(p, add)
	if err != nil || got.String() != "1000-1009, 2000" {
		t.Fatalf("Add = %v, %v", got, err)
	}
	if p.String() != "1000-1009" {
		t.Errorf("Add changed its input: %v", p)
	}
	rm, _ := Parse("1000-1009")
	got, err = Remove(got, rm)
	if err != nil || got.String() != "2000" {
		t.Fatalf("Remove = %v, %v", got, err)
	}
	partial, _ := Parse("1000-1005")
	if _, err := Remove(p, partial); err == nil || !strings.Contains(err.Error(), "not in the pool") {
		t.Errorf("Remove of a range not present exactly: %v", err)
	}
	if _, err := Add(p, Pool{{5, 1}}); err == nil {
		t.Errorf("Add of a reversed range accepted")
	}
}

// FuzzParse checks that whatever Parse accepts formats back to a text that
// parses to the same pool.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"", "1000-1009, 2000", " 5 - 7 ,, 3", "1-2-3", "4294967295", "9-1", "a"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p, err := Parse(s)
		if err != nil {
			var e *ecode.Error
			if !errors.As(err, &e) {
				t.Fatalf("Parse(%q) error is not an ecode.Error: %v", s, err)
			}
			return
		}
		if err := p.Check(); err != nil {
			t.Fatalf("Parse(%q) returned an invalid pool: %v", s, err)
		}
		q, err := Parse(p.String())
		if err != nil {
			t.Fatalf("Parse(String()) of %q: %v", s, err)
		}
		if q.String() != p.String() || len(q) != len(p) {
			t.Fatalf("round trip of %q: %q != %q", s, q, p)
		}
	})
}
