package confdb

import (
	"slices"
	"strings"

	"github.com/corral/corral/internal/config"
	"github.com/corral/corral/internal/ecode"
)

// Machine finds a bare-metal machine by name or uuid.
func (db *DB) Machine(nameOrUUID string) (*config.Machine, bool) {
	db.mu.RLock()
	defer db.mu.RUnlock()
	obj, ok := db.machines.get(nameOrUUID)
	if !ok {
		return nil, false
	}
	return obj.Clone(), true
}

// MustMachine is Machine with the Bare Metal API's "could not be found".
func (db *DB) MustMachine(nameOrUUID string) (*config.Machine, error) {
	m, ok := db.Machine(nameOrUUID)
	if !ok {
		return nil, ecode.Errorf(ecode.NoEnt, "Node %s could not be found.", nameOrUUID)
	}
	return m, nil
}

// Machines returns every machine sorted by name (unnamed ones first).
func (db *DB) Machines() []*config.Machine {
	db.mu.RLock()
	defer db.mu.RUnlock()
	return db.machines.sortedClones()
}

// MachineStatus is a machine's status, nil when it has none.
func (db *DB) MachineStatus(nameOrUUID string) *config.Status {
	db.mu.RLock()
	defer db.mu.RUnlock()
	return db.machines.statusOf(nameOrUUID)
}

// CheckMachineNameFree returns an ECODE_EXISTS error when another machine
// (not self, a uuid or "") has the name.
func (db *DB) CheckMachineNameFree(name, self string) error {
	if name == "" {
		return nil
	}
	db.mu.RLock()
	defer db.mu.RUnlock()
	if u, ok := db.machines.names.exact[name]; ok && u != self {
		return ecode.Errorf(ecode.Exists, "A node with name %s already exists.", name)
	}
	return nil
}

// Port finds a port by uuid.
func (db *DB) Port(uuid string) (*config.MachinePort, bool) {
	db.mu.RLock()
	defer db.mu.RUnlock()
	obj, ok := db.ports.get(uuid)
	if !ok {
		return nil, false
	}
	return obj.Clone(), true
}

// PortByMAC finds the port with a MAC address, in any case.
func (db *DB) PortByMAC(mac string) (*config.MachinePort, bool) {
	db.mu.RLock()
	defer db.mu.RUnlock()
	u, ok := db.portMACs.owner[strings.ToLower(mac)]
	if !ok {
		return nil, false
	}
	obj, ok := db.ports.get(u)
	if !ok {
		return nil, false
	}
	return obj.Clone(), true
}

// Ports returns every port, or only a machine's (by uuid) when machine is
// not "", sorted by uuid.
func (db *DB) Ports(machine string) []*config.MachinePort {
	db.mu.RLock()
	defer db.mu.RUnlock()
	out := make([]*config.MachinePort, 0)
	for _, e := range db.ports.byUUID {
		if machine == "" || e.obj.Machine == machine {
			out = append(out, e.obj.Clone())
		}
	}
	sortByUUID(out)
	return out
}

// PutMachine adds or updates a machine.
func (tx *Tx) PutMachine(m *config.Machine) { putObject(tx, tx.db.machines, m) }

// DeleteMachine removes a machine (its ports must go in the same
// transaction or before).
func (tx *Tx) DeleteMachine(m *config.Machine) { deleteObject(tx, tx.db.machines, m) }

// PutMachineStatus sets a machine's status; see putStatus.
func (tx *Tx) PutMachineStatus(uuid string, st *config.Status) bool {
	return putStatus(tx, tx.db.machines, uuid, st)
}

// PutPort adds or updates a port; its MAC is stored in lower case and must
// be unique cluster-wide.
func (tx *Tx) PutPort(p *config.MachinePort) {
	p.Address = strings.ToLower(p.Address)
	putObject(tx, tx.db.ports, p)
}

// DeletePort removes a port.
func (tx *Tx) DeletePort(p *config.MachinePort) { deleteObject(tx, tx.db.ports, p) }

func sortByUUID(ps []*config.MachinePort) {
	slices.SortFunc(ps, func(a, b *config.MachinePort) int { return strings.Compare(a.UUID, b.UUID) })
}
