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
	cluster   *config.Cluster
	nodes     []*config.Node
	delNodes  []*config.Node
	groups    []*config.NodeGroup
	delGroups []*config.NodeGroup
	insts     []*config.Instance
	delInsts  []*config.Instance
	seenCmp   map[string]bool
	validated bool
}

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
func (tx *Tx) PutNode(n *config.Node) {
	tx.db.mu.RLock()
	old, exists := tx.db.nodes[n.UUID]
	tx.db.mu.RUnlock()
	rev := readRev(exists, old.rev, serialOf(exists, old.obj), n.Serial)
	n.Touch(tx.db.now())
	tx.putNamed(pfxNode+n.UUID, pfxNameNode, tx.db.nodeByName, exists, rev, nameOf(exists, old.obj), n.Name, n.UUID)
	tx.put(pfxNode+n.UUID, n)
	tx.nodes = append(tx.nodes, n)
}

// DeleteNode removes a node.
func (tx *Tx) DeleteNode(n *config.Node) {
	tx.db.mu.RLock()
	old, exists := tx.db.nodes[n.UUID]
	tx.db.mu.RUnlock()
	if !exists {
		return
	}
	tx.deleteNamed(pfxNode+n.UUID, pfxNameNode, tx.db.nodeByName, old.obj.Name, n.UUID, old.rev)
	tx.delNodes = append(tx.delNodes, old.obj)
}

// PutGroup adds or updates a node group.
func (tx *Tx) PutGroup(g *config.NodeGroup) {
	tx.db.mu.RLock()
	old, exists := tx.db.groups[g.UUID]
	tx.db.mu.RUnlock()
	rev := readRev(exists, old.rev, serialOf(exists, old.obj), g.Serial)
	g.Touch(tx.db.now())
	tx.putNamed(pfxGroup+g.UUID, pfxNameGroup, tx.db.groupByName, exists, rev, nameOf(exists, old.obj), g.Name, g.UUID)
	tx.put(pfxGroup+g.UUID, g)
	tx.groups = append(tx.groups, g)
}

// DeleteGroup removes a node group. Callers check that no node is in it.
func (tx *Tx) DeleteGroup(g *config.NodeGroup) {
	tx.db.mu.RLock()
	old, exists := tx.db.groups[g.UUID]
	tx.db.mu.RUnlock()
	if !exists {
		return
	}
	tx.deleteNamed(pfxGroup+g.UUID, pfxNameGroup, tx.db.groupByName, old.obj.Name, g.UUID, old.rev)
	tx.delGroups = append(tx.delGroups, old.obj)
}

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

// named is any configuration object with a name and a serial number.
type named interface {
	GetName() string
	GetSerial() int64
}

// staleRev is a revision no key has: a compare against it always fails.
const staleRev = -1

func serialOf[T named](exists bool, obj T) int64 {
	if !exists {
		return 0
	}
	return obj.GetSerial()
}

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

func nameOf[T named](exists bool, obj T) string {
	if !exists {
		return ""
	}
	return obj.GetName()
}

// putNamed adds the compare for an object's key and keeps its name index
// (names.go): a new object must not exist yet and its name must be free; a
// renamed one frees its old name and takes the new one. A rename that only
// changes case keeps the index key, which is the same.
func (tx *Tx) putNamed(key, namePfx string, idx *nameIndex, exists bool, rev int64, oldName, newName, uuid string) {
	if !exists {
		tx.cmp(store.Missing(key))
		tx.nameIndex(idx.key(namePfx, newName), uuid)
		return
	}
	tx.cmp(store.ModRevisionIs(key, rev))
	if oldName == newName {
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
// indexes.
func (tx *Tx) PutInstance(i *config.Instance) {
	tx.db.mu.RLock()
	old, exists := tx.db.instances[i.UUID]
	tx.db.mu.RUnlock()
	rev := readRev(exists, old.rev, serialOf(exists, old.obj), i.Serial)
	i.Touch(tx.db.now())
	key := pfxInstance + i.UUID
	oldMACs := map[string]bool{}
	tx.putNamed(key, pfxNameInst, tx.db.instByName, exists, rev, nameOf(exists, old.obj), i.Name, i.UUID)
	if exists {
		for _, n := range old.obj.NICs {
			oldMACs[n.MAC] = true
		}
	}
	newMACs := map[string]bool{}
	for k := range i.NICs {
		i.NICs[k].MAC = strings.ToLower(i.NICs[k].MAC)
		m := i.NICs[k].MAC
		newMACs[m] = true
		if !oldMACs[m] {
			tx.nameIndex(pfxMAC+m, i.UUID)
		}
	}
	for m := range oldMACs {
		if !newMACs[m] {
			tx.ops = append(tx.ops, store.Delete(pfxMAC+m))
		}
	}
	tx.put(key, i)
	tx.insts = append(tx.insts, i)
}

// DeleteInstance removes an instance and its index keys.
func (tx *Tx) DeleteInstance(i *config.Instance) {
	tx.db.mu.RLock()
	old, exists := tx.db.instances[i.UUID]
	tx.db.mu.RUnlock()
	if !exists {
		return
	}
	tx.deleteNamed(pfxInstance+i.UUID, pfxNameInst, tx.db.instByName, old.obj.Name, i.UUID, old.rev)
	for _, n := range old.obj.NICs {
		tx.ops = append(tx.ops, store.Delete(pfxMAC+n.MAC))
	}
	tx.delInsts = append(tx.delInsts, old.obj)
}

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
	for _, n := range tx.delNodes {
		delete(db.nodes, n.UUID)
		db.nodeByName.remove(n.Name)
	}
	for _, n := range tx.nodes {
		if old, ok := db.nodes[n.UUID]; ok {
			db.nodeByName.remove(old.obj.Name)
		}
		db.nodes[n.UUID] = entry[*config.Node]{n.Clone(), rev}
		db.nodeByName.add(n.Name, n.UUID)
	}
	for _, g := range tx.delGroups {
		delete(db.groups, g.UUID)
		db.groupByName.remove(g.Name)
	}
	for _, g := range tx.groups {
		if old, ok := db.groups[g.UUID]; ok {
			db.groupByName.remove(old.obj.Name)
		}
		db.groups[g.UUID] = entry[*config.NodeGroup]{g.Clone(), rev}
		db.groupByName.add(g.Name, g.UUID)
	}
	for _, i := range tx.delInsts {
		delete(db.instances, i.UUID)
		db.instByName.remove(i.Name)
		for _, n := range i.NICs {
			delete(db.macs, n.MAC)
		}
	}
	for _, i := range tx.insts {
		if old, ok := db.instances[i.UUID]; ok {
			db.instByName.remove(old.obj.Name)
			for _, n := range old.obj.NICs {
				delete(db.macs, n.MAC)
			}
		}
		db.instances[i.UUID] = entry[*config.Instance]{i.Clone(), rev}
		db.instByName.add(i.Name, i.UUID)
		for _, n := range i.NICs {
			db.macs[n.MAC] = i.UUID
		}
	}
}

// CheckInstanceNameFree returns an ECODE_EXISTS error when the instance
// name is taken, in any case, by an instance other than self (a uuid, or
// "" for a new instance).
func (db *DB) CheckInstanceNameFree(name, self string) error {
	db.mu.RLock()
	defer db.mu.RUnlock()
	for _, n := range db.instByName.holders(name) {
		if db.instByName.exact[n] == self {
			continue
		}
		if n != name {
			return ecode.Errorf(ecode.Exists, "Instance '%s' is already in the cluster as '%s' (names are not case-sensitive)", name, n)
		}
		return ecode.Errorf(ecode.Exists, "Instance '%s' is already in the cluster", name)
	}
	return nil
}
