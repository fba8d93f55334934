package master

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestRedactJobRows(t *testing.T) {
	raw := json.RawMessage(`[{"OP_ID":"OP_INSTANCE_CREATE","instance_name":"a","osparams_secret":{"root_password":"hunter2"}}]`)
	rows := [][]any{{float64(1), raw}, nil}
	redactJobRows([]string{"id", "ops"}, rows)
	b, _ := json.Marshal(rows)
	if strings.Contains(string(b), "hunter2") || !strings.Contains(string(b), `"root_password":"\u003credacted\u003e"`) {
		t.Fatalf("secret not redacted: %s", b)
	}
	if !strings.Contains(string(b), `"instance_name":"a"`) {
		t.Fatalf("other parameters lost: %s", b)
	}
}
