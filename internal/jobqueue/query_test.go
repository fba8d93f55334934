package jobqueue

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"math"
	"reflect"
	"testing"
	"time"
)

// decoded is v as a client sends it back: through JSON.
func decoded(t testing.TB, v any) any {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestDecodedForm(t *testing.T) {
	tests := []struct {
		v    any
		want bool
	}{
		{decoded(t, []any{int64(1), "a", []int64{2}, map[string]any{"k": nil}, true, []any{}}), true},
		{[]any{"running"}, true},
		{[]any{int64(1)}, false},
		{[]any{[]any(nil)}, false},
		{map[string]any(nil), false},
		{[]any{"\xff"}, false},
		{map[string]any{"\xff": 1.0}, false},
		{[]any{json.RawMessage(`1`)}, false},
	}
	for _, tt := range tests {
		if got := decodedForm(tt.v); got != tt.want {
			t.Errorf("decodedForm(%#v) = %v, want %v", tt.v, got, tt.want)
		}
		if tt.want && !reflect.DeepEqual(normalize(tt.v), tt.v) {
			t.Errorf("decodedForm(%#v), but normalize changes it", tt.v)
		}
	}
}

func TestEqualsDecoded(t *testing.T) {
	entry := []any{int64(3), []int64{1700000000, 5}, "message", json.RawMessage(`{"a": [1, "<b>"]}`)}
	ch := make(chan int)
	row := []any{int64(7), "running", 0, false, []any{json.RawMessage(`{"OP_ID":"OP_TEST_DELAY","duration":1.5}`)},
		[]any{nil}, []any{"running"}, []any{[]any{entry}}, []any{[]int64{1, 2}}, []any{nil}, []any{"OP_TEST_DELAY(x)"},
		[]int64{100, 0}, nil}
	tests := []struct {
		name string
		cur  any
		prev any
		want bool
	}{
		{"row against its decoded self", row, decoded(t, row), true},
		{"string", "running", "running", true},
		{"other string", "running", "success", false},
		{"string against number", "1", 1.0, false},
		{"int64 as float64", int64(42), 42.0, true},
		{"int64 near 2^53 rounds as decoding does", int64(1<<53 + 1), float64(1 << 53), true},
		{"int", 3, 3.0, true},
		{"int against int64", int64(3), int64(3), false}, // prev is never undecoded
		{"bool", true, true, true},
		{"bool against nil", false, nil, false},
		{"nil", nil, nil, true},
		{"nil against empty list", nil, []any{}, false},
		{"nil []any is null", []any(nil), nil, true},
		{"empty []any is a list", []any{}, []any{}, true},
		{"empty []any against nil", []any{}, nil, false},
		{"nil []int64 is null", []int64(nil), nil, true},
		{"timestamp", []int64{5, 6}, []any{5.0, 6.0}, true},
		{"timestamp differs", []int64{5, 6}, []any{5.0, 7.0}, false},
		{"timestamp length differs", []int64{5, 6}, []any{5.0}, false},
		{"raw object, keys in any order", json.RawMessage(`{"b":1,"a":[true]}`), map[string]any{"a": []any{true}, "b": 1.0}, true},
		{"raw null", json.RawMessage(`null`), nil, true},
		{"nil raw message is null", json.RawMessage(nil), nil, true},
		{"invalid UTF-8 is replaced", "a\xffb", "a\ufffdb", true},
		{"float", 1.5, 1.5, true},
		{"map", map[string]any{"x": int64(1)}, map[string]any{"x": 1.0}, true},
		{"longer list", []any{"a", "b"}, []any{"a"}, false},
		// What JSON cannot encode: normalize gives the value back whole.
		{"NaN inside", []any{"a", math.NaN()}, []any{"a", nil}, false},
		{"invalid raw message inside", []any{json.RawMessage(`{`)}, []any{nil}, false},
		{"unencodable, prev of another length", []any{math.Inf(1)}, []any{}, false},
		{"unencodable and identical", []any{ch}, []any{ch}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := equalsDecoded(tt.cur, tt.prev); got != tt.want {
				t.Errorf("equalsDecoded = %v, want %v", got, tt.want)
			}
			if ref := reflect.DeepEqual(normalize(tt.cur), tt.prev); ref != tt.want {
				t.Errorf("the JSON round trip says %v: the test's expectation is wrong", ref)
			}
		})
	}
}

// genValue builds a value of the kinds query rows hold from fuzz bytes.
func genValue(b []byte, depth int) (any, []byte) {
	if len(b) == 0 {
		return nil, b
	}
	k, b := b[0], b[1:]
	num := func() (int64, []byte) {
		if len(b) < 8 {
			return int64(len(b)), nil
		}
		return int64(binary.LittleEndian.Uint64(b)), b[8:]
	}
	switch k % 12 {
	case 0:
		return nil, b
	case 1:
		n := min(int(k>>4), len(b))
		return string(b[:n]), b[n:]
	case 2:
		return k&0x10 != 0, b
	case 3:
		v, rest := num()
		return v, rest
	case 4:
		v, rest := num()
		return int(int32(v)), rest
	case 5:
		v, rest := num()
		return math.Float64frombits(uint64(v)), rest
	case 6:
		var l []int64
		if k&0x10 != 0 {
			l = []int64{}
		}
		for i := 0; i < int(k>>5); i++ {
			var v int64
			v, b = num()
			l = append(l, v)
		}
		return l, b
	case 7, 8:
		if depth > 4 {
			return nil, b
		}
		var l []any
		if k&0x10 != 0 {
			l = []any{}
		}
		for i := 0; i < int(k>>5); i++ {
			var v any
			v, b = genValue(b, depth+1)
			l = append(l, v)
		}
		return l, b
	case 9:
		n := min(int(k>>4), len(b))
		return json.RawMessage(b[:n]), b[n:]
	case 10:
		n := min(int(k>>4), len(b))
		return map[string]any{string(b[:n]): int64(k)}, b[n:]
	}
	return json.RawMessage(nil), b
}

// FuzzEqualsDecoded checks the walk against the JSON round trip it
// replaces, for prev values that are the same, decoded from bytes, or
// built by the same generator.
func FuzzEqualsDecoded(f *testing.F) {
	f.Add([]byte{7 | 3<<5, 1 | 5<<4, 'r', 'u', 'n', 'n', 'i', 0xff, 3, 1, 2, 3, 4, 5, 6, 7, 8, 6 | 2<<5}, []byte(`["runni",1,[0,0]]`))
	f.Add([]byte{9 | 4<<4, '[', '1', ' ', ']'}, []byte(`[1]`))
	f.Add([]byte{5, 0, 0, 0, 0, 0, 0, 0xf8, 0x7f}, []byte(`null`))
	f.Add([]byte{8 | 1<<5 | 0x10, 10 | 1<<4, 'k'}, []byte(`[{"k":10}]`))
	f.Fuzz(func(t *testing.T, gen, js []byte) {
		cur, rest := genValue(gen, 0)
		other, _ := genValue(rest, 0)
		var fromJSON any
		_ = json.Unmarshal(js, &fromJSON)
		for _, prev := range []any{normalize(cur), fromJSON, normalize(other), other} {
			want := reflect.DeepEqual(normalize(cur), prev)
			if got := equalsDecoded(cur, prev); got != want {
				t.Fatalf("equalsDecoded(%#v, %#v) = %v, round trip says %v", cur, prev, got, want)
			}
		}
		// What decodedForm lets through unnormalized must be what
		// normalize would give back (or all it can give: the value itself).
		for _, v := range []any{cur, other, fromJSON} {
			if _, err := json.Marshal(v); err == nil && decodedForm(v) && !reflect.DeepEqual(normalize(v), v) {
				t.Fatalf("decodedForm(%#v), but normalize gives %#v", v, normalize(v))
			}
		}
	})
}

// A client sends back the job info it got (decoded from JSON): for every
// field, WaitForChange must see no change and wait; and must see a change
// when the job moves on.
func TestWaitForChangeDecodedPrevAllFields(t *testing.T) {
	e := newEnv(t, nil)
	ctx := ctxT(t)
	g := newGate()
	e.runner.on("OP_LOGGATE", func(ctx context.Context, h *OpHandle) (any, error) {
		if err := h.SetRunning(ctx); err != nil {
			return nil, err
		}
		if err := h.Log(ctx, "message", map[string]any{"text": "<a> & b", "n": 1}); err != nil {
			return nil, err
		}
		if err := g.pass(ctx); err != nil {
			return nil, err
		}
		return map[string]any{"done": true}, nil
	})
	id := e.submit(`{"OP_ID":"OP_LOGGATE", "comment": "x\u00e9"}`, `{"OP_ID":"OP_NOOP","result":[1,2.5,"<"]}`)
	g.wait(t)
	fields := Fields()
	info, logs, changed, err := e.q.WaitForChange(ctx, id, fields, nil, -1, 0)
	if err != nil || !changed || len(logs) != 1 {
		t.Fatalf("first call: %v %v %v", logs, changed, err)
	}
	prev := decoded(t, info).([]any)
	for i, f := range fields {
		_, _, changed, err := e.q.WaitForChange(ctx, id, []string{f}, []any{prev[i]}, 1, time.Millisecond)
		if err != nil || changed {
			t.Errorf("field %s: decoded prev %v reported as changed (%v)", f, prev[i], err)
		}
	}
	if _, _, changed, _ := e.q.WaitForChange(ctx, id, fields, prev, 1, time.Millisecond); changed {
		t.Error("all fields: decoded prev reported as changed")
	}
	stale := decoded(t, info).([]any)
	stale[1] = "queued"
	if _, _, changed, _ := e.q.WaitForChange(ctx, id, fields, stale, 1, time.Hour); !changed {
		t.Error("a differing status was not reported as a change")
	}
	// The op finishing changes opstatus and opresult: a waiter wakes.
	done := make(chan bool, 1)
	go func() {
		_, _, changed, _ := e.q.WaitForChange(ctx, id, []string{"opstatus", "opresult"}, []any{prev[6], prev[5]}, 1, testTimeout)
		done <- changed
	}()
	g.open()
	if !recv(t, done, "waiter did not wake") {
		t.Error("the op's end was not reported as a change")
	}
}
