package election

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestParseRecord(t *testing.T) {
	tests := []struct {
		in   string
		want record
		err  string
	}{
		{`{"name":"node1","address":"10.0.0.1:1811"}`, record{"node1", "10.0.0.1:1811"}, ""},
		{`{"name":"node1"}`, record{Name: "node1"}, ""},
		{`{"name":"node1","later":true}`, record{Name: "node1"}, ""},
		{`{"address":"x"}`, record{}, "empty name"},
		{`{"name":"a\u0000b"}`, record{}, "control"},
		{`{"name":"` + strings.Repeat("n", 256) + `"}`, record{}, "longer"},
		{`{"name":1}`, record{}, "leader record"},
		{`null`, record{}, "empty name"},
		{``, record{}, "leader record"},
	}
	for _, tc := range tests {
		got, err := parseRecord([]byte(tc.in))
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("parseRecord(%q) = %+v, %v; want error %q", tc.in, got, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("parseRecord(%q) = %+v, %v; want %+v", tc.in, got, err, tc.want)
		}
	}
}

func TestParseHandover(t *testing.T) {
	tests := []struct {
		in   string
		want handover
		err  string
	}{
		{`{"to":"b","from":"a"}`, handover{"b", "a"}, ""},
		{`{"to":"b"}`, handover{To: "b"}, ""},
		{`{"from":"a"}`, handover{}, "empty handover target"},
		{`{"to":"b","from":"\u007f"}`, handover{}, "control"},
		{`[]`, handover{}, "handover record"},
	}
	for _, tc := range tests {
		got, err := parseHandover([]byte(tc.in))
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("parseHandover(%q) = %+v, %v; want error %q", tc.in, got, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("parseHandover(%q) = %+v, %v; want %+v", tc.in, got, err, tc.want)
		}
	}
}

// FuzzParseRecord: whatever the key holds, parsing does not panic, and a
// record it accepts encodes back to one that parses the same.
func FuzzParseRecord(f *testing.F) {
	for _, s := range []string{`{"name":"node1","address":"10.0.0.1:1811"}`, `{"name":"n"}`, `{}`, `{"name":"\u00e9"}`, `{"name":"\ud800"}`, `nul`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := parseRecord(b)
		if err != nil {
			return
		}
		enc, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		again, err := parseRecord(enc)
		if err != nil || again != r {
			t.Fatalf("round trip of %+v: %+v, %v", r, again, err)
		}
	})
}

// FuzzParseHandover is FuzzParseRecord for the handover key.
func FuzzParseHandover(f *testing.F) {
	for _, s := range []string{`{"to":"b","from":"a"}`, `{"to":""}`, `{"to":"b","to":"c"}`, `"b"`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := parseHandover(b)
		if err != nil {
			return
		}
		enc, err := json.Marshal(h)
		if err != nil {
			t.Fatal(err)
		}
		again, err := parseHandover(enc)
		if err != nil || again != h {
			t.Fatalf("round trip of %+v: %+v, %v", h, again, err)
		}
	})
}
