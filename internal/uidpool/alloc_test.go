package uidpool

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/corral/corral/internal/ecode"
)

func newAlloc(t *testing.T, alive map[string]bool, procs map[uint32]bool) *Allocator {
	t.Helper()
	var mu sync.Mutex
	return &Allocator{
		Dir: filepath.Join(t.TempDir(), "uidpool"),
		Alive: func(o string) bool {
			if alive == nil {
				return true
			}
			mu.Lock()
			defer mu.Unlock()
			return alive[o]
		},
		ProcUIDs: func() (map[uint32]bool, error) { return procs, nil },
	}
}

func TestAcquireDistinctAndIdempotent(t *testing.T) {
	a := newAlloc(t, nil, nil)
	pool, _ := Parse("2000-2001")
	u1, err := a.Acquire(pool, "inst-a")
	if err != nil {
		t.Fatal(err)
	}
	u2, err := a.Acquire(pool, "inst-b")
	if err != nil {
		t.Fatal(err)
	}
	if u1 == u2 {
		t.Fatalf("two instances share uid %d", u1)
	}
	again, err := a.Acquire(pool, "inst-a")
	if err != nil || again != u1 {
		t.Fatalf("second Acquire by the same owner = %d, %v; want %d", again, err, u1)
	}
	if got, ok, _ := a.Lookup("inst-b"); !ok || got != u2 {
		t.Errorf("Lookup(inst-b) = %d, %v", got, ok)
	}
	_, err = a.Acquire(pool, "inst-c")
	if ecode.ClassOf(err) != ecode.NoRes || err == nil ||
		!strings.Contains(err.Error(), "no free uid in the pool 2000-2001: 2 instances use them") {
		t.Fatalf("exhausted pool: %v", err)
	}
	// Release at stop (or after a failed start) makes the uid usable again.
	if err := a.Release("inst-a"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(a.Dir, fmt.Sprint(u1))); !os.IsNotExist(err) {
		t.Errorf("lock file of released uid still there: %v", err)
	}
	u3, err := a.Acquire(pool, "inst-c")
	if err != nil || u3 != u1 {
		t.Fatalf("Acquire after release = %d, %v; want %d", u3, err, u1)
	}
	if err := a.Release("nobody"); err != nil {
		t.Errorf("release of nothing: %v", err)
	}
}

func TestAcquireConcurrentNeverShares(t *testing.T) {
	a := newAlloc(t, nil, nil)
	pool, _ := Parse("100-107")
	var wg sync.WaitGroup
	uids := make([]uint32, 8)
	errs := make([]error, 8)
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// A separate Allocator per goroutine, as separate processes would.
			b := &Allocator{Dir: a.Dir, ProcUIDs: a.ProcUIDs}
			uids[i], errs[i] = b.Acquire(pool, fmt.Sprintf("inst-%d", i))
		}()
	}
	wg.Wait()
	seen := map[uint32]int{}
	for i, u := range uids {
		if errs[i] != nil {
			t.Fatalf("owner %d: %v", i, errs[i])
		}
		if j, dup := seen[u]; dup {
			t.Fatalf("owners %d and %d share uid %d", i, j, u)
		}
		seen[u] = i
	}
}

func TestAcquireSkipsBusyAndReclaimsStale(t *testing.T) {
	alive := map[string]bool{"gone": false}
	a := newAlloc(t, alive, map[uint32]bool{3000: true})
	pool, _ := Parse("3000-3001")
	u, err := a.Acquire(pool, "gone")
	if err != nil || u != 3001 {
		t.Fatalf("Acquire = %d, %v; want 3001 (3000 runs a process)", u, err)
	}
	// "gone" no longer runs: its uid is stale and goes to the next owner.
	u, err = a.Acquire(pool, "next")
	if err != nil || u != 3001 {
		t.Fatalf("Acquire of a stale uid = %d, %v", u, err)
	}
	if _, ok, _ := a.Lookup("gone"); ok {
		t.Errorf("stale owner still holds a uid")
	}
	if _, err := a.Acquire(nil, "x"); err == nil {
		t.Errorf("Acquire from an empty pool succeeded")
	}
	if _, err := a.Acquire(pool, "../x"); err == nil {
		t.Errorf("Acquire with a bad owner succeeded")
	}
}

func TestStatusUID(t *testing.T) {
	uid, ok := statusUID([]byte("Name:\tqemu\nUid:\t2000\t2000\t2000\t2000\nGid:\t1\n"))
	if !ok || uid != 2000 {
		t.Errorf("statusUID = %d, %v", uid, ok)
	}
	if _, ok := statusUID([]byte("Name: x\n")); ok {
		t.Errorf("statusUID without a Uid line")
	}
	procs, err := ProcessUIDs()
	if err != nil || !procs[uint32(os.Getuid())] {
		t.Errorf("ProcessUIDs misses our own uid: %v", err)
	}
}
