package confdb

import (
	"encoding/json"
	"sort"
	"time"

	"github.com/corral/corral/internal/config"
	"github.com/corral/corral/internal/store"
)

// object is what a collection holds: a configuration object with a uuid,
// a name and a serial number, which Touch bumps and Clone copies.
type object[T any] interface {
	GetUUID() string
	GetName() string
	GetSerial() int64
	Touch(now time.Time)
	Clone() T
}

// collection is one kind of configuration object in the cache and the
// store: each object under prefix+uuid, its name in a name index under
// namePrefix (names.go), and any unique secondary indexes (an instance's
// MACs). Loading, putting, deleting and applying a committed change are
// written once here for every kind. The DB's lock guards it.
type collection[T object[T]] struct {
	prefix     string // the object's key is prefix + uuid
	namePrefix string // the name index key is namePrefix + folded name
	newObj     func() T
	byUUID     map[string]entry[T]
	names      *nameIndex
	unique     []*uniqueIndex[T]
	// statusPrefix + uuid holds an object's status (status.go), apart
	// from its configuration.
	statusPrefix string
	status       map[string]*config.Status
}

// uniqueIndex is a secondary index whose values belong to at most one
// object cluster-wide: the store holds prefix+value -> uuid, compared as
// missing when an object takes a value.
type uniqueIndex[T any] struct {
	prefix string
	// count and value give the object's values, as stored; two calls
	// rather than a slice, so that loads and puts allocate nothing for them.
	count func(T) int
	value func(T, int) string
	owner map[string]string
}

// has reports whether obj has value v.
func (x *uniqueIndex[T]) has(obj T, v string) bool {
	for k := range x.count(obj) {
		if x.value(obj, k) == v {
			return true
		}
	}
	return false
}

func newCollection[T object[T]](prefix, namePrefix string, fold func(string) string, newObj func() T, unique ...*uniqueIndex[T]) *collection[T] {
	c := &collection[T]{prefix: prefix, namePrefix: namePrefix, newObj: newObj, unique: unique,
		statusPrefix: pfxStatus + kindOf(prefix) + "/"}
	c.reset(fold)
	return c
}

func newUniqueIndex[T any](prefix string, count func(T) int, value func(T, int) string) *uniqueIndex[T] {
	return &uniqueIndex[T]{prefix: prefix, count: count, value: value, owner: map[string]string{}}
}

func (c *collection[T]) reset(fold func(string) string) {
	c.byUUID = map[string]entry[T]{}
	c.status = map[string]*config.Status{}
	c.names = newNameIndex(fold)
	for _, x := range c.unique {
		x.owner = map[string]string{}
	}
}

// load adds one object read from the store at revision rev.
func (c *collection[T]) load(_ string, value []byte, rev int64) error {
	obj := c.newObj()
	if err := json.Unmarshal(value, obj); err != nil {
		return err
	}
	c.remember(obj, rev)
	return nil
}

// remember puts obj (owned by the cache) and its index entries in the
// cache, replacing the object of the same uuid.
func (c *collection[T]) remember(obj T, rev int64) {
	uuid := obj.GetUUID()
	if old, ok := c.byUUID[uuid]; ok {
		c.unindex(old.obj)
	}
	c.byUUID[uuid] = entry[T]{obj, rev}
	c.names.add(obj.GetName(), uuid)
	for _, x := range c.unique {
		for k := range x.count(obj) {
			x.owner[x.value(obj, k)] = uuid
		}
	}
}

// forget drops obj, as the cache holds it, its index entries and its
// status.
func (c *collection[T]) forget(obj T) {
	c.unindex(obj)
	delete(c.byUUID, obj.GetUUID())
	delete(c.status, obj.GetUUID())
}

// unindex drops obj's index entries.
func (c *collection[T]) unindex(obj T) {
	c.names.remove(obj.GetName())
	for _, x := range c.unique {
		for k := range x.count(obj) {
			delete(x.owner, x.value(obj, k))
		}
	}
}

// get finds an object by name (in any case, if names fold) or uuid,
// without copying it.
func (c *collection[T]) get(nameOrUUID string) (T, bool) {
	if u, ok := c.names.lookup(nameOrUUID); ok {
		nameOrUUID = u
	}
	e, ok := c.byUUID[nameOrUUID]
	return e.obj, ok
}

// sortedClones copies every object, sorted by name.
func (c *collection[T]) sortedClones() []T {
	out := make([]T, 0, len(c.byUUID))
	for _, e := range c.byUUID {
		out = append(out, e.obj.Clone())
	}
	sort.Slice(out, func(i, j int) bool { return out[i].GetName() < out[j].GetName() })
	return out
}

// staged are one collection's changes in a transaction, applied to the
// cache once it committed: removals first, then puts, in call order.
type staged[T object[T]] struct {
	c        *collection[T]
	puts     []T
	dels     []T
	statuses map[string]*config.Status // by uuid; nil removes
}

func (s *staged[T]) apply(rev int64) {
	for _, o := range s.dels {
		if cur, ok := s.c.byUUID[o.GetUUID()]; ok {
			s.c.forget(cur.obj)
		}
	}
	for _, o := range s.puts {
		s.c.remember(o.Clone(), rev)
	}
	for uuid, st := range s.statuses {
		if _, ok := s.c.byUUID[uuid]; !ok {
			continue
		}
		if st == nil {
			delete(s.c.status, uuid)
		} else {
			s.c.status[uuid] = st.Clone()
		}
	}
}

// stageOf is tx's record of changes to c. A transaction touches few
// collections, so a scan finds it.
func stageOf[T object[T]](tx *Tx, c *collection[T]) *staged[T] {
	for _, a := range tx.stages {
		if s, ok := a.(*staged[T]); ok && s.c == c {
			return s
		}
	}
	s := &staged[T]{c: c}
	tx.stages = append(tx.stages, s)
	return s
}

// putObject adds or updates obj in c: its serial number and mtime are
// bumped, and the compares make the commit fail if the object changed
// since obj was read, or if its new name or a new unique value is taken.
func putObject[T object[T]](tx *Tx, c *collection[T], obj T) {
	uuid := obj.GetUUID()
	tx.db.mu.RLock()
	old, exists := c.byUUID[uuid]
	tx.db.mu.RUnlock()
	rev, oldName := old.rev, ""
	if exists {
		oldName = old.obj.GetName()
		rev = readRev(true, old.rev, old.obj.GetSerial(), obj.GetSerial())
	}
	obj.Touch(tx.db.now())
	uuid = obj.GetUUID() // a new object gets its uuid from Touch
	key := c.prefix + uuid
	tx.putNamed(key, c.namePrefix, c.names, exists, rev, oldName, obj.GetName(), uuid)
	for _, x := range c.unique {
		for k := range x.count(obj) {
			if v := x.value(obj, k); !exists || !x.has(old.obj, v) {
				tx.nameIndex(x.prefix+v, uuid)
			}
		}
		if !exists {
			continue
		}
		for k := range x.count(old.obj) {
			if v := x.value(old.obj, k); !x.has(obj, v) {
				tx.ops = append(tx.ops, store.Delete(x.prefix+v))
			}
		}
	}
	tx.put(key, obj)
	s := stageOf(tx, c)
	s.puts = append(s.puts, obj)
}

// deleteObject removes obj and its index keys from c, if nobody changed
// it since the cache saw it. A missing object is no change.
func deleteObject[T object[T]](tx *Tx, c *collection[T], obj T) {
	tx.db.mu.RLock()
	old, exists := c.byUUID[obj.GetUUID()]
	tx.db.mu.RUnlock()
	if !exists {
		return
	}
	uuid := old.obj.GetUUID()
	tx.deleteNamed(c.prefix+uuid, c.namePrefix, c.names, old.obj.GetName(), uuid, old.rev)
	tx.db.mu.RLock()
	_, hasStatus := c.status[uuid]
	tx.db.mu.RUnlock()
	if hasStatus {
		tx.ops = append(tx.ops, store.Delete(c.statusPrefix+uuid))
	}
	for _, x := range c.unique {
		for k := range x.count(old.obj) {
			tx.ops = append(tx.ops, store.Delete(x.prefix+x.value(old.obj, k)))
		}
	}
	s := stageOf(tx, c)
	s.dels = append(s.dels, old.obj)
}
