package confdb

import (
	"context"
	"errors"
	"path/filepath"
	"testing"

	"github.com/corral/corral/internal/config"
	"github.com/corral/corral/internal/ecode"
	"github.com/corral/corral/internal/store/boltstore"
)

func open(t *testing.T) (*DB, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "c.db")
	st, err := boltstore.Open(path, boltstore.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	db, err := Bootstrap(context.Background(), st, &config.Cluster{Meta: config.Meta{Name: "c"}, ClusterName: "c"},
		&config.NodeGroup{Meta: config.Meta{Name: "default"}}, &config.Node{Meta: config.Meta{Name: "n1"}})
	if err != nil {
		t.Fatal(err)
	}
	return db, path
}

func inst(name, mac string) *config.Instance {
	return &config.Instance{Meta: config.Meta{Name: name}, NICs: []config.NIC{{MAC: mac}}}
}

func TestIndexesAndConflicts(t *testing.T) {
	ctx := context.Background()
	db, _ := open(t)
	if _, err := Bootstrap(ctx, db.st, &config.Cluster{}, &config.NodeGroup{}, &config.Node{}); err == nil {
		t.Fatal("bootstrap twice succeeded")
	}
	a := inst("a", "AA:00:00:00:00:01")
	tx := db.Begin()
	tx.PutInstance(a)
	if err := db.Commit(ctx, tx); err != nil {
		t.Fatal(err)
	}
	if !db.MACInUse("aa:00:00:00:00:01") || a.Serial != 1 || a.UUID == "" {
		t.Fatalf("after create: %+v", a)
	}
	// A second instance with the same name or MAC is refused by the store.
	for _, dup := range []*config.Instance{inst("a", "aa:00:00:00:00:02"), inst("b", "aa:00:00:00:00:01")} {
		tx := db.Begin()
		tx.PutInstance(dup)
		if err := db.Commit(ctx, tx); !errors.Is(err, ErrConflict) {
			t.Fatalf("duplicate %s committed: %v", dup.Name, err)
		}
	}
	// Two writers from the same revision: the second loses.
	x, _ := db.Instance("a")
	y, _ := db.Instance("a")
	tx1, tx2 := db.Begin(), db.Begin()
	x.OS = "one"
	tx1.PutInstance(x)
	y.OS = "two"
	tx2.PutInstance(y)
	if err := db.Commit(ctx, tx1); err != nil {
		t.Fatal(err)
	}
	if err := db.Commit(ctx, tx2); !errors.Is(err, ErrConflict) || ecode.ClassOf(err) != ecode.TempNoRes {
		t.Fatalf("lost update not detected: %v", err)
	}
	// A copy read before another writer's commit cannot overwrite it.
	old, _ := db.Instance("a")
	fresh, _ := db.Instance("a")
	fresh.OS = "three"
	tx = db.Begin()
	tx.PutInstance(fresh)
	if err := db.Commit(ctx, tx); err != nil {
		t.Fatal(err)
	}
	old.OS = "stale"
	tx = db.Begin()
	tx.PutInstance(old)
	if err := db.Commit(ctx, tx); !errors.Is(err, ErrConflict) {
		t.Fatalf("stale copy overwrote a newer commit: %v", err)
	}
	if cur, _ := db.Instance("a"); cur.OS != "three" {
		t.Fatalf("OS is %q", cur.OS)
	}
	// Rename moves the name index; the old name is free again.
	r, _ := db.Instance("a")
	r.Name = "renamed"
	r.NICs[0].MAC = "aa:00:00:00:00:03"
	tx = db.Begin()
	tx.PutInstance(r)
	if err := db.Commit(ctx, tx); err != nil {
		t.Fatal(err)
	}
	if _, ok := db.Instance("a"); ok || db.MACInUse("aa:00:00:00:00:01") || !db.MACInUse("aa:00:00:00:00:03") {
		t.Fatal("rename left stale indexes")
	}
	tx = db.Begin()
	tx.PutInstance(inst("a", "aa:00:00:00:00:01"))
	if err := db.Commit(ctx, tx); err != nil {
		t.Fatalf("old name not reusable: %v", err)
	}
}

func TestReopenLoadsEverything(t *testing.T) {
	ctx := context.Background()
	db, path := open(t)
	tx := db.Begin()
	tx.PutInstance(inst("a", "aa:00:00:00:00:01"))
	n := &config.Node{Meta: config.Meta{Name: "n2"}}
	tx.PutNode(n)
	if err := db.Commit(ctx, tx); err != nil {
		t.Fatal(err)
	}
	db.st.Close()
	st, err := boltstore.Open(path, boltstore.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	db2, err := Open(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := db2.Instance("a"); !ok || len(db2.Nodes()) != 2 || !db2.MACInUse("aa:00:00:00:00:01") {
		t.Fatal("reopened configuration incomplete")
	}
	tx = db2.Begin()
	i, _ := db2.Instance("a")
	tx.DeleteInstance(i)
	if err := db2.Commit(ctx, tx); err != nil {
		t.Fatal(err)
	}
	if db2.MACInUse("aa:00:00:00:00:01") {
		t.Fatal("delete left the MAC index")
	}
}

func TestOpenEmptyStore(t *testing.T) {
	st, err := boltstore.Open(filepath.Join(t.TempDir(), "e.db"), boltstore.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, err := Open(context.Background(), st, nil); !errors.Is(err, ErrNoCluster) {
		t.Fatalf("empty store: %v", err)
	}
}

// Changed wakes whoever keeps something derived from the configuration
// (the ssconf files of Ganeti drop-in mode) once per change, and only then.
func TestChangedSignalsEachCommit(t *testing.T) {
	db, _ := open(t)
	ch := db.Changed()
	if db.Changed() != ch {
		t.Fatal("a second ask before any change got another channel")
	}
	select {
	case <-ch:
		t.Fatal("signalled before any change")
	default:
	}
	tx := db.Begin()
	tx.PutInstance(inst("web1", "aa:00:00:00:00:01"))
	if err := db.Commit(context.Background(), tx); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ch:
	default:
		t.Fatal("not signalled after a commit")
	}
	next := db.Changed()
	select {
	case <-next:
		t.Fatal("the next channel is already closed")
	default:
	}
}
