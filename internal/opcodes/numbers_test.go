package opcodes

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/corral/corral/internal/ecode"
)

// TestDecodeNumberBounds: numbers must be finite, integral and exact where
// the parameter is an int, non-negative where Ganeti's type says so, and
// within a parameter's maximum. Each bad value is refused with a message
// naming the parameter and the value; good values pass.
func TestDecodeNumberBounds(t *testing.T) {
	tab := Default()
	delay := func(extra string) string { return `{"OP_ID":"OP_TEST_DELAY"` + extra + `}` }
	shutdown := func(v string) string {
		return `{"OP_ID":"OP_INSTANCE_SHUTDOWN","instance_name":"web1","timeout":` + v + `}`
	}
	remove := func(v string) string {
		return `{"OP_ID":"OP_INSTANCE_REMOVE","instance_name":"web1","shutdown_timeout":` + v + `}`
	}
	cases := []struct {
		in      string
		wantErr string // "" when the op is valid
	}{
		{delay(`,"duration":0`), ""},
		{delay(`,"duration":0.25`), ""},
		{delay(`,"duration":604800`), ""},
		{delay(`,"duration":1e308`), `parameter "duration": 1e+308 is above the maximum 604800 (7 days)`},
		{delay(`,"duration":604800.5`), `parameter "duration": 604800.5 is above the maximum 604800`},
		{delay(`,"duration":1e999`), `parameter "duration": expected a finite non-negative number, got +Inf`},
		{delay(`,"duration":-1e999`), `parameter "duration": expected a finite non-negative number, got -Inf`},
		{delay(`,"duration":-0.5`), `parameter "duration": expected non-negative number, got -0.5`},
		{delay(`,"duration":1,"repeat":-1`), `parameter "repeat": expected non-negative int, got -1`},
		{delay(`,"duration":1,"repeat":1e308`), `parameter "repeat": non-negative int 1e+308 is out of range`},
		{delay(`,"duration":1,"repeat":3`), ""},
		{delay(`,"duration":1,"priority":1e300`), `parameter "priority": int 1e+300 is out of range`},
		{shutdown(`0`), ""},
		{shutdown(`3600`), ""},
		{shutdown(`-5`), `parameter "timeout": expected non-negative int, got -5`},
		{shutdown(`1e308`), `parameter "timeout": non-negative int 1e+308 is out of range`},
		{shutdown(`9007199254740993`), `out of range`},
		{remove(`-1`), `parameter "shutdown_timeout": expected non-negative int, got -1`},
		{remove(`1e20`), `parameter "shutdown_timeout": non-negative int 1e+20 is out of range`},
		{remove(`120`), ""},
	}
	for _, c := range cases {
		_, err := tab.Decode(json.RawMessage(c.in))
		if c.wantErr == "" {
			if err != nil {
				t.Errorf("%s: %v", c.in, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), c.wantErr) {
			t.Errorf("%s: got %v, want error containing %q", c.in, err, c.wantErr)
			continue
		}
		if ecode.ClassOf(err) != ecode.Inval {
			t.Errorf("%s: class %s, want %s", c.in, ecode.ClassOf(err), ecode.Inval)
		}
	}
}
