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
	// An instance's network_port (its VNC or SPICE console's TCP port),
	// unique cluster-wide.
	pfxNetPort = Prefix + "netport/"
	// Networks (Ganeti's gnt-network); names are case-sensitive.
	pfxNetwork     = Prefix + "network/"
	pfxNameNetwork = Prefix + "name/network/"
	pfxStatus      = Prefix + "status/"
	// Bare-metal machines and their ports. Machine names are kept as
	// given (Ironic's names are case-sensitive); ports have no name.
	pfxMachine     = Prefix + "machine/"
	pfxNameMachine = Prefix + "name/machine/"
	pfxPort        = Prefix + "port/"
	pfxNamePort    = Prefix + "name/port/"
	pfxPortMAC     = Prefix + "portmac/"
	// Kubernetes clusters as a service (package coe). Template, cluster
	// and federation names are unique and kept as given; node groups are
	// named within their cluster only, so the global index holds none;
	// a quota's name is "<project>/<resource>", a CA's its cluster's uuid.
	pfxCOETemplate     = Prefix + "coetemplate/"
	pfxNameCOETemplate = Prefix + "name/coetemplate/"
	pfxCOECluster      = Prefix + "coecluster/"
	pfxNameCOECluster  = Prefix + "name/coecluster/"
	pfxCOENodeGroup    = Prefix + "coenodegroup/"
	pfxNameCOENodeGrp  = Prefix + "name/coenodegroup/"
	pfxCOECert         = Prefix + "coecert/"
	pfxNameCOECert     = Prefix + "name/coecert/"
	pfxCOEQuota        = Prefix + "coequota/"
	pfxNameCOEQuota    = Prefix + "name/coequota/"
	pfxCOEFederation   = Prefix + "coefederation/"
	pfxNameCOEFed      = Prefix + "name/coefederation/"
	pfxCOETrust        = Prefix + "coetrust/"
	// A kubelet worker's pod subnet is unique on its Corral node:
	// "<node uuid>/<subnet>" -> the COE cluster's uuid.
	pfxCOEPodSubnet = Prefix + "coepodsubnet/"
	pfxNameCOETrust = Prefix + "name/coetrust/"
)

type entry[T any] struct {
	obj T
	rev int64
}

// DB is the configuration with its cache.
type DB struct {
	st  store.Store
	now func() time.Time

	mu        sync.RWMutex
	cluster   entry[*config.Cluster]
	nodes     *collection[*config.Node]
	groups    *collection[*config.NodeGroup]
	instances *collection[*config.Instance]
	instMACs  *uniqueIndex[*config.Instance]
	instPorts *uniqueIndex[*config.Instance]
	// portsHeld are network ports handed out by FreeNetworkPort whose
	// transaction has not committed yet, with when the hold lapses.
	portsHeld map[int]time.Time
	// podSubnetsHeld are pod subnets FreeCOEPodSubnet handed out whose
	// transaction has not committed yet, by index value.
	podSubnetsHeld map[string]podSubnetHold
	machines       *collection[*config.Machine]
	ports          *collection[*config.MachinePort]
	portMACs       *uniqueIndex[*config.MachinePort]
	networks       *collection[*config.Network]
	coe            coeCollections
	// kinds are the collections by the key segment after Prefix.
	kinds map[string]loader
	// changed is closed by the next Apply (see Changed); nil until asked.
	changed chan struct{}
}

// loader is a collection as the configuration load sees it.
type loader interface {
	load(key string, value []byte, rev int64) error
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
		if kv.Key == keyCluster {
			var c config.Cluster
			err = json.Unmarshal(kv.Value, &c)
			db.cluster = entry[*config.Cluster]{&c, kv.ModRevision}
			found = true
		} else if kind, _, ok := strings.Cut(kv.Key[len(Prefix):], "/"); ok && db.kinds[kind] != nil {
			err = db.kinds[kind].load(kv.Key, kv.Value, kv.ModRevision)
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
	obj, ok := db.nodes.get(nameOrUUID)
	if !ok {
		return nil, false
	}
	return obj.Clone(), true
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
	defer db.mu.RUnlock()
	return db.nodes.sortedClones()
}

// Group finds a node group by name or uuid.
func (db *DB) Group(nameOrUUID string) (*config.NodeGroup, bool) {
	db.mu.RLock()
	defer db.mu.RUnlock()
	obj, ok := db.groups.get(nameOrUUID)
	if !ok {
		return nil, false
	}
	return obj.Clone(), true
}

// Groups returns every node group sorted by name.
func (db *DB) Groups() []*config.NodeGroup {
	db.mu.RLock()
	defer db.mu.RUnlock()
	return db.groups.sortedClones()
}

// Instance finds an instance by name (in any case) or uuid.
func (db *DB) Instance(nameOrUUID string) (*config.Instance, bool) {
	db.mu.RLock()
	defer db.mu.RUnlock()
	obj, ok := db.instances.get(nameOrUUID)
	if !ok {
		return nil, false
	}
	return obj.Clone(), true
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
	defer db.mu.RUnlock()
	return db.instances.sortedClones()
}

// VisitInstances calls fn for every instance without copying them, under
// the read lock: fn must not modify the instance, keep it, or call back
// into the DB. It stops when fn returns false. For scans on hot paths
// (capacity reservations) where cloning every instance would cost O(N)
// allocations per call.
func (db *DB) VisitInstances(fn func(*config.Instance) bool) {
	db.mu.RLock()
	defer db.mu.RUnlock()
	for _, e := range db.instances.byUUID {
		if !fn(e.obj) {
			return
		}
	}
}

// MACInUse reports whether a MAC belongs to an instance.
func (db *DB) MACInUse(mac string) bool {
	db.mu.RLock()
	defer db.mu.RUnlock()
	_, ok := db.instMACs.owner[strings.ToLower(mac)]
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
