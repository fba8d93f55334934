package luxi

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"math"
	"net"
	"strings"
	"testing"
	"time"
)

// The server's reply encoding must give the bytes encodeSuccess gives.
func TestReplyMatchesEncodeSuccess(t *testing.T) {
	values := []any{
		nil, "nochange", 42, int64(-7), 1.5, true,
		[]any{[]any{"running"}, [][]any{{int64(3), []int64{1700000000, 5}, "message", json.RawMessage(`"step <1> & \u2028"`)}}},
		map[string]any{"b": []string{"<x>"}, "a": map[string]int{"z": 1, "y": 2}},
		json.RawMessage(` { "spaced" : [ 1 , 2 ] } `),
		"\xff invalid UTF-8", []byte("bytes"),
	}
	rb := &replyBuf{}
	rb.enc = json.NewEncoder(&rb.b)
	for _, v := range values {
		want, err := encodeSuccess(v)
		if err != nil {
			t.Fatal(err)
		}
		if err := rb.success(v); err != nil {
			t.Fatalf("%#v: %v", v, err)
		}
		got := rb.b.Bytes()
		if !bytes.HasSuffix(got, []byte{ETX}) || !bytes.Equal(got[:len(got)-1], want) {
			t.Errorf("%#v:\n got %q\nwant %q + ETX", v, got, want)
		}
	}
	for _, bad := range []any{math.NaN(), func() {}, json.RawMessage(`{`)} {
		if err := rb.success(bad); err == nil {
			t.Errorf("%#v encoded without error: %q", bad, rb.b.Bytes())
		}
	}
	// The buffer stays usable after a failure.
	if err := rb.success("ok"); err != nil || rb.b.String() != `{"success":true,"result":"ok"}`+"\x03" {
		t.Errorf("after a failure: %q %v", rb.b.String(), err)
	}
}

// job is pool work for tests: drain signals, then waits for release.
type job struct {
	started chan struct{}
	release chan struct{}
}

func newJob() *job { return &job{started: make(chan struct{}), release: make(chan struct{})} }

func (j *job) drain() {
	close(j.started)
	<-j.release
}

func TestWorkerPoolReusesParkedWorkers(t *testing.T) {
	p := &workerPool{idleFor: time.Hour}
	defer p.close()
	for i := range 5 {
		j := newJob()
		p.run(j)
		<-j.started
		close(j.release)
		waitFor(t, "the worker to park", func() bool { idle, _ := p.stats(); return idle == 1 })
		if _, spawned := p.stats(); spawned != 1 {
			t.Fatalf("run %d: %d workers started, want the parked one reused", i, spawned)
		}
	}
}

func TestWorkerPoolConcurrentAndCapped(t *testing.T) {
	p := &workerPool{idleFor: time.Hour, maxIdle: 2}
	jobs := make([]*job, 4)
	for i := range jobs {
		jobs[i] = newJob()
		p.run(jobs[i])
	}
	for _, j := range jobs {
		<-j.started // all four run at once
	}
	if idle, spawned := p.stats(); spawned != 4 || idle != 0 {
		t.Fatalf("idle %d, spawned %d; want 0, 4", idle, spawned)
	}
	for _, j := range jobs {
		close(j.release)
	}
	waitFor(t, "two workers to park", func() bool { idle, _ := p.stats(); return idle == 2 })
	p.close() // waits for all four to exit
	if idle, _ := p.stats(); idle != 0 {
		t.Fatalf("%d workers still parked after close", idle)
	}
}

func TestWorkerPoolRetiresIdleWorkers(t *testing.T) {
	p := &workerPool{idleFor: 10 * time.Millisecond}
	defer p.close()
	j := newJob()
	p.run(j)
	<-j.started
	close(j.release)
	// Not idle == 0 alone: that also holds before the worker has parked.
	waitFor(t, "the idle worker to retire", func() bool { return p.alive() == 0 })
	if _, spawned := p.stats(); spawned != 1 {
		t.Fatalf("spawned %d, want 1", spawned)
	}
	// A later run starts a fresh worker, and that one retires too.
	j = newJob()
	p.run(j)
	<-j.started
	close(j.release)
	if _, spawned := p.stats(); spawned != 2 {
		t.Fatalf("spawned %d, want 2", spawned)
	}
	waitFor(t, "the second worker to retire", func() bool { return p.alive() == 0 })
}

// One connection calling again and again keeps using one worker.
func TestServerReusesWorkers(t *testing.T) {
	s := startServer(t, echo, ServerOptions{})
	c := dial(t, s.Addr())
	for i := range 10 {
		if err := c.Call(context.Background(), "M", []any{i}, nil); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "the worker to park", func() bool { idle, _ := s.workers.stats(); return idle == 1 })
	}
	if _, spawned := s.workers.stats(); spawned != 1 {
		t.Fatalf("%d workers started for 10 sequential calls", spawned)
	}
}

// Requests split anywhere, several in one write, and longer than the read
// buffer all arrive whole.
func TestRequestsInPieces(t *testing.T) {
	s := startServer(t, echo, ServerOptions{})
	r := dialRaw(t, s.Addr())
	big := strings.Repeat("x", 3*readBufSize+17)
	var all bytes.Buffer
	for _, m := range []string{`{"method":"a","args":[1]}`, `{"method":"b","args":["` + big + `"]}`, `{"method":"c","args":[]}`} {
		all.WriteString(m)
		all.WriteByte(ETX)
	}
	data := all.Bytes()
	go func() {
		// Byte by byte for a while, then the rest in uneven chunks.
		for i := 0; i < len(data); {
			n := 1
			if i > 40 {
				n = 1 + i%5000
			}
			n = min(n, len(data)-i)
			if _, err := r.nc.Write(data[i : i+n]); err != nil {
				return
			}
			i += n
		}
	}()
	for _, want := range []string{"a", "b", "c"} {
		ok, res := r.recv()
		var got struct {
			Method string            `json:"method"`
			Args   []json.RawMessage `json:"args"`
		}
		if !ok || json.Unmarshal(res, &got) != nil || got.Method != want {
			t.Fatalf("reply %.60s, want method %s", res, want)
		}
		if want == "b" && (len(got.Args) != 1 || string(got.Args[0]) != `"`+big+`"`) {
			t.Fatalf("long argument arrived as %d bytes", len(got.Args[0]))
		}
	}
}

// A reply larger than the socket buffer takes the slow write path; the
// connection must then still work, with no stale write deadline.
func TestReplyLargerThanSocketBuffer(t *testing.T) {
	big := strings.Repeat("y", 8<<20)
	h := HandlerFunc(func(ctx context.Context, method string, args []json.RawMessage) (any, error) {
		if method == "big" {
			return big, nil
		}
		return method, nil
	})
	s := startServer(t, h, ServerOptions{})
	c := dial(t, s.Addr())
	var got string
	if err := c.Call(context.Background(), "big", nil, &got); err != nil || got != big {
		t.Fatalf("big reply: %d bytes, %v", len(got), err)
	}
	if err := c.Call(context.Background(), "small", nil, &got); err != nil || got != "small" {
		t.Fatalf("call after the big reply: %q %v", got, err)
	}
}

// A connection without a file descriptor (here an in-memory pipe) is
// served with plain reads and writes.
func TestConnWithoutDescriptor(t *testing.T) {
	s := NewServer(echo, ServerOptions{})
	defer s.workers.close()
	client, server := net.Pipe()
	defer client.Close()
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.serveConn(context.Background(), server)
	}()
	go func() {
		for _, part := range []string{`{"method":"Pi`, `pe","args":[7]}` + "\x03" + `{"method":"Two","args":[]}` + "\x03"} {
			if _, err := client.Write([]byte(part)); err != nil {
				return
			}
		}
	}()
	r := &rawConn{t: t, nc: client, br: bufio.NewReader(client)}
	for _, want := range []string{"Pipe", "Two"} {
		ok, res := r.recv()
		var got struct {
			Method string `json:"method"`
		}
		if !ok || json.Unmarshal(res, &got) != nil || got.Method != want {
			t.Fatalf("reply %s, want method %s", res, want)
		}
	}
	client.Close()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the connection was not released after the client closed it")
	}
}
