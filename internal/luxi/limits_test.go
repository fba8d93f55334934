package luxi

import (
	"bufio"
	"context"
	"encoding/json"
	"math"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/corral/corral/internal/ecode"
)

// nobody is the uid of unprivileged test clients.
const nobody = 65534

// dialAs connects to a unix socket with effective uid uid, which is what
// the server's SO_PEERCRED check sees. Only the connecting thread changes
// its uid (a raw setresuid is per thread on Linux); it is locked to the
// goroutine and never unlocked, so it exits with it rather than serving
// other goroutines.
func dialAs(t *testing.T, path string, uid int) *rawConn {
	t.Helper()
	type result struct {
		nc  net.Conn
		err error
	}
	done := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		keep := ^uintptr(0) // -1: leave unchanged
		if _, _, e := syscall.RawSyscall(syscall.SYS_SETRESUID, keep, uintptr(uid), keep); e != 0 {
			done <- result{err: e}
			return
		}
		nc, err := net.Dial("unix", path)
		done <- result{nc, err}
	}()
	r := <-done
	if r.err != nil {
		t.Fatalf("connecting as uid %d: %v", uid, r.err)
	}
	t.Cleanup(func() { r.nc.Close() })
	return &rawConn{t: t, nc: r.nc, br: bufio.NewReader(r.nc)}
}

// publicSocket returns a socket path any user may connect to.
func publicSocket(t *testing.T) string {
	t.Helper()
	dir := shortDir(t)
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return filepath.Join(dir, "sock")
}

// callRaw sends one request and returns the reply's envelope, failing
// the test if none comes within a generous bound. The write may fail: a
// rejected connection is answered and closed without being read.
func callRaw(r *rawConn, method string) (bool, json.RawMessage) {
	r.t.Helper()
	_, _ = r.nc.Write([]byte(`{"method":"` + method + `","args":[]}` + "\x03"))
	_ = r.nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	return r.recv()
}

// expectLuxiError checks a failure reply of kind LuxiError whose message
// contains want.
func expectLuxiError(t *testing.T, ok bool, raw json.RawMessage, want string) {
	t.Helper()
	var enc []any
	if err := json.Unmarshal(raw, &enc); err != nil {
		t.Fatalf("reply %s: %v", raw, err)
	}
	if e := ecode.Decode(enc); ok || e.Kind != ecode.LuxiError || !strings.Contains(e.Msg, want) {
		t.Fatalf("reply success=%v %+v, want a LuxiError about %q", ok, e, want)
	}
}

// Clients that fill the normal connection slots must not lock out an
// operator: root and the server's own user get a reserve beyond them.
func TestAdminReserve(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to connect as another user")
	}
	s := startServer(t, echo, ServerOptions{Path: publicSocket(t), Mode: 0o666, MaxConns: 2, AdminConns: 1})
	for range 2 {
		if ok, _ := callRaw(dialAs(t, s.Addr(), nobody), "X"); !ok {
			t.Fatal("a connection within the limit failed")
		}
	}
	ok, raw := callRaw(dialAs(t, s.Addr(), nobody), "X")
	expectLuxiError(t, ok, raw, "too many connections")

	admin := dialRaw(t, s.Addr()) // root
	if ok, raw := callRaw(admin, "X"); !ok {
		t.Fatalf("root was refused beyond the normal limit: %s", raw)
	}
	// The reserve is bounded too.
	ok, raw = callRaw(dialRaw(t, s.Addr()), "X")
	expectLuxiError(t, ok, raw, "too many connections")
	if n := s.ConnCount(); n != 3 {
		t.Fatalf("ConnCount = %d, want 3", n)
	}
}

// A request that starts but never ends must not hold its connection (and
// its memory) for ever.
func TestFrameTimeout(t *testing.T) {
	s := startServer(t, echo, ServerOptions{FrameTimeout: 50 * time.Millisecond, IdleTimeout: -1})
	r := dialRaw(t, s.Addr())
	if _, err := r.nc.Write([]byte(`{"method":"X","args":[`)); err != nil {
		t.Fatal(err)
	}
	_ = r.nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	ok, raw := r.recv()
	expectLuxiError(t, ok, raw, "request not completed within 50ms")
	r.expectClosed()

	// A connection that only idles is not affected by the frame timeout.
	quiet := dialRaw(t, s.Addr())
	time.Sleep(150 * time.Millisecond)
	if ok, raw := callRaw(quiet, "X"); !ok {
		t.Fatalf("idle connection without an idle timeout: %s", raw)
	}
}

// The idle timeout counts from the end of the last call, however long
// the connection has been open and busy.
func TestIdleTimeoutAfterCalls(t *testing.T) {
	release := make(chan struct{})
	h := HandlerFunc(func(ctx context.Context, method string, args []json.RawMessage) (any, error) {
		if method == "slow" {
			<-release
		}
		return "ok", nil
	})
	const idle = 100 * time.Millisecond
	s := startServer(t, h, ServerOptions{IdleTimeout: idle, FrameTimeout: 20 * time.Millisecond})
	busy := dialRaw(t, s.Addr())
	busy.send(`{"method":"slow","args":[]}`)
	// Neither the frame timeout nor several idle timeouts end a call in
	// progress.
	time.Sleep(4 * idle)
	close(release)
	_ = busy.nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	if ok, res := busy.recv(); !ok || string(res) != `"ok"` {
		t.Fatalf("slow call: success=%v %s", ok, res)
	}
	start := time.Now()
	busy.expectClosed()
	if waited := time.Since(start); waited < idle/2 {
		t.Fatalf("closed %v after the call ended, before the idle timeout %v", waited, idle)
	}
}

// Partly received requests across all connections share one memory
// budget: a request that would exceed it is refused, and what a request
// held is given back.
func TestFrameMemoryBudget(t *testing.T) {
	const budget = 256 << 10
	s := startServer(t, echo, ServerOptions{FrameMemory: budget, MaxMessageBytes: 1 << 20, FrameTimeout: -1, IdleTimeout: -1})
	body := `{"method":"X","args":["` + strings.Repeat("a", 100<<10)
	// Each 100 KiB partial request holds its read buffer and 128 KiB of
	// assembled message: two do not fit in 256 KiB.
	a := dialRaw(t, s.Addr())
	if _, err := a.nc.Write([]byte(body)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the first request to be held", func() bool { return s.lim.frames.used.Load() > 100<<10 })
	b := dialRaw(t, s.Addr())
	go func() { _, _ = b.nc.Write([]byte(body)) }()
	_ = b.nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	ok, raw := b.recv()
	expectLuxiError(t, ok, raw, "too many large requests")
	b.expectClosed()

	// The first request completes and gives back its memory.
	if _, err := a.nc.Write([]byte(`"]}` + "\x03")); err != nil {
		t.Fatal(err)
	}
	_ = a.nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	if ok, raw := a.recv(); !ok {
		t.Fatalf("request within the budget: %.200s", raw)
	}
	waitFor(t, "the budget to be given back", func() bool { return s.lim.frames.used.Load() == 0 })
	c := dial(t, s.Addr())
	if err := c.Call(context.Background(), "X", []any{strings.Repeat("c", 100<<10)}, nil); err != nil {
		t.Fatalf("a large request after the budget was given back: %v", err)
	}
	if n := s.lim.frames.used.Load(); n != 0 {
		t.Fatalf("%d bytes of the budget still taken", n)
	}
}

func TestConnLimitWithinDescriptors(t *testing.T) {
	for _, nofile := range []uint64{1, 2, 10, 100, 300, 1024, 4096, 20000, 65536, 1 << 20, 1 << 24, math.MaxUint64} {
		for _, per := range []int{0, 1, 2} {
			normal, admin := ConnLimit(nofile, per)
			if normal < 0 || admin < 0 || uint64(normal+admin)*uint64(max(per, 1)) > nofile {
				t.Errorf("ConnLimit(%d, %d) = %d + %d", nofile, per, normal, admin)
			}
			if n := min(nofile, maxDerivedConns); n >= 1024 && (normal < int(n/2)/max(per, 1) || admin != DefaultAdminConns) {
				t.Errorf("ConnLimit(%d, %d) = %d + %d: too little", nofile, per, normal, admin)
			}
		}
	}
}

// A server derives its connection limit from RLIMIT_NOFILE, and clamps an
// explicit one above what that allows.
func TestServerConnLimitFromRlimit(t *testing.T) {
	var old syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &old); err != nil {
		t.Fatal(err)
	}
	const soft = 2000
	if old.Cur < soft {
		t.Skipf("RLIMIT_NOFILE is only %d", old.Cur)
	}
	lowered := syscall.Rlimit{Cur: soft, Max: old.Max}
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lowered); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Setrlimit(syscall.RLIMIT_NOFILE, &old) })

	for _, asked := range []int{0, 65536} {
		s := NewServer(echo, ServerOptions{MaxConns: asked})
		normal, admin := s.MaxConns()
		if normal <= 0 || normal+admin > soft-minFDHeadroom {
			t.Errorf("MaxConns %d with RLIMIT_NOFILE %d: limit %d + %d", asked, soft, normal, admin)
		}
	}
	s := NewServer(echo, ServerOptions{MaxConns: 100})
	if normal, _ := s.MaxConns(); normal != 100 {
		t.Errorf("MaxConns 100 within the descriptor limit became %d", normal)
	}
}

// Without options a server times out unfinished requests and idle
// connections: a daemon that sets neither must not keep them for ever.
func TestTimeoutsOnByDefault(t *testing.T) {
	s := NewServer(echo, ServerOptions{})
	if s.opts.FrameTimeout <= 0 || s.opts.IdleTimeout <= 0 {
		t.Fatalf("default frame timeout %v, idle timeout %v: want both set", s.opts.FrameTimeout, s.opts.IdleTimeout)
	}
	if s.lim.frames.limit <= 0 {
		t.Fatalf("no default request memory budget")
	}
}
