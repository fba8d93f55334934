package confdb

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/corral/corral/internal/config"
)

func runningFalse(reason string) *config.Status {
	s := &config.Status{State: "stopped", Target: config.AdminUp, LastError: "exit 1"}
	s.SetCondition(config.Condition{Type: "Running", Status: config.ConditionFalse, Reason: reason}, time.Unix(5, 0))
	return s
}

// TestStatusApartFromConfiguration: an object's status is stored under its
// own key, survives a reload, bumps no serial number, does not conflict
// with a concurrent change of the object, and goes with the object.
func TestStatusApartFromConfiguration(t *testing.T) {
	ctx := context.Background()
	db, _ := open(t)
	if err := commit(t, db, func(tx *Tx) { tx.PutInstance(inst("web1", "aa:00:00:00:00:01")) }); err != nil {
		t.Fatal(err)
	}
	if db.InstanceStatus("web1") != nil {
		t.Fatal("a new instance has a status")
	}
	before, _ := db.Instance("web1")
	// A job read the instance; the watcher writes its status meanwhile.
	if err := commit(t, db, func(tx *Tx) {
		if !tx.PutInstanceStatus(before.UUID, runningFalse("RestartGaveUp")) {
			t.Fatal("status of a known instance refused")
		}
	}); err != nil {
		t.Fatal(err)
	}
	after, _ := db.Instance("web1")
	if after.Serial != before.Serial || after.MTime != before.MTime {
		t.Fatalf("a status write changed the instance: serial %d -> %d", before.Serial, after.Serial)
	}
	before.OS = "changed"
	if err := commit(t, db, func(tx *Tx) { tx.PutInstance(before) }); err != nil {
		t.Fatalf("a status write made a configuration change conflict: %v", err)
	}
	if got := indexKeys(t, db, pfxStatus); !slices.Equal(got, []string{"instance/" + before.UUID}) {
		t.Fatalf("status keys %v", got)
	}
	re, err := Open(ctx, db.st, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []*DB{db, re} {
		st := d.InstanceStatus("WEB1")
		if c, ok := st.Condition("Running"); !ok || c.Reason != "RestartGaveUp" || c.Time != 5 || st.LastError != "exit 1" {
			t.Fatalf("status %+v", st)
		}
	}
	// The returned status is a copy.
	db.InstanceStatus("web1").Conditions[0].Reason = "Scribbled"
	if c, _ := db.InstanceStatus("web1").Condition("Running"); c.Reason != "RestartGaveUp" {
		t.Fatal("InstanceStatus returned the cache's own status")
	}
	// An empty status removes the key.
	if err := commit(t, db, func(tx *Tx) { tx.PutInstanceStatus(before.UUID, &config.Status{}) }); err != nil {
		t.Fatal(err)
	}
	if db.InstanceStatus("web1") != nil || len(indexKeys(t, db, pfxStatus)) != 0 {
		t.Fatal("an empty status left a key")
	}
	// A status of an instance removed meanwhile is refused by the store.
	if err := commit(t, db, func(tx *Tx) { tx.PutInstanceStatus(before.UUID, runningFalse("NotRunning")) }); err != nil {
		t.Fatal(err)
	}
	cur, _ := db.Instance("web1")
	late := db.Begin()
	late.PutInstanceStatus(cur.UUID, runningFalse("Restarting"))
	if err := commit(t, db, func(tx *Tx) { tx.DeleteInstance(cur) }); err != nil {
		t.Fatal(err)
	}
	if len(indexKeys(t, db, pfxStatus)) != 0 {
		t.Fatal("removing the instance left its status")
	}
	if err := db.Commit(ctx, late); !errors.Is(err, ErrConflict) {
		t.Fatalf("status of a removed instance committed: %v", err)
	}
	if db.Begin().PutInstanceStatus(cur.UUID, runningFalse("NotRunning")) {
		t.Fatal("status of an unknown instance accepted")
	}
}

// TestNodeStatus: nodes keep statuses the same way.
func TestNodeStatus(t *testing.T) {
	db, _ := open(t)
	n, _ := db.Node("n1")
	st := &config.Status{}
	st.SetCondition(config.Condition{Type: "DisksLeft", Status: config.ConditionTrue, Reason: "NodeUnreachable"}, time.Unix(9, 0))
	if err := commit(t, db, func(tx *Tx) { tx.PutNodeStatus(n.UUID, st) }); err != nil {
		t.Fatal(err)
	}
	re, err := Open(context.Background(), db.st, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !re.NodeStatus("N1").IsTrue("DisksLeft") || re.InstanceStatus(n.UUID) != nil {
		t.Fatalf("node status after reload: %+v", re.NodeStatus("n1"))
	}
}
