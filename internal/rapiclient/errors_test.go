package rapiclient

import (
	"net/http"
	"testing"

	"github.com/corral/corral/internal/ecode"
)

func TestDecodeError(t *testing.T) {
	for _, tc := range []struct {
		status int
		body   string
		kind   ecode.Kind
		class  ecode.Class
		msg    string
	}{
		{400, `{"code": 400, "message": "Invalid body parameters: x &lt; y", "explain": "Bad request"}`, ecode.OpPrereqError, ecode.Inval, "Invalid body parameters: x < y"},
		{404, `{"code": 404, "message": "Not Found", "explain": "Nothing matches the given URI"}`, ecode.OpPrereqError, ecode.NoEnt, "Not Found"},
		{409, `{"code": 409, "message": "Instance 'web1' already exists"}`, ecode.OpPrereqError, ecode.State, "Instance 'web1' already exists"},
		{409, `{"code": 409, "message": "exists", "class": "already_exists"}`, ecode.OpPrereqError, ecode.Exists, "exists"},
		{409, `{"code": 409, "message": "m", "class": "made_up"}`, ecode.OpPrereqError, ecode.State, "m"},
		{401, `{"code": 401, "message": "Unauthorized"}`, ecode.PermissionDenied, ecode.Environ, "Unauthorized"},
		{403, ``, ecode.PermissionDenied, ecode.Environ, "Forbidden"},
		{501, `{"code": 501, "message": "Not implemented in Corral yet: networks"}`, ecode.GenericError, ecode.Environ, "Not implemented in Corral yet: networks"},
		{502, `{"code": 502, "message": "Can't connect to the master daemon: x"}`, ecode.LuxiError, ecode.Environ, "Can't connect to the master daemon: x"},
		{503, `{"code": 503, "message": "queue full"}`, ecode.GenericError, ecode.TempNoRes, "queue full"},
		{500, `{"code": 500, "message": 7}`, ecode.GenericError, ecode.Fault, "Internal Server Error"},
		{502, "Bad gateway from the proxy\n", ecode.LuxiError, ecode.Environ, "Bad gateway from the proxy"},
		{599, `null`, ecode.GenericError, ecode.Fault, "HTTP status 599"},
	} {
		e := DecodeError(tc.status, []byte(tc.body))
		if e.Kind != tc.kind || e.Class != tc.class || e.Msg != tc.msg {
			t.Errorf("DecodeError(%d, %q) = %s/%s %q; want %s/%s %q", tc.status, tc.body, e.Kind, e.Class, e.Msg, tc.kind, tc.class, tc.msg)
		}
	}
}

// Every class a server can send over HTTP comes back as a class with the
// same status, so exit codes follow the class over RAPI as over LUXI.
func TestDecodeErrorInvertsHTTPStatus(t *testing.T) {
	for _, c := range []ecode.Class{ecode.Inval, ecode.NoEnt, ecode.State, ecode.TempNoRes, ecode.Fault} {
		status := ecode.HTTPStatus(ecode.Errorf(c, "x"))
		if got := DecodeError(status, nil); ecode.HTTPStatus(got) != status {
			t.Errorf("class %s: status %d decodes to class %s (status %d)", c, status, got.Class, ecode.HTTPStatus(got))
		}
	}
}

func FuzzDecodeError(f *testing.F) {
	f.Add(400, []byte(`{"code": 400, "message": "bad", "explain": "x"}`))
	f.Add(409, []byte(`{"message": "&amp;&lt;", "class": "already_exists"}`))
	f.Add(404, []byte(`[1, 2]`))
	f.Add(500, []byte("\x00\xff"))
	f.Add(0, []byte(``))
	f.Add(http.StatusServiceUnavailable, []byte(`{"message": null, "class": 3}`))
	f.Fuzz(func(t *testing.T, status int, body []byte) {
		e := DecodeError(status, body)
		if e == nil || e.Msg == "" || e.Class == "" || e.Kind == "" {
			t.Fatalf("DecodeError(%d, %q) = %#v: want kind, class and message", status, body, e)
		}
		if !knownClasses[e.Class] {
			t.Fatalf("class %q is not a known class", e.Class)
		}
	})
}
