package confdb

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"testing"

	"github.com/corral/corral/internal/config"
	"github.com/corral/corral/internal/ecode"
	"github.com/corral/corral/internal/store"
)

func commit(t *testing.T, db *DB, f func(tx *Tx)) error {
	t.Helper()
	tx := db.Begin()
	f(tx)
	return db.Commit(context.Background(), tx)
}

// indexKeys lists the store's index keys under pfx.
func indexKeys(t *testing.T, db *DB, pfx string) []string {
	t.Helper()
	kvs, _, err := db.st.Range(context.Background(), pfx, store.RangeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, kv := range kvs {
		out = append(out, kv.Key[len(pfx):])
	}
	slices.Sort(out)
	return out
}

// TestInstanceNamesIgnoreCase: instance names are found in any case, the
// store refuses a second name differing only in case, and a rename that
// only changes case keeps the one index key.
func TestInstanceNamesIgnoreCase(t *testing.T) {
	db, _ := open(t)
	if err := commit(t, db, func(tx *Tx) { tx.PutInstance(inst("web1", "aa:00:00:00:00:01")) }); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"web1", "Web1", "WEB1"} {
		if i, ok := db.Instance(n); !ok || i.Name != "web1" {
			t.Errorf("Instance(%q) = %v, %v; want web1", n, i, ok)
		}
	}
	err := db.CheckInstanceNameFree("Web1", "")
	if ecode.ClassOf(err) != ecode.Exists || err.Error() != "Instance 'Web1' is already in the cluster as 'web1' (names are not case-sensitive)" {
		t.Fatalf("Web1 free? %v", err)
	}
	if err := commit(t, db, func(tx *Tx) { tx.PutInstance(inst("Web1", "aa:00:00:00:00:02")) }); !errors.Is(err, ErrConflict) {
		t.Fatalf("the store took Web1 next to web1: %v", err)
	}
	web1, _ := db.Instance("web1")
	if err := db.CheckInstanceNameFree("Web1", web1.UUID); err != nil {
		t.Fatalf("renaming web1 to Web1 refused: %v", err)
	}
	web1.Name = "Web1"
	if err := commit(t, db, func(tx *Tx) { tx.PutInstance(web1) }); err != nil {
		t.Fatalf("case-only rename: %v", err)
	}
	if i, ok := db.Instance("web1"); !ok || i.Name != "Web1" {
		t.Fatalf("after case-only rename: %v %v", i, ok)
	}
	if got := indexKeys(t, db, pfxNameInst); !slices.Equal(got, []string{"web1"}) {
		t.Fatalf("index keys %v, want [web1]", got)
	}
	web1, _ = db.Instance("WEB1")
	web1.Name = "web2"
	if err := commit(t, db, func(tx *Tx) { tx.PutInstance(web1) }); err != nil {
		t.Fatal(err)
	}
	if got := indexKeys(t, db, pfxNameInst); !slices.Equal(got, []string{"web2"}) {
		t.Fatalf("index keys after rename %v, want [web2]", got)
	}
	if err := commit(t, db, func(tx *Tx) { tx.PutInstance(inst("WEB1", "aa:00:00:00:00:03")) }); err != nil {
		t.Fatalf("freed name not reusable in another case: %v", err)
	}
}

// TestNodeNamesIgnoreCaseGroupsDoNot: node names are DNS names like
// instance names; node group names stay case-sensitive, as in Ganeti.
func TestNodeNamesIgnoreCaseGroupsDoNot(t *testing.T) {
	db, _ := open(t)
	if n, ok := db.Node("N1"); !ok || n.Name != "n1" {
		t.Fatalf("Node(N1) = %v %v", n, ok)
	}
	if err := commit(t, db, func(tx *Tx) { tx.PutNode(&config.Node{Meta: config.Meta{Name: "N1"}}) }); !errors.Is(err, ErrConflict) {
		t.Fatalf("the store took node N1 next to n1: %v", err)
	}
	if _, ok := db.Group("DEFAULT"); ok {
		t.Fatal("group names are case-sensitive")
	}
	if err := commit(t, db, func(tx *Tx) { tx.PutGroup(&config.NodeGroup{Meta: config.Meta{Name: "Default"}}) }); err != nil {
		t.Fatalf("group Default next to default: %v", err)
	}
}

// TestLegacyNamesDifferingInCaseLoad: a configuration written when names
// were case-sensitive, with index keys spelled as the names and two
// instances named web1 and Web1, still loads; each is found by its exact
// name, no third spelling can be added, and removing one leaves the
// other's index key.
func TestLegacyNamesDifferingInCaseLoad(t *testing.T) {
	ctx := context.Background()
	db, _ := open(t)
	var ops []store.Op
	for i, name := range []string{"web1", "Web1", "Db1"} {
		in := inst(name, "aa:00:00:00:01:0"+string(rune('1'+i)))
		in.UUID = config.NewUUID()
		b, _ := json.Marshal(in)
		ops = append(ops, store.Put(pfxInstance+in.UUID, b), store.Put(pfxNameInst+name, []byte(in.UUID)))
	}
	if _, err := db.st.Txn(ctx, nil, ops, nil); err != nil {
		t.Fatal(err)
	}
	db, err := Open(ctx, db.st, nil)
	if err != nil {
		t.Fatalf("legacy configuration does not load: %v", err)
	}
	for _, n := range []string{"web1", "Web1", "Db1", "db1", "DB1"} {
		if i, ok := db.Instance(n); !ok || foldName(i.Name) != foldName(n) {
			t.Errorf("Instance(%q) = %v %v", n, i, ok)
		}
	}
	if _, ok := db.Instance("WEB1"); ok {
		t.Error("WEB1 is ambiguous between web1 and Web1, yet found one")
	}
	if err := db.CheckInstanceNameFree("WEB1", ""); ecode.ClassOf(err) != ecode.Exists {
		t.Errorf("WEB1 free next to web1 and Web1: %v", err)
	}
	upper, _ := db.Instance("Web1")
	if err := commit(t, db, func(tx *Tx) { tx.DeleteInstance(upper) }); err != nil {
		t.Fatal(err)
	}
	if got := indexKeys(t, db, pfxNameInst); !slices.Equal(got, []string{"Db1", "web1"}) {
		t.Fatalf("index keys after removing Web1: %v, want [Db1 web1]", got)
	}
	if i, ok := db.Instance("WEB1"); !ok || i.Name != "web1" {
		t.Fatalf("WEB1 after removing Web1: %v %v", i, ok)
	}
	// Renaming the legacy Db1 replaces its spelled key by a folded one.
	d, _ := db.Instance("db1")
	d.Name = "DB1"
	if err := commit(t, db, func(tx *Tx) { tx.PutInstance(d) }); err != nil {
		t.Fatal(err)
	}
	if got := indexKeys(t, db, pfxNameInst); !slices.Equal(got, []string{"db1", "web1"}) {
		t.Fatalf("index keys after renaming Db1: %v, want [db1 web1]", got)
	}
	if err := commit(t, db, func(tx *Tx) { tx.PutInstance(inst("dB1", "aa:00:00:00:02:01")) }); !errors.Is(err, ErrConflict) {
		t.Fatalf("the store took dB1 next to DB1: %v", err)
	}
}
