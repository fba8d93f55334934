package boltstore

import (
	"context"
	"fmt"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/corral/corral/internal/store"
)

// BenchmarkTxnPutParallel measures durable (fsynced) transactions shaped
// like a job submission: a compare that the job is new, the job and its
// queue index entry. Concurrent callers share commits.
func BenchmarkTxnPutParallel(b *testing.B) {
	s := openB(b, Options{})
	ctx := context.Background()
	value := make([]byte, 512)
	var n atomic.Int64
	b.SetParallelism(16) // many submitters per core, as with RAPI/LUXI clients
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
	if c := s.commits.Load(); c > 0 {
		b.ReportMetric(float64(s.batched.Load())/float64(c), "txns/commit")
	}
}

func BenchmarkGet(b *testing.B) {
	s := openB(b, Options{NoSync: true})
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

func BenchmarkRange1000(b *testing.B) {
	s := openB(b, Options{NoSync: true})
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

func openB(b *testing.B, opts Options) *Store {
	b.Helper()
	s, err := Open(filepath.Join(b.TempDir(), "corral.db"), opts)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	return s
}

// fill writes n keys of 256 bytes, store.MaxOpsPerTxn per transaction.
func fill(b *testing.B, s *Store, n int) {
	b.Helper()
	value := make([]byte, 256)
	var ops []store.Op
	for i := range n {
		ops = append(ops, store.Put(fmt.Sprintf("k/%06d", i), value))
		if len(ops) == store.MaxOpsPerTxn || i == n-1 {
			if _, err := s.Txn(context.Background(), nil, ops, nil); err != nil {
				b.Fatal(err)
			}
			ops = ops[:0]
		}
	}
}
