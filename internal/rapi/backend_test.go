package rapi

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/corral/corral/internal/ecode"
	"github.com/corral/corral/internal/luxi"
)

// luxiFixture is a real luxi.Server on a temporary socket that can be
// stopped and started again on the same path, as corrald is restarted, and
// a LuxiBackend on it whose dials are counted.
type luxiFixture struct {
	t     *testing.T
	path  string
	h     luxi.Handler
	opts  luxi.ServerOptions // of the server; Path is the fixture's
	stop  func()
	srv   *luxi.Server
	be    *LuxiBackend
	dials atomic.Int64
}

func newLuxiFixture(t *testing.T, h luxi.Handler) *luxiFixture {
	t.Helper()
	return newLuxiFixtureWith(t, h, luxi.ServerOptions{})
}

func newLuxiFixtureWith(t *testing.T, h luxi.Handler, opts luxi.ServerOptions) *luxiFixture {
	t.Helper()
	// t.TempDir() embeds the test name and can exceed the socket path limit.
	dir, err := os.MkdirTemp("", "rapi")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	fx := &luxiFixture{t: t, path: filepath.Join(dir, "sock"), h: h, opts: opts}
	fx.be = &LuxiBackend{Socket: fx.path, dial: func(ctx context.Context, path string) (*luxi.Client, error) {
		fx.dials.Add(1)
		return luxi.Dial(ctx, path)
	}}
	t.Cleanup(func() { fx.be.Close() })
	fx.start()
	t.Cleanup(func() {
		if fx.stop != nil {
			fx.stop()
		}
	})
	return fx
}

// start serves the fixture's handler (which may have been replaced).
func (fx *luxiFixture) start() {
	fx.t.Helper()
	opts := fx.opts
	opts.Path = fx.path
	s := luxi.NewServer(fx.h, opts)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx) }()
	select {
	case <-s.Ready():
	case err := <-done:
		cancel()
		fx.t.Fatalf("Serve: %v", err)
	}
	fx.srv = s
	fx.stop = func() {
		cancel()
		if err := <-done; err != nil {
			fx.t.Errorf("Serve: %v", err)
		}
		fx.stop = nil
	}
}

// restart stops the server (closing every connection) and starts a new
// one on the same socket.
func (fx *luxiFixture) restart(h luxi.Handler) {
	fx.t.Helper()
	fx.stop()
	fx.h = h
	fx.start()
}

// counter answers QueryClusterInfo with a fixed map, SubmitJob with the
// next job id, and counts the calls it saw by method.
type counter struct {
	mu    sync.Mutex
	calls map[string]int
	next  int64
}

func newCounter() *counter { return &counter{calls: map[string]int{}, next: 1} }

func (c *counter) Call(_ context.Context, method string, _ []json.RawMessage) (any, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls[method]++
	switch method {
	case luxi.MethodQueryClusterInfo:
		return map[string]any{"name": "c1"}, nil
	case luxi.MethodSubmitJob:
		c.next++
		return c.next - 1, nil
	case luxi.MethodQueryTags:
		return nil, ecode.Errorf(ecode.NoEnt, "Instance 'x' not known")
	}
	return nil, ecode.Errorf(ecode.Inval, "unexpected %s", method)
}

func (c *counter) count(method string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.calls[method]
}

func TestLuxiBackendReusesConnections(t *testing.T) {
	h := newCounter()
	fx := newLuxiFixture(t, h)
	ctx := context.Background()
	for i := range 20 {
		info, err := fx.be.QueryClusterInfo(ctx)
		if err != nil || info["name"] != "c1" {
			t.Fatalf("call %d: %v, %v", i, info, err)
		}
	}
	if n := fx.dials.Load(); n != 1 {
		t.Errorf("%d dials for 20 sequential calls, want 1", n)
	}
	// An error answer drops the connection: it may come from a corrald
	// that no longer serves (a standby during a failover), and the next
	// call must reach whoever serves now.
	if _, err := fx.be.QueryTags(ctx, "instance", "x"); ecode.ClassOf(err) != ecode.NoEnt {
		t.Fatalf("QueryTags: %v, want a NoEnt error", err)
	}
	if n := fx.be.IdleConns(); n != 0 {
		t.Errorf("%d idle connections after an error answer, want 0", n)
	}
	if _, err := fx.be.SubmitJob(ctx, []any{map[string]any{"OP_ID": "OP_TEST_DELAY"}}); err != nil {
		t.Fatal(err)
	}
	if n := fx.dials.Load(); n != 2 {
		t.Errorf("%d dials for 22 sequential calls with one error answer, want 2", n)
	}
	if n := fx.be.IdleConns(); n != 1 {
		t.Errorf("%d idle connections, want 1", n)
	}
	if n := h.count(luxi.MethodQueryClusterInfo); n != 20 {
		t.Errorf("server saw %d QueryClusterInfo, want 20", n)
	}
}

// gate is a handler whose QueryClusterInfo calls wait until released (or
// their ctx ends), each first reporting on arrived.
type gate struct {
	arrived chan struct{}
	release chan struct{}
}

func newGate(n int) *gate {
	return &gate{arrived: make(chan struct{}, n), release: make(chan struct{})}
}

func (g *gate) Call(ctx context.Context, method string, _ []json.RawMessage) (any, error) {
	g.arrived <- struct{}{}
	select {
	case <-g.release:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if method == luxi.MethodWaitForJobChange {
		return []any{[]any{"success"}, []any{}}, nil
	}
	return map[string]any{"name": "c1"}, nil
}

func TestLuxiBackendBoundsIdleConnections(t *testing.T) {
	const n = 24
	g := newGate(n)
	fx := newLuxiFixture(t, g)
	fx.be.MaxIdle = 5
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for range n {
		wg.Go(func() {
			_, err := fx.be.QueryClusterInfo(context.Background())
			errs <- err
		})
	}
	// All n calls are in corrald at once, so each has its own connection.
	for range n {
		<-g.arrived
	}
	close(g.release)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if d := fx.dials.Load(); d != n {
		t.Errorf("%d dials for %d concurrent calls, want %d", d, n, n)
	}
	if got := fx.be.IdleConns(); got != 5 {
		t.Errorf("%d idle connections, want MaxIdle 5", got)
	}
	if err := fx.be.Close(); err != nil {
		t.Fatal(err)
	}
	if got := fx.be.IdleConns(); got != 0 {
		t.Errorf("%d idle connections after Close", got)
	}
	// Still usable after Close, without keeping connections.
	g2 := newCounter()
	fx.restart(g2)
	if _, err := fx.be.QueryClusterInfo(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := fx.be.IdleConns(); got != 0 {
		t.Errorf("%d idle connections kept after Close", got)
	}
}

func TestLuxiBackendLongPollHoldsNoOneUp(t *testing.T) {
	g := newGate(1)
	h := luxi.HandlerFunc(func(ctx context.Context, method string, args []json.RawMessage) (any, error) {
		if method == luxi.MethodWaitForJobChange {
			return g.Call(ctx, method, args)
		}
		return map[string]any{"name": "c1"}, nil
	})
	fx := newLuxiFixture(t, h)
	ctx := context.Background()
	if _, err := fx.be.QueryClusterInfo(ctx); err != nil { // one idle connection
		t.Fatal(err)
	}
	waited := make(chan error, 1)
	go func() {
		ch, err := fx.be.WaitForJobChange(ctx, 1, []string{"status"}, nil, nil, 10)
		if err == nil && (ch.NoChange || len(ch.JobInfo) != 1) {
			err = errors.New("unexpected change")
		}
		waited <- err
	}()
	<-g.arrived
	// The long poll has the pooled connection; this call must get another.
	for range 3 {
		if _, err := fx.be.QueryClusterInfo(ctx); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case err := <-waited:
		t.Fatalf("WaitForJobChange returned early: %v", err)
	default:
	}
	close(g.release)
	if err := <-waited; err != nil {
		t.Fatal(err)
	}
	if d := fx.dials.Load(); d != 2 {
		t.Errorf("%d dials, want 2 (one taken by the long poll)", d)
	}
	if n := fx.be.IdleConns(); n != 2 {
		t.Errorf("%d idle connections after the poll, want 2", n)
	}
}

func TestLuxiBackendCancelDropsConnection(t *testing.T) {
	g := newGate(4)
	fx := newLuxiFixture(t, g)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := fx.be.WaitForJobChange(ctx, 1, []string{"status"}, nil, nil, 10)
		done <- err
	}()
	<-g.arrived
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled call: %v, want context.Canceled", err)
	}
	if n := fx.be.IdleConns(); n != 0 {
		t.Errorf("%d idle connections: the cancelled call's connection was kept", n)
	}
	// A ctx that has already ended dials nothing.
	if _, err := fx.be.QueryClusterInfo(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("call on a cancelled ctx: %v", err)
	}
	if d := fx.dials.Load(); d != 1 {
		t.Errorf("%d dials, want 1", d)
	}
	// A deadline is honoured as well.
	dctx, dcancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer dcancel()
	if _, err := fx.be.QueryClusterInfo(dctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("call past its deadline: %v", err)
	}
	close(g.release)
}

func TestLuxiBackendCorraldRestart(t *testing.T) {
	ctx := context.Background()
	for _, method := range []string{luxi.MethodQueryClusterInfo, luxi.MethodSubmitJob} {
		t.Run(method, func(t *testing.T) {
			h1 := newCounter()
			fx := newLuxiFixture(t, h1)
			fx.be.MaxIdle = 3
			// Three idle connections, all of which die with the restart.
			var wg sync.WaitGroup
			g := newGate(3)
			fx.restart(g)
			for range 3 {
				wg.Go(func() { _, _ = fx.be.QueryClusterInfo(ctx) })
			}
			for range 3 {
				<-g.arrived
			}
			close(g.release)
			wg.Wait()
			if n := fx.be.IdleConns(); n != 3 {
				t.Fatalf("%d idle connections before the restart, want 3", n)
			}
			before := fx.dials.Load()

			h2 := newCounter()
			fx.restart(h2)
			var err error
			switch method {
			case luxi.MethodQueryClusterInfo:
				_, err = fx.be.QueryClusterInfo(ctx)
			case luxi.MethodSubmitJob:
				var id int64
				id, err = fx.be.SubmitJob(ctx, []any{map[string]any{"OP_ID": "OP_TEST_DELAY"}})
				if err == nil && id != 1 {
					t.Errorf("job id %d, want 1", id)
				}
			}
			if err != nil {
				t.Fatalf("first call after the restart: %v", err)
			}
			if n := h2.count(method); n != 1 {
				t.Errorf("new corrald saw %d %s, want exactly 1", n, method)
			}
			// One dead idle connection tried, then one fresh dial; the other
			// dead ones were dropped rather than tried in turn.
			if d := fx.dials.Load() - before; d != 1 {
				t.Errorf("%d dials after the restart, want 1", d)
			}
			if n := fx.be.IdleConns(); n != 1 {
				t.Errorf("%d idle connections after the restart, want 1 (the fresh one)", n)
			}
		})
	}
}

// corrald closes LUXI connections idle for its idle timeout; the pooled
// ones it closed are replaced without failing a call, and a job is still
// submitted once.
func TestLuxiBackendIdleClosedByCorrald(t *testing.T) {
	h := newCounter()
	fx := newLuxiFixtureWith(t, h, luxi.ServerOptions{IdleTimeout: 20 * time.Millisecond})
	ctx := context.Background()
	for round := range 3 {
		if _, err := fx.be.QueryClusterInfo(ctx); err != nil {
			t.Fatal(err)
		}
		if n := fx.be.IdleConns(); n != 1 {
			t.Fatalf("%d idle connections, want 1", n)
		}
		deadline := time.Now().Add(10 * time.Second)
		for fx.srv.ConnCount() > 0 {
			if time.Now().After(deadline) {
				t.Fatal("corrald did not close the idle connection")
			}
			time.Sleep(5 * time.Millisecond)
		}
		id, err := fx.be.SubmitJob(ctx, []any{map[string]any{"OP_ID": "OP_TEST_DELAY"}})
		if err != nil {
			t.Fatalf("submitting on a pooled connection corrald closed: %v", err)
		}
		if want := int64(round + 1); id != want || h.count(luxi.MethodSubmitJob) != round+1 {
			t.Fatalf("job %d after %d submits, want job %d submitted once", id, h.count(luxi.MethodSubmitJob), want)
		}
	}
}

func TestLuxiBackendNoSubmitRetryAfterSend(t *testing.T) {
	received := make(chan struct{}, 1)
	var submits atomic.Int64
	h := luxi.HandlerFunc(func(ctx context.Context, method string, _ []json.RawMessage) (any, error) {
		if method != luxi.MethodSubmitJob {
			return map[string]any{"name": "c1"}, nil
		}
		submits.Add(1)
		received <- struct{}{}
		<-ctx.Done() // corrald goes away while the job is being queued
		return nil, ctx.Err()
	})
	fx := newLuxiFixture(t, h)
	ctx := context.Background()
	if _, err := fx.be.QueryClusterInfo(ctx); err != nil { // a pooled connection
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := fx.be.SubmitJob(ctx, []any{map[string]any{"OP_ID": "OP_TEST_DELAY"}})
		done <- err
	}()
	<-received
	h2 := newCounter()
	fx.restart(h2)
	if err := <-done; err == nil {
		t.Fatal("SubmitJob succeeded although corrald went away while handling it")
	}
	if n := submits.Load(); n != 1 {
		t.Errorf("first corrald saw %d submissions, want 1", n)
	}
	if n := h2.count(luxi.MethodSubmitJob); n != 0 {
		t.Errorf("the submission was retried on the new corrald (%d times)", n)
	}
	if d := fx.dials.Load(); d != 1 {
		t.Errorf("%d dials, want 1: no retry after the request was sent", d)
	}
	if n := fx.be.IdleConns(); n != 0 {
		t.Errorf("%d idle connections: the failed connection was kept", n)
	}
}

func TestLuxiBackendDown(t *testing.T) {
	fx := newLuxiFixture(t, newCounter())
	ctx := context.Background()
	if _, err := fx.be.QueryClusterInfo(ctx); err != nil {
		t.Fatal(err)
	}
	fx.stop()
	// The pooled connection is dead and the fresh dial finds no server.
	_, err := fx.be.QueryClusterInfo(ctx)
	var down *backendDownError
	if !errors.As(err, &down) {
		t.Fatalf("call with corrald down: %v, want a backendDownError", err)
	}
	if d := fx.dials.Load(); d != 2 {
		t.Errorf("%d dials, want 2", d)
	}
	// corrald back: the next call succeeds.
	fx.start()
	if _, err := fx.be.QueryClusterInfo(ctx); err != nil {
		t.Fatal(err)
	}
}

func BenchmarkLuxiBackendQueryClusterInfo(b *testing.B) {
	dir, err := os.MkdirTemp("", "rapib")
	if err != nil {
		b.Fatal(err)
	}
	defer os.RemoveAll(dir)
	s := luxi.NewServer(newCounter(), luxi.ServerOptions{Path: filepath.Join(dir, "sock")})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx) }()
	<-s.Ready()
	defer func() { cancel(); <-done }()
	for _, tc := range []struct {
		name    string
		maxIdle int
	}{{"pooled", 0}, {"dial-per-call", -1}} {
		b.Run(tc.name, func(b *testing.B) {
			be := &LuxiBackend{Socket: s.Addr(), MaxIdle: tc.maxIdle}
			defer be.Close()
			for b.Loop() {
				if _, err := be.QueryClusterInfo(ctx); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestLuxiBackendRetriesUnreadRequest drives the server side by hand: the
// first connection answers one call and then closes while the next request
// sits unread in its socket, as a dying corrald does. The client sees
// ECONNRESET; the job was never read, so the backend submits it once on a
// fresh connection.
func TestLuxiBackendRetriesUnreadRequest(t *testing.T) {
	dir, err := os.MkdirTemp("", "rapi")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	path := filepath.Join(dir, "sock")
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	reply := func(nc net.Conn, result string) error {
		return luxi.WriteFrame(nc, []byte(`{"success":true,"result":`+result+`,"version":`+strconv.Itoa(luxi.ProtocolVersion)+`}`))
	}
	var seen []string // methods the server read, in order
	var mu sync.Mutex
	served := make(chan error, 1)
	go func() {
		served <- func() error {
			// Connection 1: one call, then close with the next one unread.
			nc, err := ln.Accept()
			if err != nil {
				return err
			}
			br := bufio.NewReader(nc)
			msg, err := luxi.ReadFrame(br, 1<<20)
			if err != nil {
				return err
			}
			method, _, _ := luxi.DecodeRequest(msg)
			mu.Lock()
			seen = append(seen, method)
			mu.Unlock()
			if err := reply(nc, `{"name":"c1"}`); err != nil {
				return err
			}
			rc, err := nc.(*net.UnixConn).SyscallConn()
			if err != nil {
				return err
			}
			// Wait until the next request is in the socket, without reading it.
			if err := rc.Read(func(fd uintptr) bool {
				n, _ := unix.Poll([]unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}, 0)
				return n > 0
			}); err != nil {
				return err
			}
			nc.Close()
			// Connection 2: the retry.
			nc, err = ln.Accept()
			if err != nil {
				return err
			}
			defer nc.Close()
			if msg, err = luxi.ReadFrame(bufio.NewReader(nc), 1<<20); err != nil {
				return err
			}
			method, _, _ = luxi.DecodeRequest(msg)
			mu.Lock()
			seen = append(seen, method)
			mu.Unlock()
			return reply(nc, `42`)
		}()
	}()
	var dials atomic.Int64
	be := &LuxiBackend{Socket: path, dial: func(ctx context.Context, p string) (*luxi.Client, error) {
		dials.Add(1)
		return luxi.Dial(ctx, p)
	}}
	defer be.Close()
	ctx := context.Background()
	if _, err := be.QueryClusterInfo(ctx); err != nil {
		t.Fatal(err)
	}
	id, err := be.SubmitJob(ctx, []any{map[string]any{"OP_ID": "OP_TEST_DELAY"}})
	if err != nil || id != 42 {
		t.Fatalf("SubmitJob = %d, %v; want 42 from the fresh connection", id, err)
	}
	if err := <-served; err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if strings.Join(seen, ",") != "QueryClusterInfo,SubmitJob" {
		t.Errorf("server read %v, want the job exactly once", seen)
	}
	if d := dials.Load(); d != 2 {
		t.Errorf("%d dials, want 2", d)
	}
}
