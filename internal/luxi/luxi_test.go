package luxi

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/corral/corral/internal/ecode"
)

func TestDecodeRequest(t *testing.T) {
	tests := []struct {
		name       string
		in         string
		wantMethod string
		wantArgs   []string
		wantErr    string
	}{
		{name: "typical", in: `{"method":"QueryTags","args":["cluster",""],"version":3010000}`,
			wantMethod: "QueryTags", wantArgs: []string{`"cluster"`, `""`}},
		{name: "no version", in: `{"method":"QueryClusterInfo","args":[]}`, wantMethod: "QueryClusterInfo", wantArgs: []string{}},
		{name: "null version", in: `{"method":"X","args":[1],"version":null}`, wantMethod: "X", wantArgs: []string{"1"}},
		{name: "nested args", in: ` {"args":[[{"OP_ID":"OP_TEST_DELAY"}]],"method":"SubmitJob"} `,
			wantMethod: "SubmitJob", wantArgs: []string{`[{"OP_ID":"OP_TEST_DELAY"}]`}},
		{name: "unknown keys ignored", in: `{"method":"X","args":[],"extra":1}`, wantMethod: "X", wantArgs: []string{}},
		{name: "not json", in: `hello`, wantErr: "not a JSON object"},
		{name: "empty", in: ``, wantErr: "not a JSON object"},
		{name: "array", in: `[1,2]`, wantErr: "not a JSON object"},
		{name: "null", in: `null`, wantErr: "not a JSON object"},
		{name: "no method", in: `{"args":[]}`, wantErr: "no method"},
		{name: "method case matters", in: `{"Method":"X","args":[]}`, wantErr: "no method"},
		{name: "method not string", in: `{"method":5,"args":[]}`, wantErr: "not a string"},
		{name: "method empty", in: `{"method":"","args":[]}`, wantErr: "method is empty"},
		{name: "no args", in: `{"method":"X"}`, wantErr: "has no args"},
		{name: "args object", in: `{"method":"X","args":{"a":1}}`, wantErr: "not a list"},
		{name: "args null", in: `{"method":"X","args":null}`, wantErr: "not a list"},
		{name: "args string", in: `{"method":"X","args":"[]"}`, wantErr: "not a list"},
		// Ganeti's servers ignore the version key; so does corrald, for
		// every client Ganeti 2.x and 3.x shipped.
		{name: "Ganeti 3.0 client", in: `{"method":"X","args":[],"version":3000000}`, wantMethod: "X", wantArgs: []string{}},
		{name: "Ganeti 2.16 client", in: `{"method":"X","args":[],"version":2160000}`, wantMethod: "X", wantArgs: []string{}},
		{name: "version not an integer", in: `{"method":"X","args":[],"version":"3010000"}`, wantMethod: "X", wantArgs: []string{}},
		{name: "trailing garbage", in: `{"method":"X","args":[]} x`, wantErr: "not a JSON object"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			method, args, err := DecodeRequest([]byte(tt.in))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if method != tt.wantMethod {
				t.Errorf("method = %q, want %q", method, tt.wantMethod)
			}
			got := make([]string, len(args))
			for i, a := range args {
				got[i] = string(a)
			}
			if !reflect.DeepEqual(got, tt.wantArgs) {
				t.Errorf("args = %q, want %q", got, tt.wantArgs)
			}
		})
	}
}

func FuzzDecodeRequest(f *testing.F) {
	f.Add([]byte(`{"method":"SubmitJob","args":[[{"OP_ID":"OP_TEST_DELAY","duration":1}]],"version":3010000}`))
	f.Add([]byte(`{"method":"QueryClusterInfo","args":[]}`))
	f.Add([]byte(`{"method":"","args":[]}`))
	f.Add([]byte(`{"method":"X","args":{}}`))
	f.Add([]byte(`{"method":"X","args":[1,"a",null,{"b":[true]}],"version":null}`))
	f.Add([]byte(`[`))
	f.Fuzz(func(t *testing.T, in []byte) {
		method, args, err := DecodeRequest(in)
		if err != nil {
			return
		}
		if method == "" {
			t.Fatal("accepted an empty method")
		}
		// What the server accepts, a client can send again unchanged.
		wire := make([]any, len(args))
		for i, a := range args {
			wire[i] = a
		}
		msg, err := encodeRequest(method, wire)
		if err != nil {
			t.Fatalf("re-encoding: %v", err)
		}
		m2, args2, err := DecodeRequest(msg)
		if err != nil {
			t.Fatalf("re-decoding %q: %v", msg, err)
		}
		if m2 != method || len(args2) != len(args) {
			t.Fatalf("round trip changed the request: %q %d -> %q %d", method, len(args), m2, len(args2))
		}
		for i := range args {
			if !jsonEqual(args[i], args2[i]) {
				t.Fatalf("arg %d changed: %s -> %s", i, args[i], args2[i])
			}
		}
	})
}

func jsonEqual(a, b []byte) bool {
	var va, vb any
	if json.Unmarshal(a, &va) != nil || json.Unmarshal(b, &vb) != nil {
		return false
	}
	return reflect.DeepEqual(va, vb)
}

func TestResponseEncoding(t *testing.T) {
	tests := []struct {
		name     string
		err      error
		wantWire string
		wantKind ecode.Kind
		wantCls  ecode.Class
		wantMsg  string
	}{
		{name: "prereq", err: ecode.Errorf(ecode.NoEnt, "Instance %q not known", "web1"),
			wantWire: `["OpPrereqError",["Instance \"web1\" not known","unknown_entity"]]`,
			wantKind: ecode.OpPrereqError, wantCls: ecode.NoEnt, wantMsg: `Instance "web1" not known`},
		{name: "job lost", err: ecode.New(ecode.JobLost, ecode.NoEnt, "Job 7 not found"),
			wantWire: `["JobLost",["Job 7 not found"]]`, wantKind: ecode.JobLost, wantCls: ecode.NoEnt, wantMsg: "Job 7 not found"},
		{name: "drained", err: ecode.New(ecode.JobQueueDrainErr, ecode.TempNoRes, "Queue drained"),
			wantWire: `["JobQueueDrainError",["Queue drained"]]`, wantKind: ecode.JobQueueDrainErr, wantCls: ecode.TempNoRes, wantMsg: "Queue drained"},
		{name: "plain error", err: errors.New("disk on fire"),
			wantWire: `["GenericError",["disk on fire"]]`, wantKind: ecode.GenericError, wantCls: ecode.Fault, wantMsg: "disk on fire"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			msg := encodeFailure(tt.err)
			var obj struct {
				Success *bool           `json:"success"`
				Result  json.RawMessage `json:"result"`
				Version *int            `json:"version"`
			}
			if err := json.Unmarshal(msg, &obj); err != nil {
				t.Fatal(err)
			}
			// No version: Ganeti's client refuses a reply whose version
			// differs from the one it sent.
			if obj.Success == nil || *obj.Success || obj.Version != nil {
				t.Fatalf("envelope wrong: %s", msg)
			}
			if !jsonEqual(obj.Result, []byte(tt.wantWire)) {
				t.Fatalf("result = %s, want %s", obj.Result, tt.wantWire)
			}
			_, err := decodeResponse(msg)
			e, ok := ecode.As(err)
			if !ok {
				t.Fatalf("decoded %v, want *ecode.Error", err)
			}
			if e.Kind != tt.wantKind || e.Class != tt.wantCls || e.Msg != tt.wantMsg {
				t.Fatalf("decoded %+v, want %s/%s/%q", e, tt.wantKind, tt.wantCls, tt.wantMsg)
			}
		})
	}
}

func TestDecodeResponse(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    string
		wantErr string
	}{
		{name: "ok", in: `{"success":true,"result":[1,2],"version":3010000}`, want: `[1,2]`},
		{name: "no version", in: `{"success":true,"result":null}`, want: `null`},
		{name: "other version", in: `{"success":true,"result":1,"version":2170000}`, wantErr: "version mismatch: server speaks 2170000, this client 3010000"},
		{name: "no success", in: `{"result":1}`, wantErr: "no boolean success"},
		{name: "no result", in: `{"success":true}`, wantErr: "no result"},
		{name: "garbage", in: `nope`, wantErr: "not a JSON object"},
		{name: "odd failure", in: `{"success":false,"result":"boom"}`, wantErr: "boom"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := decodeResponse([]byte(tt.in))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tt.want {
				t.Fatalf("result = %s, want %s", got, tt.want)
			}
		})
	}
}

func TestDecodeArgs(t *testing.T) {
	_, args, err := DecodeRequest([]byte(`{"method":"WaitForJobChange","args":[5,["status"],null,null,60]}`))
	if err != nil {
		t.Fatal(err)
	}
	var (
		id      int64
		fields  []string
		prev    []any
		serial  *int64
		timeout int
	)
	if err := DecodeArgs("WaitForJobChange", args, &id, &fields, &prev, &serial, &timeout); err != nil {
		t.Fatal(err)
	}
	if id != 5 || len(fields) != 1 || fields[0] != "status" || prev != nil || serial != nil || timeout != 60 {
		t.Fatalf("decoded %d %q %v %v %d", id, fields, prev, serial, timeout)
	}
	err = DecodeArgs("ArchiveJob", args, &id)
	if e, ok := ecode.As(err); !ok || e.Kind != ecode.LuxiError || e.Class != ecode.Inval || e.Msg != "ArchiveJob takes 1 arguments, got 5" {
		t.Fatalf("count mismatch: %v", err)
	}
	var name string
	err = DecodeArgs("X", args[:1], &name)
	if e, ok := ecode.As(err); !ok || e.Class != ecode.Inval || !strings.Contains(e.Msg, "X: argument 1") {
		t.Fatalf("type mismatch: %v", err)
	}
}
