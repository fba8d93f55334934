package locking

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// occupancy counts, per lock, the owners that think they hold it. Owners
// count themselves in after Acquire returns and out before Release, so the
// counts never exceed the real holders: any conflict they show is real.
type occupancy struct {
	levels [numLevels]struct {
		allS, allX     atomic.Int32
		namedS, namedX atomic.Int32
		names          map[string]*[2]atomic.Int32 // [shared, exclusive]
	}
}

var stressNames = [numLevels][]string{
	LevelCluster:   {BGL},
	LevelNodeAlloc: {NAL},
	LevelInstance:  {"i0", "i1", "i2", "i3", "i4"},
	LevelNodeGroup: {"g0", "g1"},
	LevelNetwork:   {"net0", "net1"},
	LevelNode:      {"n0", "n1", "n2", "n3"},
	LevelNodeRes:   {"n0", "n1", "n2", "n3"},
	LevelMachine:   {"m0", "m1"},
	LevelCOE:       {"k0", "k1"},
}

func newOccupancy() *occupancy {
	o := &occupancy{}
	for lv, names := range stressNames {
		o.levels[lv].names = make(map[string]*[2]atomic.Int32)
		for _, n := range names {
			o.levels[lv].names[n] = new([2]atomic.Int32)
		}
	}
	return o
}

func (o *occupancy) enter(held []Request, delta int32) {
	for _, r := range held {
		lv := &o.levels[r.Level]
		if r.Names[0] == All {
			if r.Mode == Exclusive {
				lv.allX.Add(delta)
			} else {
				lv.allS.Add(delta)
			}
			continue
		}
		for _, n := range r.Names {
			lv.names[n][r.Mode].Add(delta)
			if r.Mode == Exclusive {
				lv.namedX.Add(delta)
			} else {
				lv.namedS.Add(delta)
			}
		}
	}
}

// check returns a description of a conflict with what held (already counted
// in) claims, or "".
func (o *occupancy) check(held []Request) string {
	for _, r := range held {
		lv := &o.levels[r.Level]
		allS, allX, namedS, namedX := lv.allS.Load(), lv.allX.Load(), lv.namedS.Load(), lv.namedX.Load()
		if r.Names[0] == All {
			if r.Mode == Exclusive && (allX != 1 || allS != 0 || namedS != 0 || namedX != 0) {
				return fmt.Sprintf("%s/* exclusive beside allX=%d allS=%d named=%d/%d", r.Level, allX, allS, namedS, namedX)
			}
			if r.Mode == Shared && (allX != 0 || namedX != 0) {
				return fmt.Sprintf("%s/* shared beside allX=%d namedX=%d", r.Level, allX, namedX)
			}
			continue
		}
		for _, n := range r.Names {
			s, x := lv.names[n][Shared].Load(), lv.names[n][Exclusive].Load()
			if allX != 0 || (r.Mode == Exclusive && (x != 1 || s != 0 || allS != 0)) || (r.Mode == Shared && x != 0) {
				return fmt.Sprintf("%s/%s %s beside s=%d x=%d allS=%d allX=%d", r.Level, n, r.Mode, s, x, allS, allX)
			}
		}
	}
	return ""
}

// randomRequests picks a random lock set: some levels, each either All or a
// few names, with mixed modes. Exclusive cluster-wide locks are rare so the
// run exercises concurrency rather than a queue.
func randomRequests(rng *rand.Rand) []Request {
	var reqs []Request
	mode := func(exclusivePercent int) Mode {
		if rng.IntN(100) < exclusivePercent {
			return Exclusive
		}
		return Shared
	}
	for lv, names := range stressNames {
		if rng.IntN(3) != 0 {
			continue
		}
		level := Level(lv)
		switch {
		case len(names) == 1:
			reqs = append(reqs, Request{Level: level, Names: names, Mode: mode(5)})
		case rng.IntN(8) == 0:
			reqs = append(reqs, Request{Level: level, Names: []string{All}, Mode: mode(20)})
		default:
			for range 1 + rng.IntN(2) {
				picked := []string{names[rng.IntN(len(names))], names[rng.IntN(len(names))]}
				reqs = append(reqs, Request{Level: level, Names: picked, Mode: mode(40)})
			}
		}
	}
	return reqs
}

// splitByLevel cuts reqs (in level order) into 1..3 consecutive chunks that
// never share a level, as a job taking its locks over several steps would.
func splitByLevel(rng *rand.Rand, reqs []Request) [][]Request {
	var chunks [][]Request
	for i := 0; i < len(reqs); {
		j := i + 1
		for j < len(reqs) && (reqs[j].Level == reqs[j-1].Level || rng.IntN(2) == 0) {
			j++
		}
		chunks = append(chunks, reqs[i:j])
		i = j
	}
	return chunks
}

func TestStressNoDeadlockNoOverlap(t *testing.T) {
	owners, iterations := 200, 20
	if testing.Short() {
		owners = 50
	}
	seed := rand.Uint64()
	m := New()
	occ := newOccupancy()
	// Only a deadlock (or a lost wake-up) can make a blocking Acquire outlive
	// this bound; reaching it fails the test with the wait graph.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	var granted, tries atomic.Int64
	var wg sync.WaitGroup
	for i := range owners {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(seed, uint64(i)))
			h := m.NewOwner(fmt.Sprintf("owner %d", i))
			for range iterations {
				prio := 0
				if rng.IntN(4) == 0 {
					prio = rng.IntN(PriorityLowest-PriorityHighest+1) + PriorityHighest
				}
				for _, chunk := range splitByLevel(rng, randomRequests(rng)) {
					actx := ctx
					try := rng.IntN(10) == 0
					if try {
						actx = doneCtx()
					}
					err := m.Acquire(actx, h, prio, chunk...)
					if try && errors.Is(err, context.Canceled) {
						tries.Add(1)
						break
					}
					if err != nil {
						t.Errorf("seed %d: %s: %v; locks: %+v", seed, h.Owner(), err, m.Info())
						cancel()
						h.Release()
						return
					}
					granted.Add(1)
				}
				held := h.Held()
				occ.enter(held, 1)
				if msg := occ.check(held); msg != "" {
					t.Errorf("seed %d: %s: exclusivity violated: %s", seed, h.Owner(), msg)
				}
				runtime.Gosched()
				occ.enter(held, -1)
				h.Release()
			}
		}()
	}
	wg.Wait()
	if granted.Load() == 0 {
		t.Fatal("no Acquire ever succeeded")
	}
	t.Logf("seed %d: %d grants, %d failed tries", seed, granted.Load(), tries.Load())
	assertIdle(t, m)
}

func TestOccupancyDetectsConflicts(t *testing.T) {
	// The stress test is only as good as its checker: make sure it fires.
	tests := []struct {
		name  string
		a, b  []Request
		clash bool
	}{
		{"exclusive names", []Request{req(LevelNode, Exclusive, "n0")}, []Request{req(LevelNode, Exclusive, "n0")}, true},
		{"shared names", []Request{req(LevelNode, Shared, "n0")}, []Request{req(LevelNode, Shared, "n0")}, false},
		{"All shared vs exclusive name", []Request{req(LevelNode, Shared, All)}, []Request{req(LevelNode, Exclusive, "n1")}, true},
		{"All exclusive vs shared name", []Request{req(LevelNode, Exclusive, All)}, []Request{req(LevelNode, Shared, "n1")}, true},
		{"All shared twice", []Request{req(LevelNode, Shared, All)}, []Request{req(LevelNode, Shared, All)}, false},
		{"other names", []Request{req(LevelNode, Exclusive, "n0")}, []Request{req(LevelNode, Exclusive, "n1")}, false},
	}
	for _, tt := range tests {
		o := newOccupancy()
		o.enter(tt.a, 1)
		o.enter(tt.b, 1)
		if got := o.check(tt.b) != "" || o.check(tt.a) != ""; got != tt.clash {
			t.Errorf("%s: conflict detected = %v, want %v", tt.name, got, tt.clash)
		}
	}
}
