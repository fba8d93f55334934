package opcodes

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/corral/corral/internal/ecode"
)

func TestValidateTag(t *testing.T) {
	cases := []struct {
		tag string
		msg string // "" when valid
	}{
		{"web", ""},
		{"env:prod", ""},
		{"a.b+c*d/e:f@g-h_i", ""},
		{"ünïcödé", ""},
		{"٣", ""},
		{strings.Repeat("x", MaxTagLen), ""},
		{strings.Repeat("é", MaxTagLen), ""},
		{strings.Repeat("x", MaxTagLen+1), "Tag too long (>128 characters)"},
		{"", "Tags cannot be empty"},
		{"has space", "Tag contains invalid characters"},
		{"semi;colon", "Tag contains invalid characters"},
		{"quote'", "Tag contains invalid characters"},
		{"new\nline", "Tag contains invalid characters"},
		{"\xff", "Tag contains invalid characters"},
	}
	for _, c := range cases {
		err := ValidateTag(c.tag)
		if c.msg == "" {
			if err != nil {
				t.Errorf("%q: unexpected error %v", c.tag, err)
			}
			continue
		}
		if err == nil || err.Error() != c.msg || ecode.ClassOf(err) != ecode.Inval {
			t.Errorf("%q: got %v (class %s), want %q (wrong_input)", c.tag, err, ecode.ClassOf(err), c.msg)
		}
	}
}

func TestValidateTagKind(t *testing.T) {
	for _, k := range []string{"cluster", "node", "instance", "nodegroup", "network"} {
		if err := ValidateTagKind(k); err != nil {
			t.Errorf("%s: %v", k, err)
		}
	}
	for k, msg := range map[string]string{"job": "Wrong tag type requested (job)", "": "Wrong tag type"} {
		err := ValidateTagKind(k)
		if err == nil || !strings.Contains(err.Error(), msg) || ecode.ClassOf(err) != ecode.Inval {
			t.Errorf("%q: got %v, want %q", k, err, msg)
		}
	}
}

func TestTagOpcodes(t *testing.T) {
	tab := Default()
	ok := []string{
		`{"OP_ID":"OP_TAGS_SET","kind":"instance","name":"web1","tags":["a","b"]}`,
		`{"OP_ID":"OP_TAGS_SET","kind":"cluster","name":null,"tags":["a"],"dry_run":true}`,
		`{"OP_ID":"OP_TAGS_DEL","kind":"cluster","tags":["a"]}`,
		`{"OP_ID":"OP_TAGS_GET","kind":"node","name":"n1","use_locking":true}`,
		`{"OP_ID":"OP_TAGS_SEARCH","pattern":"^web"}`,
	}
	for _, s := range ok {
		if _, err := tab.Decode(json.RawMessage(s)); err != nil {
			t.Errorf("%s: %v", s, err)
		}
	}
	bad := []string{
		`{"OP_ID":"OP_TAGS_SET","kind":"instance","name":"web1"}`,
		`{"OP_ID":"OP_TAGS_SET","kind":"instance","name":"web1","tags":"a"}`,
		`{"OP_ID":"OP_TAGS_SET","name":"web1","tags":["a"]}`,
		`{"OP_ID":"OP_TAGS_SEARCH","pattern":""}`,
	}
	for _, s := range bad {
		if _, err := tab.Decode(json.RawMessage(s)); err == nil {
			t.Errorf("%s: accepted", s)
		}
	}
	if got := tab.Summary("OP_TAGS_SET", json.RawMessage(`{"kind":"instance","name":"web1","tags":["a"]}`)); got != "TAGS_SET(web1)" {
		t.Errorf("summary %q", got)
	}
}

// FuzzValidateTag checks that accepted tags obey every rule and that the
// validator never panics.
func FuzzValidateTag(f *testing.F) {
	for _, s := range []string{"web", "", "a b", "env:prod", "\xff\xfe", strings.Repeat("y", 129), "ü@x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, tag string) {
		if ValidateTag(tag) != nil {
			return
		}
		if tag == "" || utf8.RuneCountInString(tag) > MaxTagLen || !utf8.ValidString(tag) {
			t.Fatalf("accepted %q", tag)
		}
		if strings.ContainsAny(tag, " \t\n,;'\"\\") {
			t.Fatalf("accepted a separator in %q", tag)
		}
	})
}
