package locking

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
)

type waitSpec struct {
	owner string
	prio  int
}

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
			m := New()
			holder := m.NewOwner("holder")
			x := req(LevelInstance, Exclusive, "x")
			mustAcquire(t, m, holder, 0, x)
			var mu sync.Mutex
			var order []string
			var wg sync.WaitGroup
			for _, q := range tc.queue {
				h := m.NewOwner(q.owner)
				wg.Go(func() {
					if err := m.Acquire(context.Background(), h, q.prio, x); err != nil {
						t.Errorf("%s: %v", q.owner, err)
						return
					}
					mu.Lock()
					order = append(order, q.owner)
					mu.Unlock()
					h.Release()
				})
				waitPending(t, m, "instance/x", q.owner)
			}
			for _, c := range tc.change {
				n, err := m.SetWaitPriority(func(o string) bool { return o == c.owner }, c.prio)
				if err != nil || n != 1 {
					t.Fatalf("SetWaitPriority(%s, %d) = %d, %v; want 1 owner", c.owner, c.prio, n, err)
				}
			}
			if got := pendingOf(m, "instance/x"); !slices.Equal(got, tc.wantPending) {
				t.Fatalf("pending %v, want %v", got, tc.wantPending)
			}
			holder.Release()
			wg.Wait()
			if !slices.Equal(order, tc.wantOrder) {
				t.Fatalf("grant order %v, want %v", order, tc.wantOrder)
			}
			assertIdle(t, m)
		})
	}
}

// A shared waiter stuck behind an exclusive one is granted as soon as it is
// raised above it, since the holders admit it.
func TestSetWaitPriorityGrantsAtOnce(t *testing.T) {
	m := New()
	holder := m.NewOwner("holder")
	mustAcquire(t, m, holder, 0, req(LevelNode, Shared, "n"))
	writer := m.NewOwner("writer")
	wch := acquireAsync(context.Background(), m, writer, 0, req(LevelNode, Exclusive, "n"))
	waitPending(t, m, "node/n", "writer")
	reader := m.NewOwner("reader")
	rch := acquireAsync(context.Background(), m, reader, 0, req(LevelNode, Shared, "n"))
	waitPending(t, m, "node/n", "reader")

	if n, err := m.SetWaitPriority(func(o string) bool { return o == "reader" }, -1); n != 1 || err != nil {
		t.Fatalf("SetWaitPriority: %d, %v", n, err)
	}
	if err := recvErr(t, rch, "raised reader"); err != nil {
		t.Fatal(err)
	}
	assertPending(t, wch, "writer")
	if !reader.Owns(LevelNode, "n", Shared) {
		t.Fatal("raised reader does not hold the lock")
	}
	holder.Release()
	reader.Release()
	if err := recvErr(t, wch, "writer"); err != nil {
		t.Fatal(err)
	}
	writer.Release()
	assertIdle(t, m)
}

// A new priority also applies to the locks the owner has still to take.
func TestSetWaitPriorityLaterLevels(t *testing.T) {
	m := New()
	bgl := m.NewOwner("bgl holder")
	mustAcquire(t, m, bgl, 0, req(LevelCluster, Exclusive, BGL))
	node := m.NewOwner("node holder")
	mustAcquire(t, m, node, 0, req(LevelNode, Shared, "n"))
	early := m.NewOwner("early")
	ech := acquireAsync(context.Background(), m, early, 0, req(LevelNode, Exclusive, "n"))
	waitPending(t, m, "node/n", "early")

	late := m.NewOwner("job 9/op 0")
	lch := acquireAsync(context.Background(), m, late, 5, req(LevelCluster, Shared, BGL), req(LevelNode, Exclusive, "n"))
	waitPending(t, m, "cluster/BGL", "job 9/op 0")
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
	if err := recvErr(t, lch, "raised owner"); err != nil {
		t.Fatal(err)
	}
	assertPending(t, ech, "early")
	late.Release()
	if err := recvErr(t, ech, "early"); err != nil {
		t.Fatal(err)
	}
	early.Release()
	assertIdle(t, m)
}

func TestSetWaitPriorityRefusesAndIgnores(t *testing.T) {
	m := New()
	holder := m.NewOwner("holder")
	mustAcquire(t, m, holder, 0, req(LevelInstance, Exclusive, "x"))
	w := m.NewOwner("w")
	ch := acquireAsync(context.Background(), m, w, 2, req(LevelInstance, Exclusive, "x"))
	waitPending(t, m, "instance/x", "w")
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
	if err := recvErr(t, ch, "w"); err != nil {
		t.Fatal(err)
	}
	w.Release()
	if n, _ := m.SetWaitPriority(all, 0); n != 0 {
		t.Fatalf("%d owners matched with nobody waiting", n)
	}
	assertIdle(t, m)
}
