package locking

import (
	"maps"
	"slices"
)

// LockInfo describes one lock for `corral debug locks` and the lock query.
type LockInfo struct {
	Name    string        // "instance/web1"; a level's set lock is "instance/*"
	Mode    string        // "exclusive", "shared" or "" when nobody holds it
	Owners  []string      // sorted
	Pending []PendingInfo // in the order they will be considered
}

// PendingInfo is one waiter on a lock.
type PendingInfo struct {
	Owner    string
	Mode     string // the mode the owner asked for
	Priority int
}

// Info returns every lock that is held or waited for, in acquisition order
// (level, then the set lock, then names), so a reader can follow the wait
// graph top-down.
//
// A level's set lock is listed when someone holds or wants All there, or when
// anyone waits on it. Its owners then include the owners of individual locks
// at the level (shown shared, as an individual lock takes the set lock shared
// in Ganeti), because those are who an All-exclusive waiter waits for. A
// request for individual locks that waits at the set level (because All is
// held) is listed there with the mode it asked for.
func (m *Manager) Info() []LockInfo {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []LockInfo
	for lv := range m.levels {
		ll := &m.levels[lv]
		if ll.set.counts[modeS]+ll.set.counts[modeX] > 0 || len(ll.set.queue) > 0 {
			out = append(out, ll.set.info())
		}
		for _, n := range slices.Sorted(maps.Keys(ll.named)) {
			if l := ll.named[n]; !l.idle() {
				out = append(out, l.info())
			}
		}
	}
	return out
}

func (l *lock) info() LockInfo {
	li := LockInfo{Name: lockName(l)}
	if len(l.holders) > 0 {
		li.Mode = Shared.String()
		if l.counts[modeX] > 0 {
			li.Mode = Exclusive.String()
		}
		li.Owners = make([]string, 0, len(l.holders))
		for h := range l.holders {
			li.Owners = append(li.Owners, h.owner)
		}
		slices.Sort(li.Owners)
	}
	for _, w := range l.queue {
		li.Pending = append(li.Pending, PendingInfo{Owner: w.h.owner, Mode: w.mode.request().String(), Priority: w.prio})
	}
	return li
}

func lockName(l *lock) string { return step{level: l.level, name: l.name}.String() }
