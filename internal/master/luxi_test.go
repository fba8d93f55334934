package master

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/corral/corral/internal/opcodes"
)

// TestRedactJobRows: LUXI answers never show secret parameters; private
// ones stay, since every LUXI caller may write (corral-rapi hides them
// from its readers).
func TestRedactJobRows(t *testing.T) {
	raw := json.RawMessage(`{"OP_ID":"OP_INSTANCE_CREATE","instance_name":"a","osparams_secret":{"root_password":"hunter2"},"osparams_private":{"token":"visible-to-writers"}}`)
	rows := [][]any{{float64(1), []any{raw}}, nil}
	redactJobRows(opcodes.Default(), []string{"id", "ops"}, rows)
	b, _ := json.Marshal(rows)
	if strings.Contains(string(b), "hunter2") || !strings.Contains(string(b), `"root_password":"\u003credacted\u003e"`) {
		t.Fatalf("secret not redacted: %s", b)
	}
	if !strings.Contains(string(b), `"instance_name":"a"`) || !strings.Contains(string(b), "visible-to-writers") {
		t.Fatalf("other parameters lost: %s", b)
	}
}
