package master

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/corral/corral/internal/ecode"
	"github.com/corral/corral/internal/election"
	"github.com/corral/corral/internal/jobqueue"
	"github.com/corral/corral/internal/luxi"
	"github.com/corral/corral/internal/store"
	"github.com/corral/corral/internal/store/boltstore"
)

const testWait = 15 * time.Second

func testStore(t *testing.T) store.Store {
	t.Helper()
	s, err := boltstore.Open(filepath.Join(t.TempDir(), "corral.db"), boltstore.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func candidate(t *testing.T, st store.Store, name, addr string) *election.Candidate {
	t.Helper()
	c, err := election.New(election.Config{Store: st, Name: name, Address: addr, TTL: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func campaign(t *testing.T, c *election.Candidate) *election.Term {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testWait)
	defer cancel()
	term, err := c.Campaign(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return term
}

// shortSocket returns a socket path short enough for sun_path whatever
// TMPDIR is.
func shortSocket(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "crl")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return filepath.Join(dir, "luxi.sock")
}

// callUntil dials and calls method until the call answers (success or an
// error reply), for a server that is still starting.
func callUntil(t *testing.T, sock, method string) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testWait)
	defer cancel()
	for {
		c, err := luxi.Dial(ctx, sock)
		if err == nil {
			var out any
			err = c.Call(ctx, method, []any{}, &out)
			c.Close()
			var ee *ecode.Error
			if err == nil || errors.As(err, &ee) {
				return err
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("no answer on %s: %v", sock, err)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func TestStandByNamesMasterThenWins(t *testing.T) {
	st := testStore(t)
	a := campaign(t, candidate(t, st, "node1", "/run/a.sock"))
	sock := shortSocket(t)
	opts := Options{SocketPath: sock, Logger: slog.New(slog.DiscardHandler)}.withDefaults()
	type result struct {
		term *election.Term
		err  error
	}
	done := make(chan result, 1)
	go func() {
		term, err := standBy(context.Background(), opts, st, candidate(t, st, "node2", sock), "node2")
		done <- result{term, err}
	}()
	for _, m := range []string{"SubmitJob", "QueryJobs", "NoSuchMethod"} {
		err := callUntil(t, sock, m)
		want := "this corrald is a standby; the master is node1 at /run/a.sock"
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("%s on a standby: %v, want an error containing %q", m, err, want)
		}
	}
	if err := a.Resign(context.Background()); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-done:
		if r.err != nil {
			t.Fatal(r.err)
		}
		if r.term.Name != "node2" || r.term.Token <= a.Token {
			t.Fatalf("won term %+v after %+v", r.term.Leader, a.Leader)
		}
		defer r.term.Resign(context.Background())
	case <-time.After(testWait):
		t.Fatal("the standby did not win after the master resigned")
	}
	// The standby's socket is gone once it has won, for the master's own.
	if _, err := luxi.Dial(context.Background(), sock); err == nil {
		t.Fatal("the standby socket still answers after the election was won")
	}
}

func TestStandbyErrorWithoutLeader(t *testing.T) {
	err := standbyError(context.Background(), testStore(t))
	if err.Class != ecode.State || !strings.Contains(err.Msg, "no master is elected") {
		t.Fatalf("got %+v", err)
	}
}

func TestStandByStopsWithContext(t *testing.T) {
	st := testStore(t)
	a := campaign(t, candidate(t, st, "node1", "x"))
	defer a.Resign(context.Background())
	ctx, cancel := context.WithCancel(context.Background())
	sock := shortSocket(t)
	done := make(chan error, 1)
	go func() {
		_, err := standBy(ctx, Options{SocketPath: sock, Logger: slog.New(slog.DiscardHandler)}, st, candidate(t, st, "node2", ""), "node2")
		done <- err
	}()
	_ = callUntil(t, sock, "QueryJobs")
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("standBy after cancel: %v", err)
		}
	case <-time.After(testWait):
		t.Fatal("standBy did not return after its context ended")
	}
}

func TestFenceAlarmTrips(t *testing.T) {
	st := testStore(t)
	term := campaign(t, candidate(t, st, "node1", ""))
	defer term.Resign(context.Background())
	ctx, trip := context.WithCancelCause(context.Background())
	defer trip(nil)
	tests := []struct {
		name    string
		token   int64
		tripped bool
	}{
		{"current term", term.Token, false},
		{"old term", term.Token - 1, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := &fenceAlarm{Store: election.Fenced(st, &election.Term{Leader: election.Leader{Token: tt.token}}), trip: trip}
			_, err := f.Txn(context.Background(), nil, []store.Op{store.Put("/k", []byte("v"))}, nil)
			if got := errors.Is(err, election.ErrFenced); got != tt.tripped {
				t.Fatalf("write: %v", err)
			}
			if got := ctx.Err() != nil; got != tt.tripped {
				t.Fatalf("tripped = %v, want %v", got, tt.tripped)
			}
			if tt.tripped && !errors.Is(context.Cause(ctx), election.ErrFenced) {
				t.Fatalf("cause %v", context.Cause(ctx))
			}
		})
	}
}

// runnerFunc is a jobqueue.OpRunner whose RunOp is a function.
type runnerFunc func(ctx context.Context) error

func (f runnerFunc) Recover(context.Context, *jobqueue.OpHandle) error { return nil }
func (f runnerFunc) RunOp(ctx context.Context, _ *jobqueue.OpHandle) (any, error) {
	return nil, f(ctx)
}

func TestTermRunnerEndsOpsWithTerm(t *testing.T) {
	st := testStore(t)
	term := campaign(t, candidate(t, st, "node1", ""))
	started := make(chan struct{})
	r := termRunner{OpRunner: runnerFunc(func(ctx context.Context) error {
		close(started)
		<-ctx.Done()
		return context.Cause(ctx)
	}), term: term}
	errc := make(chan error, 1)
	go func() {
		_, err := r.RunOp(context.Background(), nil)
		errc <- err
	}()
	<-started
	if err := term.Resign(context.Background()); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-errc:
		if !errors.Is(err, election.ErrResigned) {
			t.Fatalf("op ended with %v, want the term's end", err)
		}
	case <-time.After(testWait):
		t.Fatal("the op outlived the term")
	}
	// Without a term, the context is the caller's.
	ctx, cancel := withTerm(context.Background(), nil)
	defer cancel()
	if ctx.Err() != nil {
		t.Fatal("context without a term is already done")
	}
}

func TestFailoverWithoutElection(t *testing.T) {
	d := &Daemon{log: slog.New(slog.DiscardHandler)}
	_, err := d.failover(context.Background(), "")
	var ee *ecode.Error
	if !errors.As(err, &ee) || ee.Class != ecode.State || !strings.Contains(ee.Msg, "single master") {
		t.Fatalf("failover on bbolt: %v", err)
	}
}

func TestFailoverRefusalsKeepTheTerm(t *testing.T) {
	st := testStore(t)
	term := campaign(t, candidate(t, st, "node1", ""))
	defer term.Resign(context.Background())
	// No queue: a refusal must come before anything is stopped.
	d := &Daemon{log: slog.New(slog.DiscardHandler), term: term}
	for _, to := range []string{"node1", "bad\nname", strings.Repeat("n", 256)} {
		_, err := d.failover(context.Background(), to)
		var ee *ecode.Error
		if !errors.As(err, &ee) || ee.Class != ecode.Inval {
			t.Fatalf("failover to %q: %v", to, err)
		}
		if term.Err() != nil {
			t.Fatalf("failover to %q ended the term: %v", to, term.Err())
		}
	}
}

// The LUXI limits and timeouts of Options reach the socket's server.
func TestStandbyLUXILimits(t *testing.T) {
	st := testStore(t)
	a := campaign(t, candidate(t, st, "node1", "/run/a.sock"))
	defer a.Resign(context.Background())
	ctx, cancel := context.WithCancel(context.Background())
	sock := shortSocket(t)
	opts := Options{SocketPath: sock, Logger: slog.New(slog.DiscardHandler),
		MaxConns: 1, AdminConns: -1, LUXIIdleTimeout: time.Second}.withDefaults()
	done := make(chan error, 1)
	go func() {
		_, err := standBy(ctx, opts, st, candidate(t, st, "node2", sock), "node2")
		done <- err
	}()
	defer func() { cancel(); <-done }()
	_ = callUntil(t, sock, "QueryJobs")

	// A connection that made one call and then idles takes the only slot
	// (once the connection of callUntil has freed it).
	var idle net.Conn
	for deadline := time.Now().Add(testWait); ; {
		nc, err := net.Dial("unix", sock)
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		err = luxi.NewClient(nc).Call(ctx, "QueryJobs", []any{}, nil)
		if err != nil && strings.Contains(err.Error(), "standby") {
			idle = nc
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no connection slot: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	err := callUntil(t, sock, "QueryJobs")
	if err == nil || !strings.Contains(err.Error(), "too many connections (limit 1)") {
		t.Fatalf("second connection: %v, want too many connections", err)
	}
	_ = idle.SetReadDeadline(time.Now().Add(testWait))
	if n, err := idle.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
		t.Fatalf("idle connection: read %d, %v; want it closed", n, err)
	}
	// The slot comes back once the server has finished with the closed
	// connection, a moment after the client sees it closed.
	for deadline := time.Now().Add(testWait); ; time.Sleep(10 * time.Millisecond) {
		err = callUntil(t, sock, "QueryJobs")
		if err != nil && strings.Contains(err.Error(), "standby") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the idle connection closed: %v, want the standby error", err)
		}
	}
}

// An elected master whose address is still held (a frozen predecessor on
// the same machine) serves without it and binds it once it is free,
// instead of ending its term; a master without election fails at once.
func TestBindLaterWaitsForBusyAddress(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := busy.Addr().String()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()

	single := &Daemon{log: quiet}
	if err := single.bindLater(ctx, &wg, "join listener", addr, func(net.Listener) {}); !errors.Is(err, syscall.EADDRINUSE) {
		t.Fatalf("a master without election: %v, want EADDRINUSE", err)
	}
	d := &Daemon{log: quiet, term: &election.Term{}}
	served := make(chan net.Listener, 1)
	if err := d.bindLater(ctx, &wg, "join listener", addr, func(ln net.Listener) { served <- ln }); err != nil {
		t.Fatalf("an elected master gave up on a busy address: %v", err)
	}
	select {
	case <-served:
		t.Fatal("served on an address still in use")
	case <-time.After(3 * bindRetry):
	}
	busy.Close()
	select {
	case ln := <-served:
		if ln.Addr().String() != addr {
			t.Fatalf("listening on %s, want %s", ln.Addr(), addr)
		}
		ln.Close()
	case <-time.After(testWait):
		t.Fatal("the address was freed but the master never bound it")
	}
}
