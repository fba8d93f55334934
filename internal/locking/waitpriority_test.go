package locking

import (
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// pendingOf lists the waiters of lock name as owner@priority, in queue order.
func pendingOf(m *Manager, name string) []string {
	var out []string
	for _, li := range m.Info() {
		if li.Name == name {
			for _, p := range li.Pending {
				out = append(out, p.Owner+"@"+strconv.Itoa(p.Priority))
			}
		}
	}
	return out
}

func TestSetWaitPriorityReorders(t *testing.T) {
	for _, tc := range []struct {
		name        string
		queue       []waitSpec
		change      []waitSpec // owner, new priority
		wantPending []string
		wantOrder   []string
	}{
		{"raise the last", []waitSpec{{"b", 0}, {"c", 0}, {"d", 0}}, []waitSpec{{"d", -5}},
			[]string{"d@-5", "b@0", "c@0"}, []string{"d", "b", "c"}},
		{"lower the first", []waitSpec{{"b", 0}, {"c", 0}, {"d", 0}}, []waitSpec{{"b", 5}},
			[]string{"c@0", "d@0", "b@5"}, []string{"c", "d", "b"}},
		{"arrival order kept among equals", []waitSpec{{"b", 0}, {"c", 5}, {"d", 0}}, []waitSpec{{"c", 0}},
			[]string{"b@0", "c@0", "d@0"}, []string{"b", "c", "d"}},
		{"several changes", []waitSpec{{"b", 0}, {"c", 0}, {"d", 0}, {"e", 0}}, []waitSpec{{"e", -10}, {"b", 19}, {"d", -10}},
			[]string{"d@-10", "e@-10", "c@0", "b@19"}, []string{"d", "e", "c", "b"}},
		{"same priority changes nothing", []waitSpec{{"b", 3}, {"c", 3}}, []waitSpec{{"c", 3}},
			[]string{"b@3", "c@3"}, []string{"b", "c"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			order := grantOrder(t, tc.queue, func(m *Manager) {
				for _, c := range tc.change {
					n, err := m.SetWaitPriority(func(o string) bool { return o == c.owner }, c.prio)
					if err != nil || n != 1 {
						t.Fatalf("SetWaitPriority(%s, %d) = %d, %v; want 1 owner", c.owner, c.prio, n, err)
					}
				}
				if got := pendingOf(m, "instance/x"); !slices.Equal(got, tc.wantPending) {
					t.Fatalf("pending %v, want %v", got, tc.wantPending)
				}
			})
			if !slices.Equal(order, tc.wantOrder) {
				t.Fatalf("grant order %v, want %v", order, tc.wantOrder)
			}
		})
	}
}

// A shared waiter stuck behind an exclusive one is granted as soon as it is
// raised above it, since the holders admit it.
func TestSetWaitPriorityGrantsAtOnce(t *testing.T) {
	m := New()
	holder := mustHold(t, m, "holder", req(LevelNode, Shared, "n"))
	writer, wch := queueWaiter(t, m, "writer", "node/n", 0, req(LevelNode, Exclusive, "n"))
	reader, rch := queueWaiter(t, m, "reader", "node/n", 0, req(LevelNode, Shared, "n"))

	if n, err := m.SetWaitPriority(func(o string) bool { return o == "reader" }, -1); n != 1 || err != nil {
		t.Fatalf("SetWaitPriority: %d, %v", n, err)
	}
	mustRecv(t, rch, "raised reader")
	assertPending(t, wch, "writer")
	if !reader.Owns(LevelNode, "n", Shared) {
		t.Fatal("raised reader does not hold the lock")
	}
	holder.Release()
	reader.Release()
	mustRecv(t, wch, "writer")
	writer.Release()
	assertIdle(t, m)
}

// A new priority also applies to the locks the owner has still to take.
func TestSetWaitPriorityLaterLevels(t *testing.T) {
	m := New()
	bgl := mustHold(t, m, "bgl holder", req(LevelCluster, Exclusive, BGL))
	node := mustHold(t, m, "node holder", req(LevelNode, Shared, "n"))
	early, ech := queueWaiter(t, m, "early", "node/n", 0, req(LevelNode, Exclusive, "n"))

	late, lch := queueWaiter(t, m, "job 9/op 0", "cluster/BGL", 5, req(LevelCluster, Shared, BGL), req(LevelNode, Exclusive, "n"))
	n, err := m.SetWaitPriority(func(o string) bool { return strings.HasPrefix(o, "job 9/") }, -5)
	if n != 1 || err != nil {
		t.Fatalf("SetWaitPriority: %d, %v", n, err)
	}
	if got := pendingOf(m, "cluster/BGL"); !slices.Equal(got, []string{"job 9/op 0@-5"}) {
		t.Fatalf("BGL pending %v", got)
	}
	bgl.Release()
	waitPending(t, m, "node/n", "job 9/op 0")
	if got, want := pendingOf(m, "node/n"), []string{"job 9/op 0@-5", "early@0"}; !slices.Equal(got, want) {
		t.Fatalf("node pending %v, want %v", got, want)
	}
	node.Release()
	mustRecv(t, lch, "raised owner")
	assertPending(t, ech, "early")
	late.Release()
	mustRecv(t, ech, "early")
	early.Release()
	assertIdle(t, m)
}

func TestSetWaitPriorityRefusesAndIgnores(t *testing.T) {
	m := New()
	holder := mustHold(t, m, "holder", req(LevelInstance, Exclusive, "x"))
	w, ch := queueWaiter(t, m, "w", "instance/x", 2, req(LevelInstance, Exclusive, "x"))
	all := func(string) bool { return true }
	for _, p := range []int{PriorityHighest - 1, PriorityLowest + 1} {
		if _, err := m.SetWaitPriority(all, p); !errors.Is(err, ErrInvalid) {
			t.Fatalf("priority %d: %v, want ErrInvalid", p, err)
		}
	}
	// Holders that do not wait are not waiting owners.
	if n, err := m.SetWaitPriority(func(o string) bool { return o == "holder" }, 1); n != 0 || err != nil {
		t.Fatalf("holder matched: %d, %v", n, err)
	}
	if got := pendingOf(m, "instance/x"); !slices.Equal(got, []string{"w@2"}) {
		t.Fatalf("pending %v after refused changes", got)
	}
	holder.Release()
	mustRecv(t, ch, "w")
	w.Release()
	if n, _ := m.SetWaitPriority(all, 0); n != 0 {
		t.Fatalf("%d owners matched with nobody waiting", n)
	}
	assertIdle(t, m)
}
