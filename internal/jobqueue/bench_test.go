package jobqueue

import (
	"context"
	"encoding/json"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/corral/corral/internal/store/boltstore"
)

func benchQueue(b *testing.B, durable bool, runner *fakeRunner) *Queue {
	b.Helper()
	st, err := boltstore.Open(filepath.Join(b.TempDir(), "bench.db"), boltstore.Options{NoSync: !durable})
	if err != nil {
		b.Fatal(err)
	}
	q, err := New(Options{Store: st, Runner: runner, QueueSize: func() int { return 1 << 30 }})
	if err != nil {
		b.Fatal(err)
	}
	if err := q.Start(context.Background()); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		q.Stop()
		_ = st.Close()
	})
	return q
}

// BenchmarkSubmitAndRunNoop submits single-op jobs from parallel clients on
// a durable (fsynced) store and waits until every job has finished. Each
// job costs four durable writes: submit, waiting, running, success.
func BenchmarkSubmitAndRunNoop(b *testing.B) {
	q := benchQueue(b, true, newRunner())
	ops := []json.RawMessage{json.RawMessage(`{"OP_ID":"OP_NOOP"}`)}
	var mu sync.Mutex
	ids := make([]int64, 0, b.N)
	b.SetParallelism(4)
	b.ResetTimer()
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		ctx := context.Background()
		var mine []int64
		for pb.Next() {
			id, err := q.Submit(ctx, ops)
			if err != nil {
				b.Error(err)
				return
			}
			mine = append(mine, id)
		}
		mu.Lock()
		ids = append(ids, mine...)
		mu.Unlock()
	})
	submitted := time.Since(start)
	ctx := context.Background()
	for _, id := range ids {
		var prev []any
		for {
			info, _, _, err := q.WaitForChange(ctx, id, []string{"status"}, prev, 1<<62, time.Minute)
			if err != nil {
				b.Fatal(err)
			}
			if Status(info[0].(string)).Finalized() {
				if info[0] != string(StatusSuccess) {
					b.Fatalf("job %d: %v", id, info[0])
				}
				break
			}
			prev = info
		}
	}
	elapsed := time.Since(start)
	b.StopTimer()
	b.ReportMetric(float64(len(ids))/elapsed.Seconds(), "jobs/s")
	b.ReportMetric(float64(len(ids))/submitted.Seconds(), "submits/s")
}

// BenchmarkWaitForChangeFanout measures delivering each new log entry of a
// job to many WaitForChange callers.
func BenchmarkWaitForChangeFanout(b *testing.B) {
	const waiters = 100
	runner := newRunner()
	gate := make(chan struct{})
	n := b.N
	runner.on("OP_CHATTY", func(ctx context.Context, h *OpHandle) (any, error) {
		if err := h.SetRunning(ctx); err != nil {
			return nil, err
		}
		<-gate
		for i := range n {
			if err := h.Log(ctx, "message", i); err != nil {
				return nil, err
			}
		}
		return nil, nil
	})
	q := benchQueue(b, false, runner)
	id, err := q.Submit(context.Background(), []json.RawMessage{json.RawMessage(`{"OP_ID":"OP_CHATTY"}`)})
	if err != nil {
		b.Fatal(err)
	}
	var wg sync.WaitGroup
	ready := make(chan struct{}, waiters)
	for range waiters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx := context.Background()
			seen := int64(0)
			var prev []any
			ready <- struct{}{}
			for seen < int64(n) {
				info, logs, _, err := q.WaitForChange(ctx, id, []string{"status"}, prev, seen, time.Minute)
				if err != nil {
					b.Error(err)
					return
				}
				for _, e := range logs {
					seen = max(seen, e[0].(int64))
				}
				prev = info
			}
		}()
	}
	for range waiters {
		<-ready
	}
	b.ResetTimer()
	close(gate)
	wg.Wait()
	b.StopTimer()
	b.ReportMetric(float64(n*waiters)/b.Elapsed().Seconds(), "deliveries/s")
}
