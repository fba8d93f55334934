package confdb

import (
	"github.com/corral/corral/internal/config"
	"github.com/corral/corral/internal/ecode"
)

// Network finds a network by name (case-sensitive, as in Ganeti) or uuid.
func (db *DB) Network(nameOrUUID string) (*config.Network, bool) {
	db.mu.RLock()
	defer db.mu.RUnlock()
	obj, ok := db.networks.get(nameOrUUID)
	if !ok {
		return nil, false
	}
	return obj.Clone(), true
}

// MustNetwork is Network with Ganeti's lookup error.
func (db *DB) MustNetwork(nameOrUUID string) (*config.Network, error) {
	n, ok := db.Network(nameOrUUID)
	if !ok {
		return nil, ecode.Errorf(ecode.NoEnt, "Network '%s' not found", nameOrUUID)
	}
	return n, nil
}

// Networks returns every network sorted by name.
func (db *DB) Networks() []*config.Network {
	db.mu.RLock()
	defer db.mu.RUnlock()
	return db.networks.sortedClones()
}

// PutNetwork adds or updates a network; its name must be unique.
func (tx *Tx) PutNetwork(n *config.Network) { putObject(tx, tx.db.networks, n) }

// DeleteNetwork removes a network. Callers check that no group is
// connected to it.
func (tx *Tx) DeleteNetwork(n *config.Network) { deleteObject(tx, tx.db.networks, n) }
