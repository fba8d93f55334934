package locking

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
)

// Manager holds every lock of the cluster. One mutex guards all state: a lock
// operation touches a handful of map entries, so finer locking would cost more
// than it saves, and it keeps Info a consistent snapshot.
type Manager struct {
	mu     sync.Mutex
	levels [numLevels]levelLocks
	seq    uint64  // orders waiters of equal priority
	free   []*lock // idle named locks kept for reuse, to spare allocations
	// waiting holds the owners whose Acquire waits (or was granted and has
	// not resumed yet), for SetWaitPriority.
	waiting map[*Held]struct{}
}

type levelLocks struct {
	set   *lock            // the level's set lock, see lmode
	named map[string]*lock // created on first use, dropped when idle
}

// Held is one owner's view of what it holds, typically one job's opcode.
// Its methods are safe to call from several goroutines. Only one Acquire may
// run on it at a time, and a Release while that Acquire waits aborts it (see
// ErrReleased); the usual way to stop a wait is the Acquire's context.
type Held struct {
	m     *Manager
	owner string

	// Guarded by m.mu.
	levels  [numLevels]*levelHold
	busy    bool    // an Acquire is in progress
	prio    int     // that Acquire's priority; SetWaitPriority may change it
	waiting *waiter // the queued request of that Acquire, if it waits
}

type levelHold struct {
	set   lmode           // mode on the level's set lock
	names map[string]Mode // individual locks; nil when All is held
}

func (lh *levelHold) all() bool { return lh.set == modeS || lh.set == modeX }

// step is one internal lock an Acquire call needs; name "" is the set lock.
type step struct {
	level Level
	name  string
	mode  lmode
}

// String names the lock as Info does, for error messages. (The *lock itself
// may be recycled under another name once idle, so messages use the step.)
func (st step) String() string {
	if st.name == "" {
		return st.level.String() + "/" + All
	}
	return st.level.String() + "/" + st.name
}

// New returns an empty lock manager.
func New() *Manager {
	m := &Manager{waiting: make(map[*Held]struct{})}
	for i := range m.levels {
		m.levels[i] = levelLocks{set: newLock(Level(i), ""), named: make(map[string]*lock)}
	}
	return m
}

// NewOwner returns an owner that holds nothing. owner is a display name such
// as "job 12/op 0"; it need not be unique.
func (m *Manager) NewOwner(owner string) *Held {
	return &Held{m: m, owner: owner}
}

// Acquire takes every lock in reqs for h, level by level and by name within a
// level, and returns once all are granted. If ctx ends first, everything this
// call took is released and the context's error is returned, wrapped. As with
// a semaphore, a call that never has to wait succeeds even if ctx is already
// done, which makes an expired context a non-blocking try.
//
// Every level in reqs must be above every level h already holds: that rule is
// what makes deadlock impossible. Requests with no names are ignored. Several
// requests may name the same level; a name asked for in both modes is taken
// exclusive. All cannot be mixed with individual names at one level.
//
// priority is Ganeti's (-20 most urgent to 19); among conflicting waiters the
// more urgent is granted first, equal priorities in arrival order.
// SetWaitPriority may change it while the call waits.
func (m *Manager) Acquire(ctx context.Context, h *Held, priority int, reqs ...Request) error {
	if h == nil || h.m != m {
		return misuse(ErrInvalid, "owner does not belong to this manager")
	}
	if priority < PriorityHighest || priority > PriorityLowest {
		return misuse(ErrInvalid, "%s: priority %d outside %d..%d", h.owner, priority, PriorityHighest, PriorityLowest)
	}
	steps, err := plan(reqs)
	if err != nil {
		return misuse(ErrInvalid, "%s: %v", h.owner, err)
	}
	if len(steps) == 0 {
		return nil
	}

	m.mu.Lock()
	defer m.mu.Unlock()
	if h.busy {
		return misuse(ErrBusy, "%s", h.owner)
	}
	if top := h.topLevel(); top >= steps[0].level {
		return misuse(ErrOrder, "%s holds %s locks and asked for %s", h.owner, top, steps[0].level)
	}
	h.busy, h.prio = true, priority
	defer func() { h.busy = false }()

	for done, st := range steps {
		l := m.lockFor(st.level, st.name)
		// h.prio, not priority: the wait for an earlier lock may have
		// changed it.
		if l.grantable(st.mode, h.prio) {
			l.add(h, st.mode)
			h.record(l, st.mode)
			continue
		}
		m.seq++
		w := &waiter{h: h, l: l, mode: st.mode, prio: h.prio, seq: m.seq, ready: make(chan struct{})}
		l.enqueue(w)
		h.waiting = w
		m.waiting[h] = struct{}{}

		m.mu.Unlock()
		select {
		case <-w.ready:
		case <-ctx.Done():
		}
		m.mu.Lock()
		h.waiting = nil
		delete(m.waiting, h)

		if w.aborted {
			// Release already took the waiter out of the queue.
			m.rollback(h, steps[:done+1])
			return fmt.Errorf("locking: %s waiting for %s %s: %w", h.owner, st, st.mode.request(), ErrReleased)
		}
		// A grant that raced with the cancellation is kept; the context is
		// looked at again only when the next lock has to be waited for.
		if !w.granted {
			l.dequeue(w)
			// Leaving the queue may unblock waiters that were behind us.
			l.dispatch()
			m.gc(l)
			m.rollback(h, steps[:done])
			return fmt.Errorf("locking: %s waiting for %s %s: %w", h.owner, st, st.mode.request(), ctx.Err())
		}
	}
	return nil
}

// SetWaitPriority changes the priority of every Acquire that waits for a
// lock on behalf of an owner whose display name satisfies match: its queued
// request moves to its place for the new priority (keeping its arrival order
// among equals), and the locks it has still to take are asked for at the new
// priority. This is how a job blocked on its locks follows Ganeti's
// ChangeJobPriority. match runs under the manager's mutex and must not call
// the manager. It returns how many waiting owners matched.
func (m *Manager) SetWaitPriority(match func(owner string) bool, priority int) (int, error) {
	if priority < PriorityHighest || priority > PriorityLowest {
		return 0, misuse(ErrInvalid, "priority %d outside %d..%d", priority, PriorityHighest, PriorityLowest)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for h := range m.waiting {
		if !match(h.owner) {
			continue
		}
		n++
		h.prio = priority
		w := h.waiting
		if w == nil || w.granted || w.aborted || w.prio == priority {
			continue
		}
		w.l.dequeue(w)
		w.prio = priority
		w.l.enqueue(w)
		// Moving can let this waiter in (nothing incompatible is ahead of
		// it now) or let others in (it no longer stands ahead of them).
		w.l.dispatch()
	}
	return n, nil
}

// plan validates reqs and turns them into the internal locks to take, in the
// global acquisition order: by level, the set lock first, then names sorted.
func plan(reqs []Request) ([]step, error) {
	var want []step // named requests; name All stands for the set lock
	for _, r := range reqs {
		if !r.Level.valid() {
			return nil, fmt.Errorf("unknown lock %s", r.Level)
		}
		if r.Mode != Shared && r.Mode != Exclusive {
			return nil, fmt.Errorf("unknown lock %s", r.Mode)
		}
		for _, n := range r.Names {
			if err := checkName(r.Level, n); err != nil {
				return nil, err
			}
			want = append(want, step{level: r.Level, name: n, mode: lmodeOf(r.Mode)})
		}
	}
	if len(want) == 0 {
		return nil, nil
	}
	// All sorts first within its level whatever the names look like, so a
	// level whose first entry is a name has no All.
	slices.SortFunc(want, func(a, b step) int {
		if a.level != b.level {
			return int(a.level) - int(b.level)
		}
		if (a.name == All) != (b.name == All) {
			if a.name == All {
				return -1
			}
			return 1
		}
		return strings.Compare(a.name, b.name)
	})

	steps := make([]step, 0, len(want)+numLevels)
	for i := 0; i < len(want); {
		level := want[i].level
		j := i
		for j < len(want) && want[j].level == level {
			j++
		}
		group := want[i:j]
		i = j
		if group[0].name == All {
			mode := modeS
			for _, w := range group {
				if w.name != All {
					return nil, fmt.Errorf("%s level: %q mixed with individual names", level, All)
				}
				mode = max(mode, w.mode)
			}
			steps = append(steps, step{level: level, mode: mode})
			continue
		}
		setAt := len(steps)
		steps = append(steps, step{level: level, mode: modeIS})
		for _, w := range group {
			if w.mode == modeX {
				steps[setAt].mode = modeIX
			}
			// Duplicates are adjacent; a name asked for in both modes is
			// taken in the stronger one.
			if last := &steps[len(steps)-1]; last.name == w.name {
				last.mode = max(last.mode, w.mode)
				continue
			}
			steps = append(steps, w)
		}
	}
	return steps, nil
}

func checkName(level Level, name string) error {
	if name == "" {
		return fmt.Errorf("empty lock name at %s level", level)
	}
	if name == All {
		return nil
	}
	switch level {
	case LevelCluster:
		if name != BGL {
			return fmt.Errorf("cluster level has only %q, not %q", BGL, name)
		}
	case LevelNodeAlloc:
		if name != NAL {
			return fmt.Errorf("node_alloc level has only %q, not %q", NAL, name)
		}
	}
	return nil
}

// lockFor returns the lock for (level, name), creating a named lock on first
// use. Locks need no registration because the configuration, not the lock
// manager, decides which names exist.
func (m *Manager) lockFor(level Level, name string) *lock {
	ll := &m.levels[level]
	if name == "" {
		return ll.set
	}
	l := ll.named[name]
	if l == nil {
		if n := len(m.free); n > 0 {
			l, m.free = m.free[n-1], m.free[:n-1]
			l.level, l.name = level, name
		} else {
			l = newLock(level, name)
		}
		ll.named[name] = l
	}
	return l
}

// maxFree bounds the reuse list; beyond it idle locks go to the collector.
const maxFree = 64

// gc forgets an idle named lock so that instance churn does not grow the maps.
func (m *Manager) gc(l *lock) {
	if l.name != "" && l.idle() {
		delete(m.levels[l.level].named, l.name)
		if len(m.free) < maxFree {
			l.queue = l.queue[:0]
			m.free = append(m.free, l)
		}
	}
}

// rollback releases the locks of steps, last first.
func (m *Manager) rollback(h *Held, steps []step) {
	for _, st := range slices.Backward(steps) {
		l := m.lockFor(st.level, st.name)
		m.releaseLock(h, l)
	}
}

func (m *Manager) releaseLock(h *Held, l *lock) {
	if l.remove(h) {
		h.unrecord(l)
		l.dispatch()
	}
	m.gc(l)
}

// Owner returns the display name given to NewOwner.
func (h *Held) Owner() string { return h.owner }

// Release gives up every lock h holds at levels, or at every level when none
// are given. An Acquire of h that is waiting meanwhile fails with ErrReleased
// and gives back what it took, whatever levels are named here.
func (h *Held) Release(levels ...Level) {
	m := h.m
	m.mu.Lock()
	defer m.mu.Unlock()
	if w := h.waiting; w != nil && !w.aborted {
		w.aborted = true
		if !w.granted {
			w.l.dequeue(w)
			w.l.dispatch()
			m.gc(w.l)
			close(w.ready)
		}
	}
	if len(levels) == 0 {
		levels = Levels()
	}
	for _, lv := range levels {
		if !lv.valid() {
			continue
		}
		lh := h.levels[lv]
		if lh == nil {
			continue
		}
		for n := range lh.names {
			m.releaseLock(h, m.lockFor(lv, n))
		}
		m.releaseLock(h, m.levels[lv].set)
	}
}

// Downgrade turns exclusive locks at level into shared ones, letting shared
// waiters in. With no names (or All) it downgrades everything h holds at the
// level. Names not held exclusive are ignored, and an owner of All can only
// downgrade it as a whole.
func (h *Held) Downgrade(level Level, names ...string) {
	m := h.m
	m.mu.Lock()
	defer m.mu.Unlock()
	if !level.valid() || h.levels[level] == nil {
		return
	}
	lh := h.levels[level]
	whole := len(names) == 0 || slices.Contains(names, All)
	set := m.levels[level].set
	if lh.all() {
		if whole && lh.set == modeX {
			set.change(h, modeS)
			lh.set = modeS
			set.dispatch()
		}
		return
	}
	if whole {
		names = slices.Collect(maps.Keys(lh.names))
	}
	for _, n := range names {
		if lh.names[n] != Exclusive {
			continue
		}
		l := m.lockFor(level, n)
		l.change(h, modeS)
		lh.names[n] = Shared
		l.dispatch()
	}
	if lh.set == modeIX && !slices.Contains(slices.Collect(maps.Values(lh.names)), Exclusive) {
		set.change(h, modeIS)
		lh.set = modeIS
		set.dispatch()
	}
}

// Held returns what h holds, in level order: one request per level and mode,
// names sorted. Passing the result to Acquire on a fresh owner takes the same
// locks again, which is how a restarted master restores a job's locks.
func (h *Held) Held() []Request {
	h.m.mu.Lock()
	defer h.m.mu.Unlock()
	var out []Request
	for lv, lh := range h.levels {
		if lh == nil {
			continue
		}
		level := Level(lv)
		if lh.all() {
			out = append(out, Request{Level: level, Names: []string{All}, Mode: lh.set.public()})
			continue
		}
		for _, md := range []Mode{Shared, Exclusive} {
			var names []string
			for _, n := range slices.Sorted(maps.Keys(lh.names)) {
				if lh.names[n] == md {
					names = append(names, n)
				}
			}
			if len(names) > 0 {
				out = append(out, Request{Level: level, Names: names, Mode: md})
			}
		}
	}
	return out
}

// Owned returns the names h holds at level, sorted; []string{All} if it holds
// the whole level; nil if nothing.
func (h *Held) Owned(level Level) []string {
	h.m.mu.Lock()
	defer h.m.mu.Unlock()
	if !level.valid() || h.levels[level] == nil {
		return nil
	}
	lh := h.levels[level]
	if lh.all() {
		return []string{All}
	}
	return slices.Sorted(maps.Keys(lh.names))
}

// Owns reports whether h holds name at level (directly or through All) in at
// least mode: an exclusive lock satisfies a shared check.
func (h *Held) Owns(level Level, name string, mode Mode) bool {
	h.m.mu.Lock()
	defer h.m.mu.Unlock()
	if !level.valid() || h.levels[level] == nil {
		return false
	}
	lh := h.levels[level]
	if lh.all() {
		return lh.set.public() >= mode
	}
	got, ok := lh.names[name]
	return ok && got >= mode
}

func (h *Held) topLevel() Level {
	for lv := numLevels - 1; lv >= 0; lv-- {
		if h.levels[lv] != nil {
			return Level(lv)
		}
	}
	return -1
}

// record notes in h that it was granted l in mode; called under m.mu by
// whoever grants, so h always matches the locks' holder sets.
func (h *Held) record(l *lock, mode lmode) {
	if l.name == "" {
		lh := &levelHold{set: mode}
		if mode == modeIS || mode == modeIX {
			lh.names = make(map[string]Mode)
		}
		h.levels[l.level] = lh
		return
	}
	h.levels[l.level].names[l.name] = mode.public()
}

func (h *Held) unrecord(l *lock) {
	if l.name == "" {
		h.levels[l.level] = nil
		return
	}
	if lh := h.levels[l.level]; lh != nil {
		delete(lh.names, l.name)
	}
}
