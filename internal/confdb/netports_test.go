package confdb

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/corral/corral/internal/config"
	"github.com/corral/corral/internal/store/boltstore"
)

func TestNetworkPortsUniqueAndReused(t *testing.T) {
	ctx := context.Background()
	db, path := open(t)
	put := func(i *config.Instance) error {
		tx := db.Begin()
		tx.PutInstance(i)
		return db.Commit(ctx, tx)
	}
	first, err := db.FreeNetworkPort()
	if err != nil || first != FirstNetworkPort {
		t.Fatalf("first free port %d, %v", first, err)
	}
	a := inst("a", "aa:00:00:00:00:01")
	a.NetworkPort = first
	if err := put(a); err != nil {
		t.Fatal(err)
	}
	if u, ok := db.NetworkPortOwner(first); !ok || u != a.UUID {
		t.Fatalf("port %d owned by %q (%v)", first, u, ok)
	}
	// Two transactions that picked the same port: the second loses.
	b := inst("b", "aa:00:00:00:00:02")
	b.NetworkPort = first
	if err := put(b); !errors.Is(err, ErrConflict) {
		t.Fatalf("duplicate port committed: %v", err)
	}
	next, _ := db.FreeNetworkPort()
	if next != first+1 {
		t.Fatalf("next free port %d", next)
	}
	b.NetworkPort = next
	if err := put(b); err != nil {
		t.Fatal(err)
	}
	// A restarted master reads the ports back from the instances.
	db.st.Close()
	st, err := boltstore.Open(path, boltstore.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if db, err = Open(ctx, st, nil); err != nil {
		t.Fatal(err)
	}
	if p, _ := db.FreeNetworkPort(); p != first+2 {
		t.Fatalf("after reload the free port is %d", p)
	}
	// Removing an instance frees its port, which is handed out first.
	cur, _ := db.Instance("a")
	tx := db.Begin()
	tx.DeleteInstance(cur)
	if err := db.Commit(ctx, tx); err != nil {
		t.Fatal(err)
	}
	if _, ok := db.NetworkPortOwner(first); ok {
		t.Fatal("removed instance still owns its port")
	}
	if p, _ := db.FreeNetworkPort(); p != first {
		t.Fatalf("freed port not reused: %d", p)
	}
	c := inst("c", "aa:00:00:00:00:03")
	c.NetworkPort = first
	if err := put(c); err != nil {
		t.Fatalf("freed port not reusable: %v", err)
	}
}

// TestNetworkPortHeldUntilCommit: jobs that ask for a port before either
// committed get different ports; a hold whose job never committed lapses.
func TestNetworkPortHeldUntilCommit(t *testing.T) {
	db, _ := open(t)
	now := time.Unix(1_800_000_000, 0)
	db.now = func() time.Time { return now }
	p1, _ := db.FreeNetworkPort()
	p2, _ := db.FreeNetworkPort()
	if p1 != FirstNetworkPort || p2 != FirstNetworkPort+1 {
		t.Fatalf("two pending creations got %d and %d", p1, p2)
	}
	now = now.Add(portHold)
	if p, _ := db.FreeNetworkPort(); p != FirstNetworkPort {
		t.Fatalf("a lapsed hold still keeps port %d: got %d", FirstNetworkPort, p)
	}
}
