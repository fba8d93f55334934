package confdb

import (
	"encoding/json"
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
	tx.putNamed(pfxNode+n.UUID, pfxNameNode, exists, rev, nameOf(exists, old.obj), n.Name, n.UUID)
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
	tx.deleteNamed(pfxNode+n.UUID, pfxNameNode+old.obj.Name, old.rev)
	tx.delNodes = append(tx.delNodes, old.obj)
}

// PutGroup adds or updates a node group.
func (tx *Tx) PutGroup(g *config.NodeGroup) {
	tx.db.mu.RLock()
	old, exists := tx.db.groups[g.UUID]
	tx.db.mu.RUnlock()
	rev := readRev(exists, old.rev, serialOf(exists, old.obj), g.Serial)
	g.Touch(tx.db.now())
	tx.putNamed(pfxGroup+g.UUID, pfxNameGroup, exists, rev, nameOf(exists, old.obj), g.Name, g.UUID)
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
	tx.deleteNamed(pfxGroup+g.UUID, pfxNameGroup+old.obj.Name, old.rev)
	tx.delGroups = append(tx.delGroups, old.obj)
}

// deleteNamed removes an object and its name index key, if nobody changed
// the object since the cache saw it at rev.
func (tx *Tx) deleteNamed(key, nameKey string, rev int64) {
	tx.cmp(store.ModRevisionIs(key, rev))
	tx.ops = append(tx.ops, store.Delete(key), store.Delete(nameKey))
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

// putNamed adds the compare for an object's key and keeps its name index:
// a new object must not exist yet and its name must be free; a renamed one
// frees its old name and takes the new one.
func (tx *Tx) putNamed(key, namePfx string, exists bool, rev int64, oldName, newName, uuid string) {
	if !exists {
		tx.cmp(store.Missing(key))
		tx.nameIndex(namePfx+newName, uuid)
		return
	}
	tx.cmp(store.ModRevisionIs(key, rev))
	if oldName != newName {
		tx.ops = append(tx.ops, store.Delete(namePfx+oldName))
		tx.nameIndex(namePfx+newName, uuid)
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
	tx.putNamed(key, pfxNameInst, exists, rev, nameOf(exists, old.obj), i.Name, i.UUID)
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
	tx.deleteNamed(pfxInstance+i.UUID, pfxNameInst+old.obj.Name, old.rev)
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
	if tx.cluster != nil {
		db.cluster = entry[*config.Cluster]{tx.cluster.Clone(), rev}
	}
	for _, n := range tx.delNodes {
		delete(db.nodes, n.UUID)
		delete(db.nodeByName, n.Name)
	}
	for _, n := range tx.nodes {
		if old, ok := db.nodes[n.UUID]; ok {
			delete(db.nodeByName, old.obj.Name)
		}
		db.nodes[n.UUID] = entry[*config.Node]{n.Clone(), rev}
		db.nodeByName[n.Name] = n.UUID
	}
	for _, g := range tx.delGroups {
		delete(db.groups, g.UUID)
		delete(db.groupByName, g.Name)
	}
	for _, g := range tx.groups {
		if old, ok := db.groups[g.UUID]; ok {
			delete(db.groupByName, old.obj.Name)
		}
		db.groups[g.UUID] = entry[*config.NodeGroup]{g.Clone(), rev}
		db.groupByName[g.Name] = g.UUID
	}
	for _, i := range tx.delInsts {
		delete(db.instances, i.UUID)
		delete(db.instByName, i.Name)
		for _, n := range i.NICs {
			delete(db.macs, n.MAC)
		}
	}
	for _, i := range tx.insts {
		if old, ok := db.instances[i.UUID]; ok {
			delete(db.instByName, old.obj.Name)
			for _, n := range old.obj.NICs {
				delete(db.macs, n.MAC)
			}
		}
		db.instances[i.UUID] = entry[*config.Instance]{i.Clone(), rev}
		db.instByName[i.Name] = i.UUID
		for _, n := range i.NICs {
			db.macs[n.MAC] = i.UUID
		}
	}
}

// CheckNameFree returns an ECODE_EXISTS error when the instance name is taken.
func (db *DB) CheckInstanceNameFree(name string) error {
	if _, ok := db.Instance(name); ok {
		return ecode.Errorf(ecode.Exists, "Instance '%s' is already in the cluster", name)
	}
	return nil
}
