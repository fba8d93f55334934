// Package confdb keeps Corral's configuration in the store, one key per
// object, with name and MAC index keys written in the same transaction, so a
// write costs O(object) and not O(cluster). It holds an in-memory copy for
// reads. corrald is the only writer: writes are built as a Tx (compares on
// each object's mod revision plus puts), committed by the caller — usually
// together with a job's step cursor — and then applied to the cache.
package confdb

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/corral/corral/internal/config"
	"github.com/corral/corral/internal/ecode"
	"github.com/corral/corral/internal/store"
)

// Key layout.
const (
	Prefix       = "/config/"
	keyCluster   = Prefix + "cluster"
	pfxNode      = Prefix + "node/"
	pfxGroup     = Prefix + "group/"
	pfxInstance  = Prefix + "instance/"
	pfxNameNode  = Prefix + "name/node/"
	pfxNameGroup = Prefix + "name/group/"
	pfxNameInst  = Prefix + "name/instance/"
	pfxMAC       = Prefix + "mac/"
)

type entry[T any] struct {
	obj T
	rev int64
}

// DB is the configuration with its cache.
type DB struct {
	st  store.Store
	now func() time.Time

	mu                                  sync.RWMutex
	cluster                             entry[*config.Cluster]
	nodes                               map[string]entry[*config.Node]
	groups                              map[string]entry[*config.NodeGroup]
	instances                           map[string]entry[*config.Instance]
	nodeByName, groupByName, instByName *nameIndex
	macs                                map[string]string
	// changed is closed by the next Apply (see Changed); nil until asked.
	changed chan struct{}
}

// Changed returns a channel closed at the next change of the cached
// configuration, for code that keeps something derived from it current
// (Ganeti's ssconf files in drop-in mode). Ask again after each change.
func (db *DB) Changed() <-chan struct{} {
	db.mu.Lock()
	defer db.mu.Unlock()
	if db.changed == nil {
		db.changed = make(chan struct{})
	}
	return db.changed
}

// Open loads the configuration. ErrNoCluster is returned when no cluster was
// initialised in this store.
func Open(ctx context.Context, st store.Store, now func() time.Time) (*DB, error) {
	if now == nil {
		now = time.Now
	}
	db := &DB{st: st, now: now}
	if err := db.load(ctx); err != nil {
		return nil, err
	}
	return db, nil
}

// ErrNoCluster means the store holds no cluster.
var ErrNoCluster = ecode.Errorf(ecode.NoEnt, "no cluster is initialised in this store (run 'corral cluster init')")

func (db *DB) load(ctx context.Context) error {
	kvs, _, err := db.st.Range(ctx, Prefix, store.RangeOptions{})
	if err != nil {
		return fmt.Errorf("loading configuration: %w", err)
	}
	db.reset()
	found := false
	for _, kv := range kvs {
		var err error
		switch {
		case kv.Key == keyCluster:
			var c config.Cluster
			err = json.Unmarshal(kv.Value, &c)
			db.cluster = entry[*config.Cluster]{&c, kv.ModRevision}
			found = true
		case strings.HasPrefix(kv.Key, pfxNode):
			var n config.Node
			err = json.Unmarshal(kv.Value, &n)
			db.nodes[n.UUID] = entry[*config.Node]{&n, kv.ModRevision}
			db.nodeByName.add(n.Name, n.UUID)
		case strings.HasPrefix(kv.Key, pfxGroup):
			var g config.NodeGroup
			err = json.Unmarshal(kv.Value, &g)
			db.groups[g.UUID] = entry[*config.NodeGroup]{&g, kv.ModRevision}
			db.groupByName.add(g.Name, g.UUID)
		case strings.HasPrefix(kv.Key, pfxInstance):
			var i config.Instance
			err = json.Unmarshal(kv.Value, &i)
			db.instances[i.UUID] = entry[*config.Instance]{&i, kv.ModRevision}
			db.instByName.add(i.Name, i.UUID)
			for _, n := range i.NICs {
				db.macs[n.MAC] = i.UUID
			}
		}
		if err != nil {
			return fmt.Errorf("decoding %s: %w", kv.Key, err)
		}
	}
	if !found {
		return ErrNoCluster
	}
	return nil
}

// reset empties the cache.
func (db *DB) reset() {
	db.nodes = map[string]entry[*config.Node]{}
	db.groups = map[string]entry[*config.NodeGroup]{}
	db.instances = map[string]entry[*config.Instance]{}
	db.nodeByName = newNameIndex(foldName)
	db.groupByName = newNameIndex(keepName)
	db.instByName = newNameIndex(foldName)
	db.macs = map[string]string{}
}

// Cluster returns a copy of the cluster object.
func (db *DB) Cluster() *config.Cluster {
	db.mu.RLock()
	defer db.mu.RUnlock()
	return db.cluster.obj.Clone()
}

// Node finds a node by name (in any case) or uuid.
func (db *DB) Node(nameOrUUID string) (*config.Node, bool) {
	db.mu.RLock()
	defer db.mu.RUnlock()
	if u, ok := db.nodeByName.lookup(nameOrUUID); ok {
		nameOrUUID = u
	}
	e, ok := db.nodes[nameOrUUID]
	if !ok {
		return nil, false
	}
	return e.obj.Clone(), true
}

// MustNode is Node with Ganeti's "not known" error.
func (db *DB) MustNode(name string) (*config.Node, error) {
	n, ok := db.Node(name)
	if !ok {
		return nil, ecode.Errorf(ecode.NoEnt, "Node '%s' not known", name)
	}
	return n, nil
}

// Nodes returns every node sorted by name.
func (db *DB) Nodes() []*config.Node {
	db.mu.RLock()
	out := make([]*config.Node, 0, len(db.nodes))
	for _, e := range db.nodes {
		out = append(out, e.obj.Clone())
	}
	db.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Group finds a node group by name or uuid.
func (db *DB) Group(nameOrUUID string) (*config.NodeGroup, bool) {
	db.mu.RLock()
	defer db.mu.RUnlock()
	if u, ok := db.groupByName.lookup(nameOrUUID); ok {
		nameOrUUID = u
	}
	e, ok := db.groups[nameOrUUID]
	if !ok {
		return nil, false
	}
	return e.obj.Clone(), true
}

// Groups returns every node group sorted by name.
func (db *DB) Groups() []*config.NodeGroup {
	db.mu.RLock()
	out := make([]*config.NodeGroup, 0, len(db.groups))
	for _, e := range db.groups {
		out = append(out, e.obj.Clone())
	}
	db.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Instance finds an instance by name (in any case) or uuid.
func (db *DB) Instance(nameOrUUID string) (*config.Instance, bool) {
	db.mu.RLock()
	defer db.mu.RUnlock()
	if u, ok := db.instByName.lookup(nameOrUUID); ok {
		nameOrUUID = u
	}
	e, ok := db.instances[nameOrUUID]
	if !ok {
		return nil, false
	}
	return e.obj.Clone(), true
}

// MustInstance is Instance with Ganeti's "not known" error.
func (db *DB) MustInstance(name string) (*config.Instance, error) {
	i, ok := db.Instance(name)
	if !ok {
		return nil, ecode.Errorf(ecode.NoEnt, "Instance '%s' not known", name)
	}
	return i, nil
}

// Instances returns every instance sorted by name.
func (db *DB) Instances() []*config.Instance {
	db.mu.RLock()
	out := make([]*config.Instance, 0, len(db.instances))
	for _, e := range db.instances {
		out = append(out, e.obj.Clone())
	}
	db.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// VisitInstances calls fn for every instance without copying them, under
// the read lock: fn must not modify the instance, keep it, or call back
// into the DB. It stops when fn returns false. For scans on hot paths
// (capacity reservations) where cloning every instance would cost O(N)
// allocations per call.
func (db *DB) VisitInstances(fn func(*config.Instance) bool) {
	db.mu.RLock()
	defer db.mu.RUnlock()
	for _, e := range db.instances {
		if !fn(e.obj) {
			return
		}
	}
}

// MACInUse reports whether a MAC belongs to an instance.
func (db *DB) MACInUse(mac string) bool {
	db.mu.RLock()
	defer db.mu.RUnlock()
	_, ok := db.macs[strings.ToLower(mac)]
	return ok
}

// Serial is the cluster object's serial number.
func (db *DB) Serial() int64 {
	db.mu.RLock()
	defer db.mu.RUnlock()
	return db.cluster.obj.Serial
}

// Commit writes tx on its own (outside a job step) and applies it.
func (db *DB) Commit(ctx context.Context, tx *Tx, extra ...store.Op) error {
	res, err := db.st.Txn(ctx, tx.Cmps(), append(tx.Ops(), extra...), nil)
	if err != nil {
		return err
	}
	if !res.Succeeded {
		return ErrConflict
	}
	db.Apply(tx, res.Revision)
	return nil
}

// ErrConflict means another writer changed an object the transaction read.
var ErrConflict = ecode.Errorf(ecode.TempNoRes, "configuration changed concurrently, retry")

// nowFunc is the clock of a bootstrapped DB (tests fix it).
var nowFunc = time.Now
