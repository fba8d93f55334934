package luxi

import (
	"bufio"
	"context"
	"encoding/json"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

func BenchmarkRoundTrip(b *testing.B) {
	s := startServer(b, echo, ServerOptions{})
	c := dial(b, s.Addr())
	ctx := context.Background()
	for b.Loop() {
		if err := c.Call(ctx, "QueryConfigValues", []any{[]string{"cluster_name"}}, nil); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRoundTripParallel measures throughput with one connection per
// calling goroutine, as with many CLI and RAPI clients at once.
func BenchmarkRoundTripParallel(b *testing.B) {
	s := startServer(b, echo, ServerOptions{})
	ctx := context.Background()
	b.RunParallel(func(pb *testing.PB) {
		c, err := Dial(ctx, s.Addr())
		if err != nil {
			b.Error(err)
			return
		}
		defer c.Close()
		for pb.Next() {
			if err := c.Call(ctx, "QueryConfigValues", []any{[]string{"cluster_name"}}, nil); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// BenchmarkCallWithIdleConns opens many idle connections, reports what each
// costs (Go heap plus stacks, and process RSS; both include the client
// socket, which lives in the same process) and measures a call meanwhile.
func BenchmarkCallWithIdleConns(b *testing.B) {
	const n = 5000 // two descriptors each, in one process
	s := startServer(b, echo, ServerOptions{})
	c := dial(b, s.Addr())
	ctx := context.Background()
	if err := c.Call(ctx, "warm", nil, nil); err != nil {
		b.Fatal(err)
	}
	goBefore, rssBefore := heapAndStacks(), rss(b)
	br := bufio.NewReader(nil)
	for range n {
		nc, err := net.Dial("unix", s.Addr())
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { nc.Close() })
		if err := WriteFrame(nc, []byte(`{"method":"hello","args":[]}`)); err != nil {
			b.Fatal(err)
		}
		br.Reset(nc)
		if _, err := ReadFrame(br, 1<<20); err != nil {
			b.Fatal(err)
		}
	}
	goAfter, rssAfter := heapAndStacks(), rss(b)
	for b.Loop() {
		if err := c.Call(ctx, "QueryConfigValues", []any{[]string{"cluster_name"}}, nil); err != nil {
			b.Fatal(err)
		}
	}
	// Reported after the loop: b.Loop's timer reset would drop them.
	b.ReportMetric(float64(int64(goAfter)-int64(goBefore))/n, "go-B/idleconn")
	b.ReportMetric(float64(rssAfter-rssBefore)/n, "rss-B/idleconn")
}

// rss reads the process's resident set size.
func rss(b *testing.B) int64 {
	b.Helper()
	data, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		b.Skip("no /proc/self/statm")
	}
	f := strings.Fields(string(data))
	pages, err := strconv.ParseInt(f[1], 10, 64)
	if err != nil {
		b.Fatal(err)
	}
	return pages * int64(os.Getpagesize())
}

// BenchmarkFanout has many connections wait in a call for the same event
// and each receive an answer shaped like WaitForJobChange's, as
// subscribers following one job's log do: one op is one event delivered to
// every connection. cpu-µs/delivery is the process's CPU time (server and
// clients) per delivered answer, which unlike wall time is little
// disturbed by other load on the machine.
func BenchmarkFanout(b *testing.B) {
	const conns = 100
	ev := &event{ch: make(chan struct{})}
	h := HandlerFunc(func(ctx context.Context, method string, args []json.RawMessage) (any, error) {
		var seen int64
		if err := DecodeArgs(method, args, &seen); err != nil {
			return nil, err
		}
		serial, err := ev.wait(ctx, seen)
		if err != nil {
			return nil, err
		}
		return []any{[]any{"running"}, [][]any{{serial, []int64{1700000000, 123456}, "message", json.RawMessage(`"step done"`)}}}, nil
	})
	s := startServer(b, h, ServerOptions{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	got := make(chan error, conns)
	for range conns {
		c := dial(b, s.Addr())
		go func() {
			var seen int64
			for {
				var res []json.RawMessage
				if err := c.Call(ctx, "Wait", []any{seen}, &res); err != nil {
					got <- err
					return
				}
				seen++
				got <- nil
			}
		}()
	}
	// Let every connection reach its wait before the first event.
	waitFor(b, "all waiting", func() bool { return ev.waiters.Load() == conns })
	cpu0 := processCPU(b)
	for b.Loop() {
		ev.fire()
		for range conns {
			if err := <-got; err != nil {
				b.Fatal(err)
			}
		}
	}
	cpu := processCPU(b) - cpu0
	b.ReportMetric(float64(cpu.Microseconds())/float64(b.N*conns), "cpu-µs/delivery")
}

// event is a broadcast: each fire wakes every waiter with a new serial.
type event struct {
	mu      sync.Mutex
	serial  int64
	ch      chan struct{}
	waiters atomic.Int64
}

func (e *event) wait(ctx context.Context, seen int64) (int64, error) {
	for {
		e.mu.Lock()
		serial, ch := e.serial, e.ch
		e.mu.Unlock()
		if serial > seen {
			return serial, nil
		}
		e.waiters.Add(1)
		select {
		case <-ch:
			e.waiters.Add(-1)
		case <-ctx.Done():
			e.waiters.Add(-1)
			return 0, ctx.Err()
		}
	}
}

func (e *event) fire() {
	e.mu.Lock()
	e.serial++
	close(e.ch)
	e.ch = make(chan struct{})
	e.mu.Unlock()
}

// processCPU is the user and system time the process has used.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
