package locking

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
)

func BenchmarkAcquireReleaseUncontended(b *testing.B) {
	m := New()
	h := m.NewOwner("bench")
	reqs := []Request{
		req(LevelCluster, Shared, BGL),
		req(LevelInstance, Exclusive, "web1"),
		req(LevelNode, Shared, "n1", "n2"),
	}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if err := m.Acquire(ctx, h, 0, reqs...); err != nil {
			b.Fatal(err)
		}
		h.Release()
	}
}

func BenchmarkAcquireReleaseSharedContended8(b *testing.B) {
	const workers = 8
	m := New()
	reqs := []Request{
		req(LevelCluster, Shared, BGL),
		req(LevelInstance, Shared, "web1"),
		req(LevelNode, Shared, "n1"),
	}
	ctx := context.Background()
	var left atomic.Int64
	left.Store(int64(b.N))
	b.ReportAllocs()
	b.ResetTimer()
	var wg sync.WaitGroup
	for i := range workers {
		h := m.NewOwner(fmt.Sprintf("bench %d", i))
		wg.Add(1)
		go func() {
			defer wg.Done()
			for left.Add(-1) >= 0 {
				if err := m.Acquire(ctx, h, 0, reqs...); err != nil {
					b.Error(err)
					return
				}
				h.Release()
			}
		}()
	}
	wg.Wait()
}
