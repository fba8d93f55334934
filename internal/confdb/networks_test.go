package confdb

import (
	"context"
	"errors"
	"testing"

	"github.com/corral/corral/internal/config"
)

// TestNetworkCollection checks a network's life in the store: its name
// is unique (case-sensitive, as in Ganeti), a reload finds what the cache
// holds, a group's connection map survives, and a delete frees the name.
func TestNetworkCollection(t *testing.T) {
	ctx := context.Background()
	db, _ := open(t)
	tx := db.Begin()
	tx.PutNetwork(&config.Network{Meta: config.Meta{Name: "Net1"}, Network: "192.0.2.0/24", ExtReservations: "1", Reservations: "0"})
	if err := db.Commit(ctx, tx); err != nil {
		t.Fatal(err)
	}
	n, ok := db.Network("Net1")
	if !ok || n.UUID == "" || n.Serial != 1 {
		t.Fatalf("network not stored: %+v", n)
	}
	if _, ok := db.Network("net1"); ok {
		t.Fatal("network names must be case-sensitive")
	}
	// A second network of the same name loses in the store.
	tx = db.Begin()
	tx.PutNetwork(&config.Network{Meta: config.Meta{Name: "Net1"}, Network: "198.51.100.0/24"})
	if err := db.Commit(ctx, tx); !errors.Is(err, ErrConflict) {
		t.Fatalf("duplicate name committed: %v", err)
	}
	g := db.Groups()[0]
	g.Networks = map[string]config.NetParams{n.UUID: {Mode: "bridged", Link: "br0", VLAN: "100"}}
	tx = db.Begin()
	tx.PutGroup(g)
	if err := db.Commit(ctx, tx); err != nil {
		t.Fatal(err)
	}
	re, err := Open(ctx, db.st, nil)
	if err != nil {
		t.Fatal(err)
	}
	rn, ok := re.Network(n.UUID)
	if !ok || rn.Network != "192.0.2.0/24" || rn.Name != "Net1" {
		t.Fatalf("reloaded network %+v", rn)
	}
	if rg, _ := re.Group(g.UUID); rg.Networks[n.UUID].VLAN != "100" {
		t.Fatalf("group connection lost: %+v", rg.Networks)
	}
	tx = db.Begin()
	tx.DeleteNetwork(n)
	if err := db.Commit(ctx, tx); err != nil {
		t.Fatal(err)
	}
	if len(db.Networks()) != 0 {
		t.Fatal("deleted network still listed")
	}
	tx = db.Begin()
	tx.PutNetwork(&config.Network{Meta: config.Meta{Name: "Net1"}, Network: "198.51.100.0/24"})
	if err := db.Commit(ctx, tx); err != nil {
		t.Fatalf("name of a deleted network not reusable: %v", err)
	}
}
