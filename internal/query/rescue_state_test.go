package query

import (
	"encoding/json"
	"testing"
)

// TestInstanceRescueState: rescue_state answers where a rescue stands and
// null for an instance not in rescue, is configuration (no node asked),
// and filters.
func TestInstanceRescueState(t *testing.T) {
	res := Instances()
	rs := rows()[:3]
	rs[1].RescueState = "rescue"
	rs[2].RescueState = "unrescuing"
	b, _ := json.Marshal(res.Values(rs, []string{"name", "rescue_state"}))
	if string(b) != `[["a",null],["b","rescue"],["c","unrescuing"]]` {
		t.Fatalf("values: %s", b)
	}
	if res.NeedsLive([]string{"name", "rescue_state"}) {
		t.Fatal("rescue_state needs a node")
	}
	var f any
	_ = json.Unmarshal([]byte(`["=", "rescue_state", "rescue"]`), &f)
	got, err := Filter(res, rs, f)
	if err != nil || len(got) != 1 || got[0].Inst.Name != "b" {
		t.Fatalf("filter on rescue_state: %v, %v", got, err)
	}
}
