package confdb

import (
	"context"
	"errors"
	"testing"

	"github.com/corral/corral/internal/config"
)

// TestMachinesUnnamedAndPorts checks what bare-metal machines need of the
// collections: several unnamed machines, naming and unnaming one, a port's
// MAC unique in any case, and a reload that agrees with the cache.
func TestMachinesUnnamedAndPorts(t *testing.T) {
	ctx := context.Background()
	db, _ := open(t)
	commit := func(f func(tx *Tx)) error {
		tx := db.Begin()
		f(tx)
		return db.Commit(ctx, tx)
	}
	a := &config.Machine{Driver: "fake-hardware", ProvisionState: "enroll"}
	b := &config.Machine{Driver: "fake-hardware", ProvisionState: "enroll"}
	if err := commit(func(tx *Tx) { tx.PutMachine(a); tx.PutMachine(b) }); err != nil {
		t.Fatalf("two unnamed machines: %v", err)
	}
	if a.UUID == "" || a.UUID == b.UUID {
		t.Fatalf("uuids %q %q", a.UUID, b.UUID)
	}
	if _, ok := db.Machine(""); ok {
		t.Fatal("the empty name finds a machine")
	}
	a.Name = "m1"
	if err := commit(func(tx *Tx) { tx.PutMachine(a) }); err != nil {
		t.Fatal(err)
	}
	if m, ok := db.Machine("m1"); !ok || m.UUID != a.UUID {
		t.Fatal("named machine not found by its name")
	}
	if _, ok := db.Machine("M1"); ok {
		t.Fatal("machine names are case-sensitive, as Ironic's")
	}
	b.Name = "m1"
	if err := commit(func(tx *Tx) { tx.PutMachine(b) }); !errors.Is(err, ErrConflict) {
		t.Fatalf("second machine took a used name: %v", err)
	}
	b.Name = ""
	cur, _ := db.Machine("m1")
	cur.Name = ""
	if err := commit(func(tx *Tx) { tx.PutMachine(cur) }); err != nil {
		t.Fatalf("unnaming: %v", err)
	}
	if _, ok := db.Machine("m1"); ok {
		t.Fatal("old name still finds the machine")
	}
	p := &config.MachinePort{Address: "52:54:00:AA:BB:CC", Machine: a.UUID}
	if err := commit(func(tx *Tx) { tx.PutPort(p) }); err != nil {
		t.Fatal(err)
	}
	if got, ok := db.PortByMAC("52:54:00:aa:bb:cc"); !ok || got.Machine != a.UUID {
		t.Fatal("port not found by its MAC")
	}
	dup := &config.MachinePort{Address: "52:54:00:aa:bb:cc", Machine: b.UUID}
	if err := commit(func(tx *Tx) { tx.PutPort(dup) }); !errors.Is(err, ErrConflict) {
		t.Fatalf("a second port took a used MAC: %v", err)
	}
	re, err := Open(ctx, db.st, nil)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(re.Machines()); n != 2 {
		t.Fatalf("reload: %d machines", n)
	}
	if ps := re.Ports(a.UUID); len(ps) != 1 || ps[0].Address != "52:54:00:aa:bb:cc" {
		t.Fatalf("reload: ports %+v", ps)
	}
	if err := commit(func(tx *Tx) { tx.DeletePort(p) }); err != nil {
		t.Fatal(err)
	}
	if _, ok := db.PortByMAC(p.Address); ok {
		t.Fatal("deleted port still found")
	}
}
