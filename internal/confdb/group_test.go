package confdb

import (
	"context"
	"errors"
	"testing"

	"github.com/corral/corral/internal/config"
)

// TestGroupDelete checks that a deleted group leaves neither the cache nor
// the store (with its name index), so the name can be taken again.
func TestGroupDelete(t *testing.T) {
	ctx := context.Background()
	db, _ := open(t)
	g := &config.NodeGroup{Meta: config.Meta{Name: "rack2"}, AllocPolicy: "preferred"}
	tx := db.Begin()
	tx.PutGroup(g)
	if err := db.Commit(ctx, tx); err != nil {
		t.Fatal(err)
	}
	cur, ok := db.Group("rack2")
	if !ok {
		t.Fatal("new group not found")
	}
	tx = db.Begin()
	tx.DeleteGroup(cur)
	if err := db.Commit(ctx, tx); err != nil {
		t.Fatal(err)
	}
	if _, ok := db.Group("rack2"); ok {
		t.Fatal("deleted group still found by name")
	}
	if _, ok := db.Group(cur.UUID); ok {
		t.Fatal("deleted group still found by uuid")
	}
	if n := len(db.Groups()); n != 1 {
		t.Fatalf("%d groups left, want 1", n)
	}
	// Deleting it again changes nothing.
	tx = db.Begin()
	tx.DeleteGroup(cur)
	if !tx.Empty() {
		t.Fatal("deleting a missing group wrote something")
	}
	// A reload agrees with the cache, and the name is free.
	re, err := Open(ctx, db.st, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := re.Group("rack2"); ok {
		t.Fatal("deleted group came back after a reload")
	}
	tx = db.Begin()
	tx.PutGroup(&config.NodeGroup{Meta: config.Meta{Name: "rack2"}})
	if err := db.Commit(ctx, tx); err != nil {
		t.Fatalf("name of a deleted group not reusable: %v", err)
	}
	// A delete from a stale cache entry loses against a concurrent write.
	a, _ := db.Group("rack2")
	tx1, tx2 := db.Begin(), db.Begin()
	tx1.DeleteGroup(a)
	a.AllocPolicy = "last_resort"
	tx2.PutGroup(a)
	if err := db.Commit(ctx, tx2); err != nil {
		t.Fatal(err)
	}
	if err := db.Commit(ctx, tx1); !errors.Is(err, ErrConflict) {
		t.Fatalf("stale delete committed: %v", err)
	}
}
