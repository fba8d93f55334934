package jobqueue

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
)

func TestParseOp(t *testing.T) {
	tests := []struct {
		in      string
		want    OpParams
		wantErr bool
	}{
		{in: `{"OP_ID":"OP_TEST_DELAY"}`, want: OpParams{OpID: "OP_TEST_DELAY"}},
		{in: ` {"OP_ID":"OP_X","priority":-10,"comment":"c","reason":[["gnt:client","r",1]]}`,
			want: OpParams{OpID: "OP_X", Priority: -10, Comment: "c", Reason: json.RawMessage(`[["gnt:client","r",1]]`)}},
		{in: `{"OP_ID":"OP_X","priority":null,"depends":null,"comment":null}`, want: OpParams{OpID: "OP_X"}},
		{in: `{"OP_ID":"OP_X","depends":[[3,["success","error"]],[-1,[]],[7,null]]}`,
			want: OpParams{OpID: "OP_X", Depends: []Dependency{
				{JobID: 3, Statuses: []Status{StatusSuccess, StatusError}},
				{JobID: -1, Statuses: []Status{}},
				{JobID: 7},
			}}},
		{in: `{"OP_ID":"OP_X","priority":19}`, want: OpParams{OpID: "OP_X", Priority: 19}},
		{in: `{"OP_ID":"OP_X","priority":-21}`, wantErr: true},
		{in: `{"OP_ID":"OP_X","priority":1.5}`, wantErr: true},
		{in: `{"OP_ID":"OP_X","depends":[[1]]}`, wantErr: true},
		{in: `{"OP_ID":"OP_X","depends":[["1",[]]]}`, wantErr: true},
		{in: `{"OP_ID":"OP_X","depends":[[1,["queued"]]]}`, wantErr: true},
		{in: `{"OP_ID":"OP_X","depends":{}}`, wantErr: true},
		{in: `{"OP_ID":"OP_X","comment":5}`, wantErr: true},
		{in: `{"OP_ID":"OP_X","reason":"why"}`, wantErr: true},
		{in: `{"OP_ID":""}`, wantErr: true},
		{in: `{}`, wantErr: true},
		{in: `null`, wantErr: true},
		{in: ``, wantErr: true},
		{in: `{"OP_ID":"OP_X"`, wantErr: true},
	}
	for _, tc := range tests {
		got, err := ParseOp(json.RawMessage(tc.in))
		if (err != nil) != tc.wantErr {
			t.Errorf("%s: err %v", tc.in, err)
			continue
		}
		if err == nil && !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s:\n got %+v\nwant %+v", tc.in, got, tc.want)
		}
	}
}

func TestResolveDepends(t *testing.T) {
	ids := []int64{10, 11, 12}
	deps := []Dependency{{JobID: -1}, {JobID: -2, Statuses: []Status{StatusSuccess}}, {JobID: 4}}
	got, err := resolveDepends(deps, ids, 2)
	if err != nil {
		t.Fatal(err)
	}
	want := []Dependency{{JobID: 11}, {JobID: 10, Statuses: []Status{StatusSuccess}}, {JobID: 4}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v", got)
	}
	if deps[0].JobID != -1 {
		t.Error("input changed")
	}
	for _, bad := range []int64{-3, -1 << 62, -1 << 63} {
		if _, err := resolveDepends([]Dependency{{JobID: bad}}, ids, 2); err == nil {
			t.Errorf("relative %d resolved", bad)
		}
	}
}

func TestRecordRoundTrip(t *testing.T) {
	in := json.RawMessage("{ \"OP_ID\" : \"OP_X\",\n \"x\": \"<&>\" }")
	r := &jobRecord{
		ID:       42,
		Received: &Timestamp{1, 2},
		Start:    &Timestamp{3, 4},
		Ops: []opRecord{
			{Input: in, Status: StatusRunning, Priority: -3, Cursor: 2, StepData: json.RawMessage(`{"a":1}`),
				Locks: []string{"a", "b"}, Depends: []Dependency{{JobID: 7, Statuses: []Status{StatusSuccess}}},
				Start: &Timestamp{5, 6}, Exec: &Timestamp{7, 8}, LogFirst: 3},
			{Input: json.RawMessage(`{"OP_ID":"OP_Y"}`), Status: StatusCanceling, Kill: true,
				Suspend: &suspension{Until: &Timestamp{9, 10}, Event: "ev"}, Result: json.RawMessage(`["E",["m"]]`)},
		},
	}
	data, err := r.encode()
	if err != nil {
		t.Fatal(err)
	}
	if !json.Valid(data) {
		t.Fatalf("invalid JSON: %s", data)
	}
	back, err := decodeRecord(data)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(back.Ops[0].Input, in) {
		t.Errorf("input not kept: %q", back.Ops[0].Input)
	}
	again, _ := back.encode()
	if !bytes.Equal(again, data) {
		t.Errorf("re-encoding differs:\n%s\n%s", data, again)
	}
	back.Ops[0].Input, back.Ops[1].Input = nil, nil
	r.Ops[0].Input, r.Ops[1].Input = nil, nil
	if !reflect.DeepEqual(back, r) {
		t.Errorf("round trip:\n got %+v\nwant %+v", back, r)
	}
}

func FuzzParseOp(f *testing.F) {
	for _, s := range []string{
		`{"OP_ID":"OP_TEST_DELAY","duration":1}`,
		`{"OP_ID":"OP_X","priority":-10,"depends":[[-1,["success"]],[5,[]]],"comment":"c","reason":[]}`,
		`{"OP_ID":"OP_X","priority":100}`,
		`{"OP_ID":"OP_X","depends":[[1,["bogus"]]]}`,
		`[]`, `{`, `{"OP_ID":null}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := ParseOp(data)
		if err != nil {
			return
		}
		if p.OpID == "" || p.Priority < PrioHighest || p.Priority > PrioLowest {
			t.Fatalf("accepted %q as %+v", data, p)
		}
		for _, d := range p.Depends {
			for _, s := range d.Statuses {
				if !s.Finalized() {
					t.Fatalf("non-final dependency status %q accepted", s)
				}
			}
		}
		// A valid op always makes a record that encodes to valid JSON and
		// decodes back with the input intact.
		r := &jobRecord{ID: 1, Ops: []opRecord{{Input: data, Status: StatusQueued, Priority: p.Priority, Depends: p.Depends}}}
		enc, err := r.encode()
		if err != nil {
			t.Fatalf("encode: %v", err)
		}
		back, err := decodeRecord(enc)
		if err != nil {
			t.Fatalf("decode of %s: %v", enc, err)
		}
		if !bytes.Equal(back.Ops[0].Input, data) {
			t.Fatalf("input %q came back as %q", data, back.Ops[0].Input)
		}
	})
}

func FuzzDecodeRecord(f *testing.F) {
	r := &jobRecord{ID: 3, Received: &Timestamp{1, 2}, Ops: []opRecord{{
		Input: json.RawMessage(`{"OP_ID":"OP_X"}`), Status: StatusSuccess, Result: json.RawMessage(`1`)}}}
	good, _ := r.encode()
	for _, s := range [][]byte{good, []byte(`{"id":1,"ops":[]}`), []byte(`{"id":1,"ops":[{"input":[],"status":"queued"}]}`),
		[]byte(`{"id":1,"ops":[{"input":{},"status":"nope"}]}`), []byte(`{"id":"x"}`), []byte(`null`),
		[]byte(`{"id":1,"ops":[{"input":{},"status":"running","cursor":1,"began":{"step":1,"name":"s","check":"c"}}]}`),
		[]byte(`{"id":1,"ops":[{"input":{},"status":"running","began":{"step":"x"}}]}`)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		rec, err := decodeRecord(data)
		if err != nil {
			return
		}
		if len(rec.Ops) == 0 {
			t.Fatal("record without ops accepted")
		}
		for _, op := range rec.Ops {
			if !op.Status.valid() {
				t.Fatalf("status %q accepted", op.Status)
			}
		}
		_ = rec.status()
		_ = rec.priority()
		enc, err := rec.encode()
		if err != nil {
			return // e.g. step data that is not valid JSON on its own
		}
		if _, err := decodeRecord(enc); err != nil {
			t.Fatalf("re-decode of %s: %v", enc, err)
		}
	})
}

func FuzzDecodeLogEntry(f *testing.F) {
	e := logEntry{Serial: 7, Time: Timestamp{1, 2}, Type: "message", Message: json.RawMessage(`"hi"`)}
	for _, s := range [][]byte{e.encode(), []byte(`[1,[1,2],"t",{"a":1}]`), []byte(`[1,2,3]`), []byte(`[1,[1],"t",1]`), []byte(`{}`)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		got, err := decodeLogEntry(data)
		if err != nil {
			return
		}
		back, err := decodeLogEntry(got.encode())
		if err != nil {
			t.Fatalf("re-decode: %v", err)
		}
		if back.Serial != got.Serial || back.Time != got.Time || back.Type != got.Type {
			t.Fatalf("round trip %+v -> %+v", got, back)
		}
	})
}
