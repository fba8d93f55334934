package confdb

import (
	"context"
	"testing"
)

func TestDiskRemovals(t *testing.T) {
	db, _ := open(t)
	ctx := context.Background()
	a := DiskRemoval{NodeUUID: "n1", InstanceUUID: "i1", InstanceName: "web1", Template: "file", DiskUUID: "d1", SizeMiB: 8, Mode: "rw"}
	b := a
	b.DiskUUID, b.Index = "d2", 1
	tx := db.Begin()
	tx.AddDiskRemoval(a)
	tx.AddDiskRemoval(b)
	if err := db.Commit(ctx, tx); err != nil {
		t.Fatal(err)
	}
	got, err := db.DiskRemovals(ctx)
	if err != nil || len(got) != 2 || got[0] != a || got[1] != b {
		t.Fatalf("removals %+v, %v", got, err)
	}
	// The configuration still loads with them in its prefix.
	if _, err := Open(ctx, db.st, nil); err != nil {
		t.Fatalf("reopen: %v", err)
	}
	tx = db.Begin()
	tx.DropDiskRemoval(a)
	if err := db.Commit(ctx, tx); err != nil {
		t.Fatal(err)
	}
	if got, err := db.DiskRemovals(ctx); err != nil || len(got) != 1 || got[0] != b {
		t.Fatalf("after dropping one: %+v, %v", got, err)
	}
}
