package storetest

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/corral/corral/internal/store"
)

// The benchmarks every backend runs from its own tests, so their figures
// compare directly.

// BenchTxnPutParallel measures durable transactions shaped like a job
// submission: a compare that the job is new, the job and its queue index
// entry, from 16 submitters per core (as with many LUXI and RAPI clients).
func BenchTxnPutParallel(b *testing.B, s store.Store) {
	ctx := context.Background()
	value := make([]byte, 512)
	var n atomic.Int64
	b.SetParallelism(16)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			i := n.Add(1)
			job := fmt.Sprintf("jobs/%012d", i)
			_, err := s.Txn(ctx, []store.Cmp{store.Missing(job)},
				[]store.Op{store.Put(job, value), store.Put(fmt.Sprintf("queue/%012d", i), nil)}, nil)
			if err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.StopTimer()
}

// BenchGet measures reads of one key among 1,000.
func BenchGet(b *testing.B, s store.Store) {
	ctx := context.Background()
	fill(b, s, 1000)
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		kv, err := s.Get(ctx, fmt.Sprintf("k/%06d", i%1000))
		if err != nil || kv == nil {
			b.Fatalf("Get: %v, %v", kv, err)
		}
	}
}

// BenchRange1000 measures a range over 1,000 keys.
func BenchRange1000(b *testing.B, s store.Store) {
	ctx := context.Background()
	fill(b, s, 1000)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		kvs, _, err := s.Range(ctx, "k/", store.RangeOptions{})
		if err != nil || len(kvs) != 1000 {
			b.Fatalf("Range: %d keys, %v", len(kvs), err)
		}
	}
}

// fill writes n keys of 256 bytes in transactions within the limits.
func fill(b *testing.B, s store.Store, n int) {
	b.Helper()
	value := make([]byte, 256)
	var ops []store.Op
	for i := range n {
		ops = append(ops, store.Put(fmt.Sprintf("k/%06d", i), value))
		if len(ops) == store.MaxOpsPerTxn-store.GuardReserve || i == n-1 {
			if _, err := s.Txn(context.Background(), nil, ops, nil); err != nil {
				b.Fatal(err)
			}
			ops = ops[:0]
		}
	}
}
