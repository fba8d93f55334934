package config

import (
	"encoding/json"
	"testing"
	"time"
)

func TestStatusConditions(t *testing.T) {
	t0 := time.Unix(1000, 0)
	var s Status
	if !s.Empty() || s.IsTrue("Running") {
		t.Fatal("a new status says something")
	}
	if !s.SetCondition(Condition{Type: "Running", Status: ConditionFalse, Reason: "NotRunning"}, t0) {
		t.Fatal("adding a condition changed nothing")
	}
	s.SetCondition(Condition{Type: "DisksLeft", Status: ConditionTrue, Reason: "NodeUnreachable"}, t0)
	if s.Conditions[0].Type != "DisksLeft" || s.Conditions[1].Type != "Running" {
		t.Fatalf("conditions not sorted by type: %+v", s.Conditions)
	}
	// Same status, new reason: changed, but the transition time stays.
	if !s.SetCondition(Condition{Type: "Running", Status: ConditionFalse, Reason: "Restarting", Message: "try 1"}, t0.Add(time.Minute)) {
		t.Fatal("a new reason changed nothing")
	}
	c, _ := s.Condition("Running")
	if c.Time != 1000 || c.Reason != "Restarting" {
		t.Fatalf("after a new reason: %+v", c)
	}
	// The very same condition again is no change.
	if s.SetCondition(Condition{Type: "Running", Status: ConditionFalse, Reason: "Restarting", Message: "try 1"}, t0.Add(2*time.Minute)) {
		t.Fatal("setting the same condition reported a change")
	}
	// A new status moves the transition time.
	s.SetCondition(Condition{Type: "Running", Status: ConditionTrue, Reason: "Restarted"}, t0.Add(3*time.Minute))
	if c, _ := s.Condition("Running"); c.Time != 1180 || !s.IsTrue("Running") {
		t.Fatalf("after the status changed: %+v", c)
	}
	cl := s.Clone()
	cl.Conditions[0].Reason = "Changed"
	if s.Conditions[0].Reason == "Changed" {
		t.Fatal("Clone shares its conditions")
	}
	if !s.RemoveCondition("DisksLeft") || s.RemoveCondition("DisksLeft") || len(s.Conditions) != 1 {
		t.Fatalf("RemoveCondition: %+v", s.Conditions)
	}
	b, err := json.Marshal(&s)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"conditions":[{"type":"Running","status":"True","reason":"Restarted","last_transition_time":1180}]}`
	if string(b) != want {
		t.Fatalf("JSON %s, want %s", b, want)
	}
	if (*Status)(nil).Clone() != nil || !(*Status)(nil).Empty() {
		t.Fatal("nil status")
	}
}
