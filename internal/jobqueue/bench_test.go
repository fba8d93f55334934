package jobqueue

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/corral/corral/internal/opcodes"
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

// BenchmarkQueryJobsSummary answers `corral job list` (id, status, summary
// of every job) over 1,000 finished instance creations, against the same
// query for ids alone. The summary is the opcode table's, as corrald
// configures the queue.
func BenchmarkQueryJobsSummary(b *testing.B) {
	const jobs = 1000
	runner := newRunner()
	runner.on("OP_INSTANCE_CREATE", func(ctx context.Context, h *OpHandle) (any, error) {
		return nil, h.SetRunning(ctx)
	})
	st, err := boltstore.Open(filepath.Join(b.TempDir(), "bench.db"), boltstore.Options{NoSync: true})
	if err != nil {
		b.Fatal(err)
	}
	q, err := New(Options{Store: st, Runner: runner, QueueSize: func() int { return 1 << 30 }, Summary: opcodes.Default().Summary})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	if err := q.Start(ctx); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		q.Stop()
		_ = st.Close()
	})
	submissions := make([][]json.RawMessage, jobs)
	for i := range submissions {
		submissions[i] = []json.RawMessage{json.RawMessage(fmt.Sprintf(`{"OP_ID":"OP_INSTANCE_CREATE",`+
			`"instance_name":"inst%04d.example.com","mode":"create","disk_template":"plain",`+
			`"disks":[{"size":10240},{"size":2048}],"nics":[{"link":"br0"}],"os_type":"debootstrap+default",`+
			`"pnode":"node%d.example.com","beparams":{"memory":2048,"vcpus":2},"hvparams":{"kernel_path":""},`+
			`"start":true,"ip_check":false,"name_check":false,"priority":0,`+
			`"reason":[["gnt:client:gnt-instance","add","1700000000000000000"]]}`, i, i%4))}
	}
	res, err := q.SubmitMany(ctx, submissions)
	if err != nil {
		b.Fatal(err)
	}
	for _, r := range res {
		if !r.OK {
			b.Fatal(r.Err)
		}
		for {
			info, _, _, err := q.WaitForChange(ctx, r.JobID, []string{"status"}, []any{"running"}, 1<<62, time.Minute)
			if err != nil {
				b.Fatal(err)
			}
			if Status(info[0].(string)).Finalized() {
				break
			}
		}
	}
	for _, fields := range [][]string{{"id"}, {"id", "status", "summary"}} {
		b.Run(strings.Join(fields, ","), func(b *testing.B) {
			for b.Loop() {
				rows, err := q.Query(ctx, nil, fields)
				if err != nil {
					b.Fatal(err)
				}
				if len(rows) != jobs {
					b.Fatalf("%d rows, want %d", len(rows), jobs)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/jobs, "ns/row")
		})
	}
}
