package rpc

import (
	"errors"
	"net/http"
	"testing"

	"github.com/corral/corral/internal/ecode"
)

func TestWireRoundTrip(t *testing.T) {
	body, err := encodeSuccess(map[string]int{"a": 1})
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]int
	if err := decodeResponse(http.StatusOK, body, &got); err != nil || got["a"] != 1 {
		t.Fatalf("success: %v, %v", got, err)
	}
	stale := ecode.New(ecode.RemoteError, ecode.State, "stale master epoch 1 < 2")
	err = decodeResponse(errorStatus(stale), encodeFailure(stale), nil)
	e, ok := ecode.As(err)
	if !ok || *e != *stale {
		t.Fatalf("failure: %#v", err)
	}
	if errorStatus(stale) != http.StatusConflict {
		t.Fatalf("status %d", errorStatus(stale))
	}
}

func TestDecodeResponseRejects(t *testing.T) {
	tests := []struct {
		status int
		body   string
	}{
		{200, "not json"},
		{200, `{"ok":false}`},
		{500, `{"ok":true,"result":1}`},
		{200, `{"ok":false,"error":{`},
		{502, `<html>bad gateway</html>`},
	}
	for _, tc := range tests {
		err := decodeResponse(tc.status, []byte(tc.body), nil)
		if err == nil {
			t.Errorf("decodeResponse(%d, %q) succeeded", tc.status, tc.body)
			continue
		}
		if ecode.ClassOf(err) != ecode.Fault {
			t.Errorf("decodeResponse(%d, %q): class %s", tc.status, tc.body, ecode.ClassOf(err))
		}
	}
	var n int
	if err := decodeResponse(200, []byte(`{"ok":true,"result":"x"}`), &n); ecode.ClassOf(err) != ecode.Fault {
		t.Errorf("wrong result type: %v", err)
	}
}

func TestValidNames(t *testing.T) {
	for m, want := range map[string]bool{"instance_start": true, "blockdev-create.v2": true, "": false, "A": false, "a/b": false, "a b": false} {
		if validMethod(m) != want {
			t.Errorf("validMethod(%q) != %v", m, want)
		}
	}
	for op, want := range map[string]bool{"": true, "job/12/op/0/step/3": true, "a b": false, "a\nb": false, "é": false} {
		if validOpID(op) != want {
			t.Errorf("validOpID(%q) != %v", op, want)
		}
	}
}

func FuzzDecodeResponse(f *testing.F) {
	ok, _ := encodeSuccess([]string{"x"})
	f.Add(200, ok)
	f.Add(409, encodeFailure(ecode.Errorf(ecode.State, "busy")))
	f.Add(500, []byte(`{"ok":false,"error":["OpExecError",["boom"]]}`))
	f.Add(500, []byte(`{"ok":false,"error":"text"}`))
	f.Add(200, []byte(`{"ok":true}`))
	f.Add(200, []byte(`null`))
	f.Fuzz(func(t *testing.T, status int, body []byte) {
		var reply any
		err := decodeResponse(status, body, &reply)
		if err == nil {
			if status != http.StatusOK {
				t.Fatalf("success with status %d", status)
			}
			return
		}
		if _, ok := ecode.As(err); !ok {
			t.Fatalf("error %v is not an *ecode.Error", err)
		}
		if errors.Is(err, ErrUnreachable) {
			t.Fatal("a decoded answer claims the node was unreachable")
		}
		// Whatever came in, re-encoding the error must decode to the same class.
		again := decodeResponse(errorStatus(err), encodeFailure(err), nil)
		if ecode.ClassOf(again) != ecode.ClassOf(err) {
			t.Fatalf("class changed across a second hop: %s -> %s", ecode.ClassOf(err), ecode.ClassOf(again))
		}
	})
}
