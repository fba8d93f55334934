package master

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"math"
	"reflect"
	"testing"
)

func TestPlainArgs(t *testing.T) {
	ints := []struct {
		in   string
		want int64
		ok   bool
	}{
		{"0", 0, true}, {"42", 42, true}, {"-7", -7, true}, {"-0", 0, true},
		{"999999999999999", 999999999999999, true},
		{"1000000000000000", 0, false}, // 16 digits: float64 decoding may round
		{"012", 0, false}, {"1.0", 0, false}, {"1e3", 0, false}, {`"5"`, 0, false},
		{"null", 0, false}, {"", 0, false}, {"-", 0, false}, {" 1", 0, false},
	}
	for _, tt := range ints {
		got, ok := plainInt([]json.RawMessage{json.RawMessage(tt.in)}, 0)
		if got != tt.want || ok != tt.ok {
			t.Errorf("plainInt(%q) = %d %v, want %d %v", tt.in, got, ok, tt.want, tt.ok)
		}
	}
	if _, ok := plainInt(nil, 0); ok {
		t.Error("plainInt read a missing argument")
	}
	lists := []struct {
		in   string
		want []string
		ok   bool
	}{
		{`["status"]`, []string{"status"}, true},
		{`[ "id" , "oplog" ]`, []string{"id", "oplog"}, true},
		{`[]`, []string{}, true},
		{` [ ] `, nil, false}, // not how an argument arrives
		{`["a\"b"]`, nil, false}, {`["é"]`, nil, false}, {`["a",]`, nil, false},
		{`["a"] x`, nil, false}, {`["a"`, nil, false}, {`[1]`, nil, false}, {`null`, nil, false},
	}
	for _, tt := range lists {
		got, ok := plainStrings([]json.RawMessage{json.RawMessage(tt.in)}, 0)
		if ok != tt.ok || (ok && !reflect.DeepEqual(got, tt.want)) {
			t.Errorf("plainStrings(%q) = %q %v, want %q %v", tt.in, got, ok, tt.want, tt.ok)
		}
	}
}

// The fast readers must agree with encoding/json whenever they answer.
func FuzzPlainArgs(f *testing.F) {
	for _, s := range []string{"12", "-0", "0012", "1e2", `["status","oplog"]`, `[ "a" ]`, `[]`, `["a\u0062"]`, `["a",1]`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		args := []json.RawMessage{in}
		if n, ok := plainInt(args, 0); ok {
			var f64 float64
			var i64 int64
			if json.Unmarshal(in, &f64) != nil || json.Unmarshal(in, &i64) != nil || int64(f64) != n || i64 != n {
				t.Fatalf("plainInt(%q) = %d; encoding/json gives %v, %d", in, n, f64, i64)
			}
		}
		if l, ok := plainStrings(args, 0); ok {
			var want []string
			if err := json.Unmarshal(in, &want); err != nil || !reflect.DeepEqual(l, want) {
				t.Fatalf("plainStrings(%q) = %q; encoding/json gives %q, %v", in, l, want, err)
			}
		}
	})
}

func TestAppendJSON(t *testing.T) {
	entry := []any{int64(3), []int64{1700000000, 5}, "message", json.RawMessage(`{"a": "<b> & c"}`)}
	values := []any{
		[]any{[]any{"running", int64(-4), 0, true, nil, []int64(nil), []any(nil), []int64{}}, [][]any{entry}},
		[]any{[]any{"a\"b", "<x>", "tab\there", "é", "\u2028", "\xff", "\x7f"}, [][]any{}},
		[][]any(nil), [][]any{nil},
		[]any{1.5, math.MaxInt64, float64(1e21), map[string]any{"z": 1, "a": []string{"x"}}},
		json.RawMessage(` [ 1 ,  2 ] `),
	}
	for _, v := range values {
		want, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		got, err := appendJSON([]byte("prefix:"), v)
		if err != nil || !bytes.Equal(got, append([]byte("prefix:"), want...)) {
			t.Errorf("%#v:\n got %s (%v)\nwant prefix:%s", v, got, err, want)
		}
		// The LUXI server encodes the json.RawMessage the handler returns:
		// that must leave it as it is.
		again, err := json.Marshal(json.RawMessage(got[len("prefix:"):]))
		if err != nil || !bytes.Equal(again, want) {
			t.Errorf("%#v: re-encoded as %s (%v)", v, again, err)
		}
	}
	for _, bad := range []any{[]any{math.NaN()}, [][]any{{json.RawMessage(`{`)}}, []any{func() {}}} {
		if _, err := appendJSON(nil, bad); err == nil {
			t.Errorf("%#v encoded without error", bad)
		}
	}
}

// genReply builds a value of the kinds WaitForJobChange answers hold.
func genReply(b []byte, depth int) (any, []byte) {
	if len(b) == 0 {
		return nil, b
	}
	k, b := b[0], b[1:]
	n := int(k >> 4)
	switch k % 10 {
	case 0:
		return nil, b
	case 1:
		n = min(n, len(b))
		return string(b[:n]), b[n:]
	case 2:
		return k&0x10 != 0, b
	case 3:
		if len(b) < 8 {
			return int64(n), b
		}
		return int64(binary.LittleEndian.Uint64(b)), b[8:]
	case 4:
		return int(k) - 128, b
	case 5:
		if len(b) < 8 {
			return 0.5, b
		}
		return math.Float64frombits(binary.LittleEndian.Uint64(b)), b[8:]
	case 6:
		var l []int64
		if k&0x10 != 0 {
			l = []int64{}
		}
		for i := 0; i < n>>1 && len(b) > 0; i++ {
			l = append(l, int64(int8(b[0])))
			b = b[1:]
		}
		return l, b
	case 7:
		var l []any
		if k&0x10 != 0 || depth > 3 {
			l = []any{}
		}
		for i := 0; i < n>>1 && depth <= 3; i++ {
			var e any
			e, b = genReply(b, depth+1)
			l = append(l, e)
		}
		return l, b
	case 8:
		var l [][]any
		if k&0x10 != 0 || depth > 3 {
			l = [][]any{}
		}
		for i := 0; i < n>>1 && depth <= 3; i++ {
			var e any
			e, b = genReply(b, depth+1)
			le, _ := e.([]any)
			l = append(l, le)
		}
		return l, b
	}
	n = min(n, len(b))
	return json.RawMessage(b[:n]), b[n:]
}

// appendJSON must give json.Marshal's bytes, and fail where it fails.
func FuzzAppendJSON(f *testing.F) {
	f.Add([]byte{7 | 4<<4, 1 | 3<<4, 'a', '<', 'b', 3, 1, 2, 3, 4, 5, 6, 7, 8, 8 | 2<<4, 7 | 2<<4, 6 | 6<<4, 1, 2, 3})
	f.Add([]byte{9 | 5<<4, '{', '"', 'a', '"', '}'})
	f.Add([]byte{1 | 2<<4, 0xe2, 0x80})
	f.Add([]byte{5, 0, 0, 0, 0, 0, 0, 0xf0, 0x7f})
	f.Fuzz(func(t *testing.T, in []byte) {
		v, _ := genReply(in, 0)
		want, werr := json.Marshal(v)
		got, err := appendJSON(nil, v)
		if (err == nil) != (werr == nil) || (err == nil && !bytes.Equal(got, want)) {
			t.Fatalf("%#v: appendJSON %q %v, json.Marshal %q %v", v, got, err, want, werr)
		}
	})
}
