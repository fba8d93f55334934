package confdb

import (
	"encoding/json"
	"strings"

	"github.com/corral/corral/internal/config"
	"github.com/corral/corral/internal/store"
)

// An object's status (config.Status: what Corral observed, apart from what
// the operator configured) is kept under its own key,
// /config/status/<kind>/<uuid>, and not in the object: writing it bumps
// no serial number, changes no field Ganeti defines, and cannot make a
// concurrent change of the configuration fail. Only objects that have
// one have the key; the key goes with its object.

// statusLoader loads /config/status/<kind>/<uuid> into kind's collection.
type statusLoader map[string]interface {
	loadStatus(uuid string, value []byte) error
}

func (l statusLoader) load(key string, value []byte, _ int64) error {
	kind, uuid, ok := strings.Cut(strings.TrimPrefix(key, pfxStatus), "/")
	if c := l[kind]; ok && c != nil {
		return c.loadStatus(uuid, value)
	}
	return nil
}

// loadStatus keeps the status of an object already loaded (keys sort
// objects before statuses); one whose object is gone is left out.
func (c *collection[T]) loadStatus(uuid string, value []byte) error {
	if _, ok := c.byUUID[uuid]; !ok {
		return nil
	}
	var st config.Status
	if err := json.Unmarshal(value, &st); err != nil {
		return err
	}
	c.status[uuid] = &st
	return nil
}

// statusOf copies the status of the object named or with uuid
// nameOrUUID; nil when it has none. The caller holds the DB's lock.
func (c *collection[T]) statusOf(nameOrUUID string) *config.Status {
	obj, ok := c.get(nameOrUUID)
	if !ok {
		return nil
	}
	return c.status[obj.GetUUID()].Clone()
}

// putStatus sets the status of the object of uuid, which must be in the
// configuration when tx commits; an empty status removes the key. It
// reports false, writing nothing, when the cache has no such object.
func putStatus[T object[T]](tx *Tx, c *collection[T], uuid string, st *config.Status) bool {
	tx.db.mu.RLock()
	_, exists := c.byUUID[uuid]
	_, had := c.status[uuid]
	tx.db.mu.RUnlock()
	if !exists {
		return false
	}
	// The object must still exist. This compare is not recorded in
	// seenCmp: a put of the object in the same transaction adds its own.
	if !tx.seenCmp[c.prefix+uuid] {
		tx.cmps = append(tx.cmps, store.Exists(c.prefix+uuid))
	}
	s := stageOf(tx, c)
	if s.statuses == nil {
		s.statuses = map[string]*config.Status{}
	}
	if st.Empty() {
		if had {
			tx.ops = append(tx.ops, store.Delete(c.statusPrefix+uuid))
		}
		s.statuses[uuid] = nil
		return true
	}
	tx.put(c.statusPrefix+uuid, st)
	s.statuses[uuid] = st.Clone()
	return true
}

// InstanceStatus is the status of an instance (by name or uuid), nil when
// it has none.
func (db *DB) InstanceStatus(nameOrUUID string) *config.Status {
	db.mu.RLock()
	defer db.mu.RUnlock()
	return db.instances.statusOf(nameOrUUID)
}

// NodeStatus is the status of a node (by name or uuid), nil when it has
// none.
func (db *DB) NodeStatus(nameOrUUID string) *config.Status {
	db.mu.RLock()
	defer db.mu.RUnlock()
	return db.nodes.statusOf(nameOrUUID)
}

// PutInstanceStatus sets an instance's status; see putStatus.
func (tx *Tx) PutInstanceStatus(uuid string, st *config.Status) bool {
	return putStatus(tx, tx.db.instances, uuid, st)
}

// PutNodeStatus sets a node's status; see putStatus.
func (tx *Tx) PutNodeStatus(uuid string, st *config.Status) bool {
	return putStatus(tx, tx.db.nodes, uuid, st)
}
