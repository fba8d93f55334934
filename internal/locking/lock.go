package locking

import "slices"

// lmode is a mode on one internal lock. Named locks use only modeS and modeX.
// The per-level set lock also takes the intention modes: an owner of
// individual locks holds the set lock IS (all shared) or IX (some exclusive),
// an owner of All holds it S or X. The compatibility of these four modes gives
// exactly the All semantics: All exclusive excludes every individual lock,
// All shared excludes individual exclusive locks, and because the check is on
// the set lock it also covers names nobody had mentioned yet.
type lmode uint8

const (
	modeIS lmode = iota
	modeIX
	modeS
	modeX
	numModes
)

// conflicts[m] is the bit set of modes that m cannot coexist with.
var conflicts = [numModes]uint8{
	modeIS: 1 << modeX,
	modeIX: 1<<modeS | 1<<modeX,
	modeS:  1<<modeIX | 1<<modeX,
	modeX:  1<<modeIS | 1<<modeIX | 1<<modeS | 1<<modeX,
}

func compatible(m lmode, mask uint8) bool { return conflicts[m]&mask == 0 }

func lmodeOf(m Mode) lmode {
	if m == Exclusive {
		return modeX
	}
	return modeS
}

// public maps an internal mode to what operators see. Intention modes show as
// shared because an individual lock takes the set lock shared, as in Ganeti.
func (m lmode) public() Mode {
	if m == modeX {
		return Exclusive
	}
	return Shared
}

// request maps an internal mode to the mode the owner asked for: IX is the
// set-level footprint of an exclusive request for individual locks.
func (m lmode) request() Mode {
	if m == modeX || m == modeIX {
		return Exclusive
	}
	return Shared
}

// lock is one lock: a named lock or a level's set lock (name == "").
type lock struct {
	level   Level
	name    string
	holders map[*Held]lmode
	counts  [numModes]int
	queue   []*waiter // sorted by (prio, seq)
}

// waiter is one blocked Acquire. The goroutine that makes the lock
// available grants it and closes ready, so a woken waiter never competes again.
type waiter struct {
	h       *Held
	l       *lock
	mode    lmode
	prio    int
	seq     uint64
	ready   chan struct{}
	granted bool
	aborted bool // the owner released everything while this waited
}

func newLock(level Level, name string) *lock {
	return &lock{level: level, name: name, holders: make(map[*Held]lmode)}
}

func (l *lock) heldMask() uint8 {
	var mask uint8
	for m, n := range l.counts {
		if n > 0 {
			mask |= 1 << m
		}
	}
	return mask
}

func (l *lock) idle() bool { return len(l.holders) == 0 && len(l.queue) == 0 }

// grantable reports whether a new request at prio may be granted now: it must
// fit the holders and every waiter that would be queued ahead of it.
func (l *lock) grantable(mode lmode, prio int) bool {
	if !compatible(mode, l.heldMask()) {
		return false
	}
	for _, w := range l.queue {
		if w.prio > prio {
			break
		}
		if !compatible(mode, 1<<w.mode) {
			return false
		}
	}
	return true
}

func (l *lock) enqueue(w *waiter) {
	i, _ := slices.BinarySearchFunc(l.queue, w, func(a, b *waiter) int {
		if a.prio != b.prio {
			return a.prio - b.prio
		}
		switch {
		case a.seq < b.seq:
			return -1
		case a.seq > b.seq:
			return 1
		}
		return 0
	})
	l.queue = slices.Insert(l.queue, i, w)
}

func (l *lock) dequeue(w *waiter) {
	if i := slices.Index(l.queue, w); i >= 0 {
		l.queue = slices.Delete(l.queue, i, i+1)
	}
}

func (l *lock) add(h *Held, m lmode) {
	l.holders[h] = m
	l.counts[m]++
}

func (l *lock) remove(h *Held) bool {
	m, ok := l.holders[h]
	if !ok {
		return false
	}
	delete(l.holders, h)
	l.counts[m]--
	return true
}

func (l *lock) change(h *Held, m lmode) {
	old, ok := l.holders[h]
	if !ok || old == m {
		return
	}
	l.counts[old]--
	l.counts[m]++
	l.holders[h] = m
}

// dispatch grants every queued waiter that now fits the holders and the
// waiters still queued ahead of it. It must run after any change that can make
// a lock more available (release, downgrade, a waiter leaving the queue), which
// keeps the invariant that no queued waiter is grantable.
func (l *lock) dispatch() {
	var ahead uint8
	kept := l.queue[:0]
	for i, w := range l.queue {
		if ahead&(1<<modeX) != 0 {
			// Nothing is compatible with a queued exclusive waiter.
			kept = append(kept, l.queue[i:]...)
			break
		}
		if compatible(w.mode, l.heldMask()) && compatible(w.mode, ahead) {
			l.add(w.h, w.mode)
			w.h.record(l, w.mode)
			w.granted = true
			close(w.ready)
			continue
		}
		ahead |= 1 << w.mode
		kept = append(kept, w)
	}
	clear(l.queue[len(kept):])
	l.queue = kept
}
