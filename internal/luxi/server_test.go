package luxi

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"os/user"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/corral/corral/internal/ecode"
)

// shortDir returns a fresh directory with a short path: t.TempDir() embeds
// the test name and can exceed the unix socket path limit.
func shortDir(t testing.TB) string {
	t.Helper()
	d, err := os.MkdirTemp("", "luxi")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

// startServer runs a server until the test ends and checks Serve's result.
func startServer(t testing.TB, h Handler, opts ServerOptions) *Server {
	t.Helper()
	if opts.Path == "" {
		opts.Path = filepath.Join(shortDir(t), "sock")
	}
	s := NewServer(h, opts)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx) }()
	select {
	case <-s.Ready():
	case err := <-done:
		cancel()
		t.Fatalf("Serve: %v", err)
	}
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve returned %v", err)
		}
	})
	return s
}

// echo answers every call with its method and arguments.
var echo = HandlerFunc(func(_ context.Context, method string, args []json.RawMessage) (any, error) {
	return map[string]any{"method": method, "args": args}, nil
})

func dial(t testing.TB, path string) *Client {
	t.Helper()
	c, err := Dial(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// rawConn is a hand-driven connection for protocol-level tests.
type rawConn struct {
	t  testing.TB
	nc net.Conn
	br *bufio.Reader
}

func dialRaw(t testing.TB, path string) *rawConn {
	t.Helper()
	nc, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	return &rawConn{t: t, nc: nc, br: bufio.NewReader(nc)}
}

func (r *rawConn) send(msgs ...string) {
	r.t.Helper()
	var b bytes.Buffer
	for _, m := range msgs {
		b.WriteString(m)
		b.WriteByte(ETX)
	}
	if _, err := r.nc.Write(b.Bytes()); err != nil {
		r.t.Fatal(err)
	}
}

// recv reads one reply and decodes its envelope.
func (r *rawConn) recv() (success bool, result json.RawMessage) {
	r.t.Helper()
	msg, err := ReadFrame(r.br, 1<<20)
	if err != nil {
		r.t.Fatalf("reading reply: %v", err)
	}
	var resp struct {
		Success bool            `json:"success"`
		Result  json.RawMessage `json:"result"`
		Version *int            `json:"version"`
	}
	if err := json.Unmarshal(msg, &resp); err != nil {
		r.t.Fatalf("reply %q: %v", msg, err)
	}
	if resp.Version != nil {
		r.t.Fatalf("reply %q carries a version; Ganeti's client refuses one other than its own", msg)
	}
	return resp.Success, resp.Result
}

// expectClosed checks the server closed the connection.
func (r *rawConn) expectClosed() {
	r.t.Helper()
	_ = r.nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	b, err := r.br.ReadByte()
	if err == nil {
		r.t.Fatalf("connection still open, read %q", b)
	}
	if !errors.Is(err, io.EOF) && !errors.Is(err, syscall.ECONNRESET) {
		r.t.Fatalf("want EOF after close, got %v", err)
	}
}

// waitFor polls an observable condition (used for connection counts, which
// change on the server's goroutines).
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestRoundTrip(t *testing.T) {
	s := startServer(t, echo, ServerOptions{})
	c := dial(t, s.Addr())
	var got struct {
		Method string            `json:"method"`
		Args   []json.RawMessage `json:"args"`
	}
	if err := c.Call(context.Background(), "QueryTags", []any{"instance", "web1"}, &got); err != nil {
		t.Fatal(err)
	}
	if got.Method != "QueryTags" || len(got.Args) != 2 || string(got.Args[0]) != `"instance"` || string(got.Args[1]) != `"web1"` {
		t.Fatalf("server saw %+v", got)
	}
	// The connection stays usable for further calls, and nil args go out as [].
	if err := c.Call(context.Background(), "QueryClusterInfo", nil, &got); err != nil {
		t.Fatal(err)
	}
	if got.Method != "QueryClusterInfo" || len(got.Args) != 0 {
		t.Fatalf("server saw %+v", got)
	}
}

func TestConcurrentClientCalls(t *testing.T) {
	s := startServer(t, echo, ServerOptions{})
	c := dial(t, s.Addr())
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Go(func() {
			var got struct {
				Args []int `json:"args"`
			}
			if err := c.Call(context.Background(), "M", []any{i}, &got); err != nil {
				t.Error(err)
				return
			}
			if len(got.Args) != 1 || got.Args[0] != i {
				t.Errorf("call %d got the answer %v", i, got.Args)
			}
		})
	}
	wg.Wait()
}

func TestPipelinedRequestsAnsweredInOrder(t *testing.T) {
	// Later requests finish faster, so an implementation answering out of
	// order would show it.
	release := make(chan struct{})
	h := HandlerFunc(func(ctx context.Context, method string, args []json.RawMessage) (any, error) {
		if method == "slow" {
			<-release
		}
		return method, nil
	})
	s := startServer(t, h, ServerOptions{})
	r := dialRaw(t, s.Addr())
	r.send(`{"method":"slow","args":[]}`, `{"method":"a","args":[]}`, `{"method":"b","args":[],"version":3010000}`)
	close(release)
	for _, want := range []string{`"slow"`, `"a"`, `"b"`} {
		ok, res := r.recv()
		if !ok || string(res) != want {
			t.Fatalf("got success=%v result=%s, want %s", ok, res, want)
		}
	}
}

func TestErrorsCrossTheWire(t *testing.T) {
	h := HandlerFunc(func(ctx context.Context, method string, args []json.RawMessage) (any, error) {
		switch method {
		case "prereq":
			return nil, ecode.Errorf(ecode.Exists, "Instance %q already exists", "web1")
		case "wrapped":
			return nil, fmt.Errorf("submitting: %w", ecode.New(ecode.JobQueueFull, ecode.TempNoRes, "Job queue is full"))
		case "plain":
			return nil, errors.New("something broke")
		case "unencodable":
			return func() {}, nil
		case "panic":
			panic("handler bug")
		}
		return "ok", nil
	})
	s := startServer(t, h, ServerOptions{})
	c := dial(t, s.Addr())
	tests := []struct {
		method string
		kind   ecode.Kind
		class  ecode.Class
		msg    string
	}{
		{"prereq", ecode.OpPrereqError, ecode.Exists, `Instance "web1" already exists`},
		{"wrapped", ecode.JobQueueFull, ecode.TempNoRes, "Job queue is full"},
		{"plain", ecode.GenericError, ecode.Fault, "something broke"},
		{"unencodable", ecode.GenericError, ecode.Fault, "cannot encode the result of unencodable"},
		{"panic", ecode.ProgrammerError, ecode.Fault, "internal error while running panic"},
	}
	for _, tt := range tests {
		t.Run(tt.method, func(t *testing.T) {
			err := c.Call(context.Background(), tt.method, nil, nil)
			e, ok := ecode.As(err)
			if !ok {
				t.Fatalf("err = %v, want *ecode.Error", err)
			}
			if e.Kind != tt.kind || e.Class != tt.class || e.Msg != tt.msg {
				t.Fatalf("got %s/%s/%q, want %s/%s/%q", e.Kind, e.Class, e.Msg, tt.kind, tt.class, tt.msg)
			}
		})
	}
	// Errors do not break the connection.
	var res string
	if err := c.Call(context.Background(), "fine", nil, &res); err != nil || res != "ok" {
		t.Fatalf("after errors: %q, %v", res, err)
	}
	// And the raw wire form is Ganeti's.
	r := dialRaw(t, s.Addr())
	r.send(`{"method":"prereq","args":[]}`)
	ok, raw := r.recv()
	if ok || !jsonEqual(raw, []byte(`["OpPrereqError",["Instance \"web1\" already exists","already_exists"]]`)) {
		t.Fatalf("wire reply success=%v result=%s", ok, raw)
	}
}

// Ganeti's clients send their own release's number (3000000 from 3.0,
// 2xx0000 from 2.x) or none, and refuse a reply whose version differs from
// theirs. Every one of them is answered on the same connection, and no reply
// carries a version (recv checks that).
func TestServerAnswersEveryClientVersion(t *testing.T) {
	s := startServer(t, echo, ServerOptions{})
	r := dialRaw(t, s.Addr())
	versions := []string{`3000000`, `2160000`, `2100000`, `3010000`, `null`, `"3.0"`, ``}
	for _, v := range versions {
		msg := `{"method":"QueryClusterInfo","args":[]` + map[bool]string{true: "", false: `,"version":` + v}[v == ""] + `}`
		r.send(msg)
		ok, res := r.recv()
		var got struct{ Method string }
		if err := json.Unmarshal(res, &got); !ok || err != nil || got.Method != "QueryClusterInfo" {
			t.Fatalf("version %s: reply success=%v %s, want the echoed call", v, ok, res)
		}
	}
	// And Corral's own client reads those version-less replies.
	var out map[string]any
	if err := dial(t, s.Addr()).Call(context.Background(), "QueryTags", []any{"cluster", ""}, &out); err != nil || out["method"] != "QueryTags" {
		t.Fatalf("Corral's client against a version-less server: %v %v", out, err)
	}
}

func TestMalformedRequestClosesOnlyThatConnection(t *testing.T) {
	var logs bytes.Buffer
	var logMu sync.Mutex
	logger := slog.New(slog.NewTextHandler(lockedWriter{&logs, &logMu}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	s := startServer(t, echo, ServerOptions{Logger: logger})
	good := dial(t, s.Addr())
	tests := []struct {
		name, msg, want string
	}{
		{"not json", `this is not json`, "not a JSON object"},
		{"no method", `{"args":[]}`, "no method"},
		{"args not a list", `{"method":"X","args":{"password":"hunter2"}}`, "not a list"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := dialRaw(t, s.Addr())
			// A valid request before the bad one is still answered.
			r.send(`{"method":"first","args":[]}`, tt.msg, `{"method":"never","args":[]}`)
			if ok, _ := r.recv(); !ok {
				t.Fatal("the request before the bad one failed")
			}
			ok, raw := r.recv()
			var enc []any
			if err := json.Unmarshal(raw, &enc); err != nil {
				t.Fatal(err)
			}
			e := ecode.Decode(enc)
			if ok || e.Kind != ecode.LuxiError || !strings.Contains(e.Msg, tt.want) {
				t.Fatalf("reply success=%v %+v, want LuxiError containing %q", ok, e, tt.want)
			}
			r.expectClosed()
			// Other connections carry on.
			if err := good.Call(context.Background(), "still", nil, nil); err != nil {
				t.Fatalf("other connection broken: %v", err)
			}
		})
	}
	logMu.Lock()
	defer logMu.Unlock()
	if strings.Contains(logs.String(), "hunter2") {
		t.Fatalf("request contents were logged:\n%s", logs.String())
	}
	if !strings.Contains(logs.String(), "method=still") {
		t.Fatalf("method names were not logged:\n%s", logs.String())
	}
}

type lockedWriter struct {
	w  io.Writer
	mu *sync.Mutex
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func TestOversizeRequest(t *testing.T) {
	s := startServer(t, echo, ServerOptions{MaxMessageBytes: 1024})
	r := dialRaw(t, s.Addr())
	big := `{"method":"X","args":["` + strings.Repeat("a", 2000) + `"]}`
	// The server may close before reading everything; the write may fail.
	go func() { _, _ = r.nc.Write(append([]byte(big), ETX)) }()
	ok, raw := r.recv()
	var enc []any
	if err := json.Unmarshal(raw, &enc); err != nil {
		t.Fatal(err)
	}
	if e := ecode.Decode(enc); ok || e.Kind != ecode.LuxiError || !strings.Contains(e.Msg, "exceeds 1024 bytes") {
		t.Fatalf("reply success=%v %+v", ok, e)
	}
	r.expectClosed()

	// A request just under the limit is fine.
	c := dial(t, s.Addr())
	if err := c.Call(context.Background(), "X", []any{strings.Repeat("a", 900)}, nil); err != nil {
		t.Fatal(err)
	}
}

func TestMaxConns(t *testing.T) {
	s := startServer(t, echo, ServerOptions{MaxConns: 2, AdminConns: -1})
	a := dial(t, s.Addr())
	b := dial(t, s.Addr())
	for _, c := range []*Client{a, b} {
		if err := c.Call(context.Background(), "X", nil, nil); err != nil {
			t.Fatal(err)
		}
	}
	if n := s.ConnCount(); n != 2 {
		t.Fatalf("ConnCount = %d, want 2", n)
	}
	over := dial(t, s.Addr())
	err := over.Call(context.Background(), "X", nil, nil)
	e, ok := ecode.As(err)
	if !ok || e.Kind != ecode.LuxiError || !strings.Contains(e.Msg, "too many connections") {
		t.Fatalf("third connection: %v, want LuxiError about too many connections", err)
	}
	if n := s.ConnCount(); n != 2 {
		t.Fatalf("ConnCount = %d after a rejection, want 2", n)
	}
	a.Close()
	waitFor(t, "a connection slot to free", func() bool { return s.ConnCount() < 2 })
	again := dial(t, s.Addr())
	if err := again.Call(context.Background(), "X", nil, nil); err != nil {
		t.Fatalf("after a slot freed: %v", err)
	}
}

func TestSocketSetup(t *testing.T) {
	t.Run("mode", func(t *testing.T) {
		s := startServer(t, echo, ServerOptions{})
		fi, err := os.Stat(s.Addr())
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Type() != fs.ModeSocket || fi.Mode().Perm() != 0o660 {
			t.Fatalf("socket mode %v, want socket 0660", fi.Mode())
		}
	})
	t.Run("custom mode", func(t *testing.T) {
		s := startServer(t, echo, ServerOptions{Mode: 0o600})
		fi, err := os.Stat(s.Addr())
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != 0o600 {
			t.Fatalf("socket mode %v, want 0600", fi.Mode())
		}
	})
	t.Run("group", func(t *testing.T) {
		if os.Geteuid() != 0 {
			t.Skip("changing a socket's group to another group needs root")
		}
		g, err := user.LookupGroupId("1")
		if err != nil {
			t.Skip("no group with gid 1")
		}
		s := startServer(t, echo, ServerOptions{Group: g.Name})
		fi, err := os.Stat(s.Addr())
		if err != nil {
			t.Fatal(err)
		}
		if gid := fi.Sys().(*syscall.Stat_t).Gid; strconv.Itoa(int(gid)) != g.Gid {
			t.Fatalf("socket gid %d, want %s", gid, g.Gid)
		}
	})
	serveErr := func(t *testing.T, opts ServerOptions) error {
		t.Helper()
		s := NewServer(echo, opts)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		done := make(chan error, 1)
		go func() { done <- s.Serve(ctx) }()
		select {
		case err := <-done:
			return err
		case <-s.Ready():
			cancel()
			<-done
			t.Fatal("server started")
			return nil
		}
	}
	t.Run("missing group", func(t *testing.T) {
		err := serveErr(t, ServerOptions{Path: filepath.Join(shortDir(t), "s"), Group: "corral-no-such-group"})
		if err == nil || !strings.Contains(err.Error(), `"corral-no-such-group"`) {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("path too long", func(t *testing.T) {
		path := filepath.Join(shortDir(t), strings.Repeat("x", 110))
		err := serveErr(t, ServerOptions{Path: path})
		if err == nil || !strings.Contains(err.Error(), "longer than the 107") {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("regular file in the way", func(t *testing.T) {
		path := filepath.Join(shortDir(t), "s")
		if err := os.WriteFile(path, []byte("keep me"), 0o600); err != nil {
			t.Fatal(err)
		}
		err := serveErr(t, ServerOptions{Path: path})
		if err == nil || !strings.Contains(err.Error(), "not a socket") {
			t.Fatalf("err = %v", err)
		}
		if b, _ := os.ReadFile(path); string(b) != "keep me" {
			t.Fatal("the file was changed")
		}
	})
	t.Run("live server in the way", func(t *testing.T) {
		s := startServer(t, echo, ServerOptions{})
		err := serveErr(t, ServerOptions{Path: s.Addr()})
		if err == nil || !strings.Contains(err.Error(), "another server") {
			t.Fatalf("err = %v", err)
		}
		if err := dial(t, s.Addr()).Call(context.Background(), "X", nil, nil); err != nil {
			t.Fatalf("first server disturbed: %v", err)
		}
	})
	t.Run("stale socket replaced", func(t *testing.T) {
		path := filepath.Join(shortDir(t), "s")
		ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
		if err != nil {
			t.Fatal(err)
		}
		ln.SetUnlinkOnClose(false)
		ln.Close()
		if _, err := os.Lstat(path); err != nil {
			t.Fatalf("stale socket not left behind: %v", err)
		}
		s := startServer(t, echo, ServerOptions{Path: path})
		if err := dial(t, s.Addr()).Call(context.Background(), "X", nil, nil); err != nil {
			t.Fatal(err)
		}
	})
}

func TestServeTwice(t *testing.T) {
	s := startServer(t, echo, ServerOptions{})
	if err := s.Serve(context.Background()); err == nil {
		t.Fatal("second Serve succeeded")
	}
}

func TestStopRemovesSocketAndCancelsCalls(t *testing.T) {
	entered := make(chan struct{})
	h := HandlerFunc(func(ctx context.Context, method string, args []json.RawMessage) (any, error) {
		close(entered)
		<-ctx.Done()
		return nil, ctx.Err()
	})
	path := filepath.Join(shortDir(t), "s")
	s := NewServer(h, ServerOptions{Path: path})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx) }()
	<-s.Ready()
	c := dial(t, path)
	idle := dialRaw(t, path)
	callErr := make(chan error, 1)
	go func() { callErr <- c.Call(context.Background(), "block", nil, nil) }()
	<-entered
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Serve: %v", err)
	}
	if err := <-callErr; err == nil {
		t.Fatal("blocked call succeeded after stop")
	}
	idle.expectClosed()
	if _, err := os.Lstat(path); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("socket file left behind: %v", err)
	}
	if n := s.ConnCount(); n != 0 {
		t.Fatalf("ConnCount = %d after stop", n)
	}
}

func TestDisconnectCancelsCall(t *testing.T) {
	entered := make(chan struct{})
	cancelled := make(chan error, 1)
	h := HandlerFunc(func(ctx context.Context, method string, args []json.RawMessage) (any, error) {
		close(entered)
		<-ctx.Done()
		cancelled <- ctx.Err()
		return nil, ctx.Err()
	})
	s := startServer(t, h, ServerOptions{})
	r := dialRaw(t, s.Addr())
	r.send(`{"method":"WaitForJobChange","args":[1,["status"],null,null,60]}`)
	<-entered
	r.nc.Close()
	if err := <-cancelled; !errors.Is(err, context.Canceled) {
		t.Fatalf("handler ctx ended with %v", err)
	}
	waitFor(t, "the connection to be released", func() bool { return s.ConnCount() == 0 })
}

func TestClientCancelMidCall(t *testing.T) {
	entered := make(chan struct{}, 1)
	serverSaw := make(chan struct{})
	h := HandlerFunc(func(ctx context.Context, method string, args []json.RawMessage) (any, error) {
		if method != "block" {
			return "ok", nil
		}
		entered <- struct{}{}
		<-ctx.Done()
		close(serverSaw)
		return nil, ctx.Err()
	})
	s := startServer(t, h, ServerOptions{})
	c := dial(t, s.Addr())
	ctx, cancel := context.WithCancel(context.Background())
	callErr := make(chan error, 1)
	go func() { callErr <- c.Call(ctx, "block", nil, nil) }()
	<-entered
	cancel()
	if err := <-callErr; !errors.Is(err, context.Canceled) {
		t.Fatalf("call err = %v, want context.Canceled", err)
	}
	// The client dropped the connection, so the server's call ends too.
	<-serverSaw
	if err := c.Call(context.Background(), "after", nil, nil); !errors.Is(err, ErrClientClosed) {
		t.Fatalf("call on abandoned client: %v, want ErrClientClosed", err)
	}
	// A deadline behaves the same way.
	c2 := dial(t, s.Addr())
	dctx, dcancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer dcancel()
	if err := c2.Call(dctx, "block", nil, nil); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("call err = %v, want DeadlineExceeded", err)
	}
	<-entered
}

func TestClientRejectsOtherVersion(t *testing.T) {
	path := filepath.Join(shortDir(t), "s")
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		nc, err := ln.Accept()
		if err != nil {
			return
		}
		defer nc.Close()
		if _, err := ReadFrame(bufio.NewReader(nc), 1<<20); err != nil {
			return
		}
		_ = WriteFrame(nc, []byte(`{"success":true,"result":42,"version":2160000}`))
	}()
	c := dial(t, path)
	var res int
	err = c.Call(context.Background(), "X", nil, &res)
	if !errors.Is(err, ErrVersion) || !strings.Contains(err.Error(), "2160000") || !strings.Contains(err.Error(), "3010000") {
		t.Fatalf("err = %v, want a version mismatch naming both versions", err)
	}
	if res != 0 {
		t.Fatalf("result decoded despite the mismatch: %d", res)
	}
}

func TestIdleTimeout(t *testing.T) {
	release := make(chan struct{})
	h := HandlerFunc(func(ctx context.Context, method string, args []json.RawMessage) (any, error) {
		if method == "slow" {
			<-release
		}
		return "ok", nil
	})
	s := startServer(t, h, ServerOptions{IdleTimeout: 30 * time.Millisecond})
	idle := dialRaw(t, s.Addr())
	idle.expectClosed()

	// A call in progress is not idleness, however long it takes.
	busy := dialRaw(t, s.Addr())
	busy.send(`{"method":"slow","args":[]}`)
	time.Sleep(150 * time.Millisecond) // several idle timeouts pass during the call
	close(release)
	if ok, res := busy.recv(); !ok || string(res) != `"ok"` {
		t.Fatalf("slow call: success=%v %s", ok, res)
	}
	busy.expectClosed() // and idleness after it still counts
}

// heapAndStacks is the memory the Go runtime holds for live objects and
// goroutine stacks.
func heapAndStacks() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse + m.StackInuse
}

func TestManyIdleConnections(t *testing.T) {
	const n = 1000
	s := startServer(t, echo, ServerOptions{})
	// Warm the server (pools, first call) so the measurement is of the
	// connections alone.
	dial(t, s.Addr()).Call(context.Background(), "warm", nil, nil)
	before := heapAndStacks()
	// Bare sockets on the client side, sharing one reply buffer, so that
	// what is measured is mostly the server's cost.
	conns := make([]net.Conn, n)
	br := bufio.NewReader(nil)
	for i := range conns {
		nc, err := net.Dial("unix", s.Addr())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { nc.Close() })
		conns[i] = nc
		// A call on each connection: the server has read a message and must
		// have let go of the buffer it borrowed for it.
		if err := WriteFrame(nc, []byte(`{"method":"hello","args":["x"]}`)); err != nil {
			t.Fatal(err)
		}
		br.Reset(nc)
		if _, err := ReadFrame(br, 1<<20); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "all connections accepted", func() bool { return s.ConnCount() == n+1 })
	perConn := (int64(heapAndStacks()) - int64(before)) / n
	t.Logf("%d idle connections: %d bytes each (server side plus the client socket)", n, perConn)
	// A retained read buffer alone would be readBufSize per connection.
	if perConn > readBufSize {
		t.Errorf("idle connection costs %d bytes, more than a read buffer (%d)", perConn, readBufSize)
	}
	var res struct {
		Method string `json:"method"`
	}
	if err := dial(t, s.Addr()).Call(context.Background(), "QueryClusterInfo", nil, &res); err != nil || res.Method != "QueryClusterInfo" {
		t.Fatalf("call with %d idle connections open: %+v %v", n, res, err)
	}
	if err := WriteFrame(conns[n/2], []byte(`{"method":"again","args":[]}`)); err != nil {
		t.Fatal(err)
	}
	br.Reset(conns[n/2])
	if _, err := ReadFrame(br, 1<<20); err != nil {
		t.Fatalf("idle connection no longer answers: %v", err)
	}
}
