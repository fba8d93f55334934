package cmdlib

import (
	"context"
	"encoding/json"
	"path/filepath"
	"testing"
	"time"

	"github.com/corral/corral/internal/config"
)

// TestInstanceQueryDataStatus: OP_INSTANCE_QUERY_DATA adds "status" only
// for an instance that has one, so Ganeti's answer is unchanged otherwise.
func TestInstanceQueryDataStatus(t *testing.T) {
	e := openEnv(t, filepath.Join(t.TempDir(), "s.db"), newNodeDouble(), true)
	defer e.close()
	for _, n := range []string{"i1", "i2"} {
		if st, res := e.run(t, create(n, nil)); st != "success" {
			t.Fatalf("create %s: %s %v", n, st, res)
		}
	}
	i1, _ := e.cfg.Instance("i1")
	s := &config.Status{State: "down", Target: config.AdminUp, LastError: "restart job 7: boom"}
	s.SetCondition(config.Condition{Type: "Running", Status: config.ConditionFalse, Reason: "RestartGaveUp", Message: "gave up"}, time.Unix(100, 0))
	tx := e.cfg.Begin()
	tx.PutInstanceStatus(i1.UUID, s)
	if err := e.cfg.Commit(context.Background(), tx); err != nil {
		t.Fatal(err)
	}
	st, res := e.run(t, map[string]any{"OP_ID": "OP_INSTANCE_QUERY_DATA", "instances": []any{"i1", "i2"}, "static": true})
	if st != "success" {
		t.Fatalf("query data: %s %v", st, res)
	}
	raw, _ := json.Marshal(res[0])
	var out map[string]map[string]json.RawMessage
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatal(err)
	}
	want := `{"state":"down","target":"up","last_error":"restart job 7: boom","conditions":[{"type":"Running","status":"False","reason":"RestartGaveUp","message":"gave up","last_transition_time":100}]}`
	if got := string(out["i1"]["status"]); got != want {
		t.Errorf("i1 status %s, want %s", got, want)
	}
	if _, ok := out["i2"]["status"]; ok {
		t.Errorf("i2 without a status answers one: %s", out["i2"]["status"])
	}
}
