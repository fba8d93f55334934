package luxi

import (
	"bufio"
	"context"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
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
