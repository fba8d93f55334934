package locking

import (
	"context"
	"errors"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/corral/corral/internal/ecode"
)

func req(level Level, mode Mode, names ...string) Request {
	return Request{Level: level, Names: names, Mode: mode}
}

// doneCtx is an expired context: Acquire with it succeeds only if nothing has
// to wait, which makes conflicts testable without timing.
func doneCtx() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}

func mustAcquire(t *testing.T, m *Manager, h *Held, prio int, reqs ...Request) {
	t.Helper()
	if err := m.Acquire(context.Background(), h, prio, reqs...); err != nil {
		t.Fatalf("Acquire for %s: %v", h.Owner(), err)
	}
}

// mustHold makes an owner called name that holds reqs at priority 0.
func mustHold(t *testing.T, m *Manager, name string, reqs ...Request) *Held {
	t.Helper()
	h := m.NewOwner(name)
	mustAcquire(t, m, h, 0, reqs...)
	return h
}

// acquireAsync starts a blocking Acquire and returns its result channel.
func acquireAsync(ctx context.Context, m *Manager, h *Held, prio int, reqs ...Request) <-chan error {
	ch := make(chan error, 1)
	go func() { ch <- m.Acquire(ctx, h, prio, reqs...) }()
	return ch
}

// waitPending blocks until owner is queued on the lock called name, polling
// the manager's own report of its queues.
func waitPending(t *testing.T, m *Manager, name, owner string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		for _, li := range m.Info() {
			if li.Name != name {
				continue
			}
			for _, p := range li.Pending {
				if p.Owner == owner {
					return
				}
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never queued on %s; locks: %+v", owner, name, m.Info())
		}
		time.Sleep(time.Millisecond)
	}
}

func recvErr(t *testing.T, ch <-chan error, what string) error {
	t.Helper()
	select {
	case err := <-ch:
		return err
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: Acquire did not return", what)
		return nil
	}
}

// mustRecv waits for a queued Acquire and fails unless it succeeded.
func mustRecv(t *testing.T, ch <-chan error, what string) {
	t.Helper()
	if err := recvErr(t, ch, what); err != nil {
		t.Fatal(err)
	}
}

// queueWaiter makes an owner called name, starts its Acquire and returns once
// it is queued on lock, so the tests know the arrival order.
func queueWaiter(t *testing.T, m *Manager, name, lock string, prio int, reqs ...Request) (*Held, <-chan error) {
	t.Helper()
	h := m.NewOwner(name)
	ch := acquireAsync(context.Background(), m, h, prio, reqs...)
	waitPending(t, m, lock, name)
	return h, ch
}

// assertPending fails if the result channel already has a value: the
// Acquire must still be queued.
func assertPending(t *testing.T, ch <-chan error, what string) {
	t.Helper()
	select {
	case err := <-ch:
		t.Fatalf("%s: Acquire returned %v, want it still waiting", what, err)
	default:
	}
}

func assertIdle(t *testing.T, m *Manager) {
	t.Helper()
	if info := m.Info(); len(info) != 0 {
		t.Fatalf("locks still held or waited for: %+v", info)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for lv, ll := range m.levels {
		if len(ll.named) != 0 || !ll.set.idle() {
			t.Fatalf("level %s keeps state: set %+v named %d", Level(lv), ll.set.holders, len(ll.named))
		}
	}
}

func TestLevelOrderEnforced(t *testing.T) {
	tests := []struct {
		name    string
		held    []Request
		release []Level
		want    []Request
		wantErr error
	}{
		{"higher level", []Request{req(LevelInstance, Exclusive, "a")}, nil, []Request{req(LevelNode, Shared, "n1")}, nil},
		{"same level", []Request{req(LevelInstance, Exclusive, "a")}, nil, []Request{req(LevelInstance, Exclusive, "b")}, ErrOrder},
		{"lower level", []Request{req(LevelNode, Shared, "n1")}, nil, []Request{req(LevelInstance, Shared, "a")}, ErrOrder},
		{"cluster after instance", []Request{req(LevelInstance, Shared, "a")}, nil, []Request{req(LevelCluster, Shared, BGL)}, ErrOrder},
		{"span with a lower level", []Request{req(LevelNodeGroup, Shared, "g")}, nil,
			[]Request{req(LevelNode, Shared, "n"), req(LevelInstance, Shared, "a")}, ErrOrder},
		{"again after releasing the top", []Request{req(LevelInstance, Shared, "a"), req(LevelNode, Shared, "n")},
			[]Level{LevelNode}, []Request{req(LevelNode, Exclusive, "n2")}, nil},
		{"not under a held higher level", []Request{req(LevelInstance, Shared, "a"), req(LevelNode, Shared, "n")},
			[]Level{LevelInstance}, []Request{req(LevelInstance, Shared, "b")}, ErrOrder},
		{"anything after releasing all", []Request{req(LevelNodeRes, Shared, "n")},
			Levels(), []Request{req(LevelCluster, Exclusive, BGL)}, nil},
		{"requests given out of order", nil, nil,
			[]Request{req(LevelNode, Shared, "n"), req(LevelCluster, Shared, BGL), req(LevelInstance, Exclusive, "a")}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := New()
			h := mustHold(t, m, "job 1/op 0", tt.held...)
			if len(tt.release) > 0 {
				h.Release(tt.release...)
			}
			before := h.Held()
			err := m.Acquire(context.Background(), h, 0, tt.want...)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("Acquire error = %v, want %v", err, tt.wantErr)
			}
			if err != nil {
				if e, ok := ecode.As(err); !ok || e.Kind != ecode.ProgrammerError || e.Class != ecode.Fault {
					t.Errorf("error %v is not a classified ProgrammerError", err)
				}
				if got := h.Held(); !reflect.DeepEqual(got, before) {
					t.Errorf("failed Acquire changed holdings: %+v, was %+v", got, before)
				}
			}
			h.Release()
			assertIdle(t, m)
		})
	}
}

func TestInvalidRequests(t *testing.T) {
	m := New()
	other := New().NewOwner("elsewhere")
	tests := []struct {
		name string
		h    *Held
		prio int
		reqs []Request
	}{
		{"nil owner", nil, 0, []Request{req(LevelInstance, Shared, "a")}},
		{"owner of another manager", other, 0, []Request{req(LevelInstance, Shared, "a")}},
		{"priority too urgent", m.NewOwner("x"), -21, []Request{req(LevelInstance, Shared, "a")}},
		{"priority too lax", m.NewOwner("x"), 20, []Request{req(LevelInstance, Shared, "a")}},
		{"unknown level", m.NewOwner("x"), 0, []Request{req(Level(numLevels), Shared, "a")}},
		{"negative level", m.NewOwner("x"), 0, []Request{req(Level(-1), Shared, "a")}},
		{"unknown mode", m.NewOwner("x"), 0, []Request{{Level: LevelInstance, Names: []string{"a"}, Mode: Mode(2)}}},
		{"empty name", m.NewOwner("x"), 0, []Request{req(LevelInstance, Shared, "a", "")}},
		{"All with names", m.NewOwner("x"), 0, []Request{req(LevelInstance, Shared, All, "a")}},
		{"All with names across requests", m.NewOwner("x"), 0, []Request{req(LevelInstance, Shared, All), req(LevelInstance, Exclusive, "a")}},
		{"cluster lock not BGL", m.NewOwner("x"), 0, []Request{req(LevelCluster, Shared, "a")}},
		{"node_alloc lock not NAL", m.NewOwner("x"), 0, []Request{req(LevelNodeAlloc, Shared, BGL)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := m.Acquire(context.Background(), tt.h, tt.prio, tt.reqs...)
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("Acquire error = %v, want ErrInvalid", err)
			}
			assertIdle(t, m)
		})
	}
}

func TestEmptyRequestsAreNoOps(t *testing.T) {
	m := New()
	h := mustHold(t, m, "a", req(LevelNode, Shared, "n"))
	// An empty request at a lower level is not an order violation.
	mustAcquire(t, m, h, 0, req(LevelInstance, Exclusive))
	if got, want := h.Held(), []Request{req(LevelNode, Shared, "n")}; !reflect.DeepEqual(got, want) {
		t.Fatalf("Held() = %+v, want %+v", got, want)
	}
}

func TestCompatibility(t *testing.T) {
	const (
		I = LevelInstance
		N = LevelNode
	)
	tests := []struct {
		name     string
		first    []Request
		second   []Request
		conflict bool
	}{
		{"shared/shared", []Request{req(I, Shared, "a")}, []Request{req(I, Shared, "a")}, false},
		{"shared/exclusive", []Request{req(I, Shared, "a")}, []Request{req(I, Exclusive, "a")}, true},
		{"exclusive/shared", []Request{req(I, Exclusive, "a")}, []Request{req(I, Shared, "a")}, true},
		{"exclusive/exclusive", []Request{req(I, Exclusive, "a")}, []Request{req(I, Exclusive, "a")}, true},
		{"different names", []Request{req(I, Exclusive, "a")}, []Request{req(I, Exclusive, "b")}, false},
		{"same name other level", []Request{req(I, Exclusive, "a")}, []Request{req(N, Exclusive, "a")}, false},
		{"one of several names", []Request{req(I, Exclusive, "c")}, []Request{req(I, Shared, "a", "b", "c")}, true},
		{"BGL shared/shared", []Request{req(LevelCluster, Shared, BGL)}, []Request{req(LevelCluster, Shared, BGL)}, false},
		{"BGL shared/exclusive", []Request{req(LevelCluster, Shared, BGL)}, []Request{req(LevelCluster, Exclusive, BGL)}, true},
		{"All exclusive/name shared", []Request{req(I, Exclusive, All)}, []Request{req(I, Shared, "a")}, true},
		{"All exclusive/other level", []Request{req(I, Exclusive, All)}, []Request{req(N, Exclusive, "a")}, false},
		{"All shared/name shared", []Request{req(I, Shared, All)}, []Request{req(I, Shared, "a")}, false},
		{"All shared/name exclusive", []Request{req(I, Shared, All)}, []Request{req(I, Exclusive, "a")}, true},
		{"All shared/never named exclusive", []Request{req(I, Shared, All)}, []Request{req(I, Exclusive, "brand-new")}, true},
		{"All shared/All shared", []Request{req(I, Shared, All)}, []Request{req(I, Shared, All)}, false},
		{"All shared/All exclusive", []Request{req(I, Shared, All)}, []Request{req(I, Exclusive, All)}, true},
		{"name shared/All shared", []Request{req(I, Shared, "a")}, []Request{req(I, Shared, All)}, false},
		{"name exclusive/All shared", []Request{req(I, Exclusive, "a")}, []Request{req(I, Shared, All)}, true},
		{"name shared/All exclusive", []Request{req(I, Shared, "a")}, []Request{req(I, Exclusive, All)}, true},
		{"names exclusive/names exclusive disjoint", []Request{req(I, Exclusive, "a", "b")}, []Request{req(I, Exclusive, "c", "d")}, false},
		{"mixed modes in one call", []Request{req(I, Shared, "a"), req(I, Exclusive, "a")}, []Request{req(I, Shared, "a")}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := New()
			a, b := m.NewOwner("a"), m.NewOwner("b")
			mustAcquire(t, m, a, 0, tt.first...)
			err := m.Acquire(doneCtx(), b, 0, tt.second...)
			if tt.conflict {
				if !errors.Is(err, context.Canceled) {
					t.Fatalf("second Acquire = %v, want a conflict", err)
				}
				if got := b.Held(); len(got) != 0 {
					t.Fatalf("failed Acquire left %+v held", got)
				}
			} else if err != nil {
				t.Fatalf("second Acquire = %v, want it granted", err)
			}
			a.Release()
			b.Release()
			assertIdle(t, m)
		})
	}
}

type waitSpec struct {
	owner string
	prio  int
}

// grantOrder queues owners (name, priority) for x exclusive behind a holder,
// runs queued (if any) while they all wait, releases the holder and returns
// the order in which they got the lock.
func grantOrder(t *testing.T, queue []waitSpec, queued func(m *Manager)) []string {
	t.Helper()
	m := New()
	holder := m.NewOwner("holder")
	x := req(LevelInstance, Exclusive, "x")
	mustAcquire(t, m, holder, 0, x)

	var mu sync.Mutex
	var order []string
	var wg sync.WaitGroup
	for _, q := range queue {
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
		// Queue one at a time so arrival order is known.
		waitPending(t, m, "instance/x", q.owner)
	}
	if queued != nil {
		queued(m)
	}
	holder.Release()
	wg.Wait()
	assertIdle(t, m)
	return order
}

func TestPriorityOrder(t *testing.T) {
	got := grantOrder(t, []waitSpec{{"b0", 0}, {"c-10", -10}, {"d0", 0}, {"e5", 5}, {"f-20", -20}, {"g19", 19}, {"h-10", -10}}, nil)
	want := []string{"f-20", "c-10", "h-10", "b0", "d0", "e5", "g19"}
	if !slices.Equal(got, want) {
		t.Fatalf("grant order %v, want %v", got, want)
	}
}

func TestFIFOAtEqualPriority(t *testing.T) {
	got := grantOrder(t, []waitSpec{{"1", 3}, {"2", 3}, {"3", 3}, {"4", 3}, {"5", 3}}, nil)
	if want := []string{"1", "2", "3", "4", "5"}; !slices.Equal(got, want) {
		t.Fatalf("grant order %v, want %v", got, want)
	}
}

func TestNoWriterStarvation(t *testing.T) {
	m := New()
	x := "instance/x"
	reader := mustHold(t, m, "reader", req(LevelInstance, Shared, "x"))

	writer, wCh := queueWaiter(t, m, "writer", x, 0, req(LevelInstance, Exclusive, "x"))

	// A later shared request of equal or lower urgency queues behind the writer.
	late, lateCh := queueWaiter(t, m, "late", x, 0, req(LevelInstance, Shared, "x"))
	lax, laxCh := queueWaiter(t, m, "lax", x, 10, req(LevelInstance, Shared, "x"))
	// A more urgent one goes ahead of the writer and joins the readers.
	urgent := m.NewOwner("urgent")
	if err := m.Acquire(doneCtx(), urgent, -5, req(LevelInstance, Shared, "x")); err != nil {
		t.Fatalf("urgent shared request was not granted: %v", err)
	}

	reader.Release()
	assertPending(t, wCh, "writer while urgent reads")
	urgent.Release()
	mustRecv(t, wCh, "writer")
	assertPending(t, lateCh, "late reader under the writer")
	want := []LockInfo{{Name: x, Mode: "exclusive", Owners: []string{"writer"},
		Pending: []PendingInfo{{"late", "shared", 0}, {"lax", "shared", 10}}}}
	if got := m.Info(); !reflect.DeepEqual(got, want) {
		t.Fatalf("Info() = %+v, want %+v", got, want)
	}
	writer.Release()
	for _, ch := range []<-chan error{lateCh, laxCh} {
		mustRecv(t, ch, "reader after writer")
	}
	late.Release()
	lax.Release()
	assertIdle(t, m)
}

func TestNoWriterStarvationAtSetLevel(t *testing.T) {
	m := New()
	reader := mustHold(t, m, "reader", req(LevelInstance, Shared, "a"))

	all, allCh := queueWaiter(t, m, "all", "instance/*", 0, req(LevelInstance, Exclusive, All))

	// An unrelated name still waits: it would otherwise keep All out forever.
	late, lateCh := queueWaiter(t, m, "late", "instance/*", 0, req(LevelInstance, Shared, "b"))

	reader.Release()
	mustRecv(t, allCh, "All exclusive")
	assertPending(t, lateCh, "late reader under All exclusive")
	all.Release()
	mustRecv(t, lateCh, "late reader")
	late.Release()
	assertIdle(t, m)
}

func TestCancelReleasesAndWakesOthers(t *testing.T) {
	for _, cause := range []string{"cancel", "deadline"} {
		t.Run(cause, func(t *testing.T) {
			m := New()
			a := mustHold(t, m, "a", req(LevelInstance, Shared, "x"))

			// b takes the BGL and node_alloc, then waits for x.
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			want := context.Canceled
			if cause == "deadline" {
				// The deadline is far enough that b is queued first; the
				// test waits for the deadline, it never races it.
				ctx, cancel = context.WithTimeout(context.Background(), 200*time.Millisecond)
				defer cancel()
				want = context.DeadlineExceeded
			}
			b := m.NewOwner("b")
			bCh := acquireAsync(ctx, m, b, 0,
				req(LevelCluster, Shared, BGL), req(LevelNodeAlloc, Shared, NAL), req(LevelInstance, Exclusive, "x"))
			waitPending(t, m, "instance/x", "b")

			// c waits for x behind b; d waits for the BGL b holds.
			c, cCh := queueWaiter(t, m, "c", "instance/x", 0, req(LevelInstance, Shared, "x"))
			d, dCh := queueWaiter(t, m, "d", "cluster/BGL", 0, req(LevelCluster, Exclusive, BGL))

			if cause == "cancel" {
				cancel()
			}
			err := recvErr(t, bCh, "b")
			if !errors.Is(err, want) {
				t.Fatalf("b: Acquire = %v, want %v", err, want)
			}
			if got := b.Held(); len(got) != 0 {
				t.Fatalf("b still holds %+v", got)
			}
			for _, ch := range []<-chan error{cCh, dCh} {
				mustRecv(t, ch, "waiter after cancel")
			}
			for _, li := range m.Info() {
				if slices.Contains(li.Owners, "b") || slices.ContainsFunc(li.Pending, func(p PendingInfo) bool { return p.Owner == "b" }) {
					t.Fatalf("b still appears in %+v", li)
				}
			}
			// b's owner is reusable after a cancelled call.
			a.Release()
			c.Release()
			d.Release()
			mustAcquire(t, m, b, 0, req(LevelInstance, Exclusive, "x"))
			b.Release()
			assertIdle(t, m)
		})
	}
}

func TestConcurrentAcquireOnOneOwner(t *testing.T) {
	m := New()
	a := mustHold(t, m, "a", req(LevelInstance, Exclusive, "x"))
	b := m.NewOwner("b")
	ctx, cancel := context.WithCancel(context.Background())
	bCh := acquireAsync(ctx, m, b, 0, req(LevelInstance, Exclusive, "x"))
	waitPending(t, m, "instance/x", "b")
	if err := m.Acquire(context.Background(), b, 0, req(LevelNode, Shared, "n")); !errors.Is(err, ErrBusy) {
		t.Fatalf("second concurrent Acquire = %v, want ErrBusy", err)
	}
	cancel()
	if err := recvErr(t, bCh, "b"); !errors.Is(err, context.Canceled) {
		t.Fatalf("b: %v", err)
	}
	a.Release()
	assertIdle(t, m)
}

func TestDowngrade(t *testing.T) {
	m := New()
	a := mustHold(t, m, "a", req(LevelInstance, Exclusive, "x", "y"))

	b, bCh := queueWaiter(t, m, "b", "instance/x", 0, req(LevelInstance, Shared, "x"))
	// All shared conflicts with a's exclusive names until they are all shared.
	if err := m.Acquire(doneCtx(), m.NewOwner("probe"), 0, req(LevelInstance, Shared, All)); err == nil {
		t.Fatal("All shared granted beside exclusive names")
	}

	a.Downgrade(LevelInstance, "x", "not-held")
	mustRecv(t, bCh, "b after downgrade")
	if !a.Owns(LevelInstance, "y", Exclusive) || a.Owns(LevelInstance, "x", Exclusive) || !a.Owns(LevelInstance, "x", Shared) {
		t.Fatalf("after downgrading x: %+v", a.Held())
	}
	if err := m.Acquire(doneCtx(), m.NewOwner("probe"), 0, req(LevelInstance, Shared, All)); err == nil {
		t.Fatal("All shared granted beside exclusive y")
	}
	a.Downgrade(LevelInstance)
	probe := m.NewOwner("probe")
	if err := m.Acquire(doneCtx(), probe, 0, req(LevelInstance, Shared, All)); err != nil {
		t.Fatalf("All shared after full downgrade: %v", err)
	}
	if got, want := a.Held(), []Request{req(LevelInstance, Shared, "x", "y")}; !reflect.DeepEqual(got, want) {
		t.Fatalf("Held() = %+v, want %+v", got, want)
	}
	probe.Release()
	a.Release()
	b.Release()

	// All exclusive downgrades as a whole.
	mustAcquire(t, m, a, 0, req(LevelInstance, Exclusive, All))
	a.Downgrade(LevelInstance, "x") // a part of All cannot be downgraded
	if err := m.Acquire(doneCtx(), b, 0, req(LevelInstance, Shared, "x")); err == nil {
		t.Fatal("shared name granted under All exclusive")
	}
	a.Downgrade(LevelInstance)
	if err := m.Acquire(doneCtx(), b, 0, req(LevelInstance, Shared, "x")); err != nil {
		t.Fatalf("shared name under All shared: %v", err)
	}
	a.Release()
	b.Release()
	assertIdle(t, m)
}

func TestHeldRoundTrip(t *testing.T) {
	m := New()
	a := m.NewOwner("job 7/op 1")
	reqs := []Request{
		req(LevelCluster, Shared, BGL),
		req(LevelInstance, Exclusive, "web1"),
		req(LevelInstance, Shared, "db", "web1", "cache"),
		req(LevelNodeGroup, Shared, All),
		req(LevelNode, Exclusive, "n2", "n1"),
		req(LevelNodeRes, Exclusive, All),
	}
	mustAcquire(t, m, a, 0, reqs...)
	want := []Request{
		req(LevelCluster, Shared, BGL),
		req(LevelInstance, Shared, "cache", "db"),
		req(LevelInstance, Exclusive, "web1"),
		req(LevelNodeGroup, Shared, All),
		req(LevelNode, Exclusive, "n1", "n2"),
		req(LevelNodeRes, Exclusive, All),
	}
	got := a.Held()
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Held() = %+v\nwant %+v", got, want)
	}
	if got := a.Owned(LevelInstance); !slices.Equal(got, []string{"cache", "db", "web1"}) {
		t.Errorf("Owned(instance) = %v", got)
	}
	if got := a.Owned(LevelNodeRes); !slices.Equal(got, []string{All}) {
		t.Errorf("Owned(node_res) = %v", got)
	}
	if got := a.Owned(LevelNetwork); got != nil {
		t.Errorf("Owned(network) = %v", got)
	}
	for _, c := range []struct {
		level Level
		name  string
		mode  Mode
		want  bool
	}{
		{LevelInstance, "web1", Exclusive, true},
		{LevelInstance, "db", Exclusive, false},
		{LevelInstance, "db", Shared, true},
		{LevelInstance, "other", Shared, false},
		{LevelNodeGroup, "any", Shared, true},
		{LevelNodeGroup, "any", Exclusive, false},
		{LevelNodeRes, "n9", Exclusive, true},
		{LevelNetwork, "net", Shared, false},
	} {
		if got := a.Owns(c.level, c.name, c.mode); got != c.want {
			t.Errorf("Owns(%s, %s, %s) = %v", c.level, c.name, c.mode, got)
		}
	}
	a.Release()

	// What a job recorded is enough to take the same locks again.
	b := mustHold(t, m, "job 7/op 1 (restored)", got...)
	if again := b.Held(); !reflect.DeepEqual(again, want) {
		t.Fatalf("restored Held() = %+v", again)
	}
	b.Release(LevelNodeRes, LevelNode)
	if again := b.Held(); !reflect.DeepEqual(again, want[:4]) {
		t.Fatalf("after partial release Held() = %+v", again)
	}
	b.Release()
	if again := b.Held(); len(again) != 0 {
		t.Fatalf("after Release Held() = %+v", again)
	}
	assertIdle(t, m)
}

func TestPartialReleaseLetsOthersIn(t *testing.T) {
	m := New()
	a := mustHold(t, m, "a", req(LevelInstance, Exclusive, "i"), req(LevelNode, Exclusive, "n"))
	b, bCh := queueWaiter(t, m, "b", "node/n", 0, req(LevelNode, Exclusive, "n"))
	a.Release(LevelNode)
	mustRecv(t, bCh, "b")
	if err := m.Acquire(doneCtx(), m.NewOwner("c"), 0, req(LevelInstance, Shared, "i")); err == nil {
		t.Fatal("instance lock released together with node")
	}
	a.Release()
	b.Release()
	assertIdle(t, m)
}

func TestInfo(t *testing.T) {
	m := New()
	j1 := mustHold(t, m, "job 1/op 0", req(LevelCluster, Shared, BGL), req(LevelInstance, Exclusive, "web1"), req(LevelNode, Shared, "n1"))
	j2 := mustHold(t, m, "job 2/op 0", req(LevelCluster, Shared, BGL), req(LevelNode, Shared, "n1"))
	j3, j3Ch := queueWaiter(t, m, "job 3/op 0", "instance/web1", 5, req(LevelInstance, Shared, "web1"))
	j4, j4Ch := queueWaiter(t, m, "job 4/op 0", "node/*", -3, req(LevelNode, Exclusive, All))

	want := []LockInfo{
		{Name: "cluster/BGL", Mode: "shared", Owners: []string{"job 1/op 0", "job 2/op 0"}},
		{Name: "instance/web1", Mode: "exclusive", Owners: []string{"job 1/op 0"},
			Pending: []PendingInfo{{Owner: "job 3/op 0", Mode: "shared", Priority: 5}}},
		{Name: "node/*", Mode: "shared", Owners: []string{"job 1/op 0", "job 2/op 0"},
			Pending: []PendingInfo{{Owner: "job 4/op 0", Mode: "exclusive", Priority: -3}}},
		{Name: "node/n1", Mode: "shared", Owners: []string{"job 1/op 0", "job 2/op 0"}},
	}
	if got := m.Info(); !reflect.DeepEqual(got, want) {
		t.Fatalf("Info() =\n%+v\nwant\n%+v", got, want)
	}

	j1.Release()
	mustRecv(t, j3Ch, "job 3")
	j2.Release()
	mustRecv(t, j4Ch, "job 4")
	want = []LockInfo{
		{Name: "instance/web1", Mode: "shared", Owners: []string{"job 3/op 0"}},
		{Name: "node/*", Mode: "exclusive", Owners: []string{"job 4/op 0"}},
	}
	if got := m.Info(); !reflect.DeepEqual(got, want) {
		t.Fatalf("Info() =\n%+v\nwant\n%+v", got, want)
	}
	j3.Release()
	j4.Release()
	assertIdle(t, m)
}

func TestReleaseAbortsWaitingAcquire(t *testing.T) {
	m := New()
	a := mustHold(t, m, "a", req(LevelNode, Exclusive, "n"))
	b, bCh := queueWaiter(t, m, "b", "node/n", 0, req(LevelInstance, Exclusive, "i"), req(LevelNode, Shared, "n"))
	c, cCh := queueWaiter(t, m, "c", "instance/i", 0, req(LevelInstance, Shared, "i"))

	b.Release(LevelNode)
	err := recvErr(t, bCh, "b")
	if !errors.Is(err, ErrReleased) {
		t.Fatalf("b: Acquire = %v, want ErrReleased", err)
	}
	if !strings.Contains(err.Error(), "node/n") {
		t.Errorf("error %q does not name the lock waited for", err)
	}
	if got := b.Held(); len(got) != 0 {
		t.Fatalf("b still holds %+v", got)
	}
	mustRecv(t, cCh, "c")
	a.Release()
	c.Release()
	assertIdle(t, m)
}

func TestCancelErrorNamesLock(t *testing.T) {
	m := New()
	a := mustHold(t, m, "a", req(LevelInstance, Exclusive, "web1"))
	// b takes instance/aaa, then gives it back when web1 would need a wait.
	err := m.Acquire(doneCtx(), m.NewOwner("b"), 0, req(LevelInstance, Shared, "aaa", "web1"), req(LevelNode, Shared, "n1"))
	if err == nil || !strings.Contains(err.Error(), "instance/web1 shared") || !strings.Contains(err.Error(), "b waiting") {
		t.Fatalf("error %v does not say who waited for what", err)
	}
	a.Release()
	assertIdle(t, m)
}
