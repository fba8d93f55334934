package confdb

import (
	"encoding/json"
	"slices"
	"strings"

	"github.com/corral/corral/internal/config"
	"github.com/corral/corral/internal/ecode"
	"github.com/corral/corral/internal/store"
)

// Tx collects configuration changes. Each changed object is compared on the
// mod revision the cache had when it was first touched, so a concurrent
// writer makes the commit fail rather than be overwritten. New names and MACs
// are compared as missing, which makes them unique cluster-wide.
type Tx struct {
	db   *DB
	cmps []store.Cmp
	ops  []store.Op
	// What Apply must do to the cache.
	cluster *config.Cluster
	stages  []applier // each collection's changes, in the order first touched
	seenCmp map[string]bool
}

// applier is a collection's staged changes (collection.go).
type applier interface{ apply(rev int64) }

// Begin starts a transaction.
func (db *DB) Begin() *Tx { return &Tx{db: db, seenCmp: map[string]bool{}} }

// Cmps returns the compares to commit.
func (tx *Tx) Cmps() []store.Cmp { return tx.cmps }

// Ops returns the writes to commit.
func (tx *Tx) Ops() []store.Op { return tx.ops }

// Empty reports whether nothing was changed.
func (tx *Tx) Empty() bool { return len(tx.ops) == 0 }

func (tx *Tx) cmp(c store.Cmp) {
	if tx.seenCmp[c.Key] {
		return
	}
	tx.seenCmp[c.Key] = true
	tx.cmps = append(tx.cmps, c)
}

func (tx *Tx) put(key string, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		panic("confdb: unencodable object: " + err.Error()) // a programming error, not input
	}
	tx.ops = append(tx.ops, store.Put(key, b))
}

// PutCluster stores the cluster object (serial and mtime bumped).
func (tx *Tx) PutCluster(c *config.Cluster) {
	tx.db.mu.RLock()
	rev, serial := tx.db.cluster.rev, tx.db.cluster.obj.Serial
	tx.db.mu.RUnlock()
	if c.Serial != serial {
		rev = staleRev
	}
	c.Touch(tx.db.now())
	tx.cmp(store.ModRevisionIs(keyCluster, rev))
	tx.put(keyCluster, c)
	tx.cluster = c
}

// PutNode adds or updates a node.
func (tx *Tx) PutNode(n *config.Node) { putObject(tx, tx.db.nodes, n) }

// DeleteNode removes a node.
func (tx *Tx) DeleteNode(n *config.Node) { deleteObject(tx, tx.db.nodes, n) }

// PutGroup adds or updates a node group.
func (tx *Tx) PutGroup(g *config.NodeGroup) { putObject(tx, tx.db.groups, g) }

// DeleteGroup removes a node group. Callers check that no node is in it.
func (tx *Tx) DeleteGroup(g *config.NodeGroup) { deleteObject(tx, tx.db.groups, g) }

// deleteNamed removes an object and its name index keys, if nobody changed
// the object since the cache saw it at rev.
func (tx *Tx) deleteNamed(key, namePfx string, idx *nameIndex, name, uuid string, rev int64) {
	tx.cmp(store.ModRevisionIs(key, rev))
	tx.ops = append(tx.ops, store.Delete(key))
	tx.db.mu.RLock()
	stale := idx.staleKeys(namePfx, name, uuid)
	tx.db.mu.RUnlock()
	for _, k := range stale {
		tx.ops = append(tx.ops, store.Delete(k))
	}
}

// staleRev is a revision no key has: a compare against it always fails.
const staleRev = -1

// readRev is the revision to compare against. The cache holds the newest
// committed object; when the caller's copy has an older serial number it
// was read before a commit it has not seen, and writing it would lose that
// change: the transaction must fail.
func readRev(exists bool, rev, cachedSerial, callerSerial int64) int64 {
	if exists && cachedSerial != callerSerial {
		return staleRev
	}
	return rev
}

// putNamed adds the compare for an object's key and keeps its name index
// (names.go): a new object must not exist yet and its name must be free; a
// renamed one frees its old name and takes the new one. A rename that only
// changes case keeps the index key, which is the same.
func (tx *Tx) putNamed(key, namePfx string, idx *nameIndex, exists bool, rev int64, oldName, newName, uuid string) {
	if !exists {
		tx.cmp(store.Missing(key))
		if newName != "" {
			tx.nameIndex(idx.key(namePfx, newName), uuid)
		}
		return
	}
	tx.cmp(store.ModRevisionIs(key, rev))
	if oldName == newName {
		return
	}
	if oldName == "" || newName == "" {
		// An unnamed object (a bare-metal machine may be) has no index key.
		tx.db.mu.RLock()
		stale := idx.staleKeys(namePfx, oldName, uuid)
		tx.db.mu.RUnlock()
		for _, k := range stale {
			tx.ops = append(tx.ops, store.Delete(k))
		}
		if newName != "" {
			tx.nameIndex(idx.key(namePfx, newName), uuid)
		}
		return
	}
	tx.db.mu.RLock()
	stale := idx.staleKeys(namePfx, oldName, uuid)
	tx.db.mu.RUnlock()
	folded := idx.key(namePfx, newName)
	if idx.key(namePfx, oldName) != folded {
		for _, k := range stale {
			tx.ops = append(tx.ops, store.Delete(k))
		}
		tx.nameIndex(folded, uuid)
		return
	}
	// Only the case changes. The folded key stays this object's: it is
	// written again, as an older version may have written only the key
	// spelled as the old name, which goes.
	for _, k := range stale {
		if k != folded {
			tx.ops = append(tx.ops, store.Delete(k))
		}
	}
	if slices.Contains(stale, folded) {
		tx.ops = append(tx.ops, store.Put(folded, []byte(uuid)))
	}
}

// PutInstance adds or updates an instance, maintaining the name and MAC
// indexes. MACs are stored in lower case.
func (tx *Tx) PutInstance(i *config.Instance) {
	for k := range i.NICs {
		i.NICs[k].MAC = strings.ToLower(i.NICs[k].MAC)
	}
	putObject(tx, tx.db.instances, i)
}

// DeleteInstance removes an instance and its index keys.
func (tx *Tx) DeleteInstance(i *config.Instance) { deleteObject(tx, tx.db.instances, i) }

func (tx *Tx) nameIndex(key, uuid string) {
	tx.cmp(store.Missing(key))
	tx.ops = append(tx.ops, store.Put(key, []byte(uuid)))
}

// Apply updates the cache after tx was committed at revision rev.
func (db *DB) Apply(tx *Tx, rev int64) {
	db.mu.Lock()
	defer db.mu.Unlock()
	if db.changed != nil {
		close(db.changed)
		db.changed = nil
	}
	if tx.cluster != nil {
		db.cluster = entry[*config.Cluster]{tx.cluster.Clone(), rev}
	}
	for _, s := range tx.stages {
		s.apply(rev)
	}
}

// CheckInstanceNameFree returns an ECODE_EXISTS error when the instance
// name is taken, in any case, by an instance other than self (a uuid, or
// "" for a new instance).
func (db *DB) CheckInstanceNameFree(name, self string) error {
	db.mu.RLock()
	defer db.mu.RUnlock()
	for _, n := range db.instances.names.holders(name) {
		if db.instances.names.exact[n] == self {
			continue
		}
		if n != name {
			return ecode.Errorf(ecode.Exists, "Instance '%s' is already in the cluster as '%s' (names are not case-sensitive)", name, n)
		}
		return ecode.Errorf(ecode.Exists, "Instance '%s' is already in the cluster", name)
	}
	return nil
}
