package master

import (
	"encoding/json"
	"testing"

	"github.com/corral/corral/internal/ecode"
)

// A failed machine op's result may come out of the queue still encoded;
// MachineSubmit must answer with the error in it (its message and class,
// so the Bare Metal API answers 400 with Ironic's text), not its bytes.
func TestMachineJobErrorFromEncodedResult(t *testing.T) {
	raw := json.RawMessage(`["OpPrereqError", ["The requested action \"rescue\" can not be performed.", "wrong_input"]]`)
	for _, v := range []any{raw, []byte(raw), []any{"OpPrereqError", []any{"The requested action \"rescue\" can not be performed.", "wrong_input"}}} {
		e := ecode.Decode(wireValue(v))
		if e.Msg != `The requested action "rescue" can not be performed.` || e.Class != ecode.Inval || e.Kind != ecode.OpPrereqError {
			t.Errorf("%T: %+v", v, e)
		}
	}
}
