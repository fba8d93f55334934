package rpc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/corral/corral/internal/ecode"
	"github.com/corral/corral/internal/pki"
)

type echoArgs struct {
	Word string `json:"word"`
}

type echoReply struct {
	Word  string `json:"word"`
	Calls int64  `json:"calls"`
}

// countingEcho registers "echo" on s and returns its call counter.
func countingEcho(s *Server) *atomic.Int64 {
	var n atomic.Int64
	s.Handle("echo", func(ctx context.Context, raw json.RawMessage) (any, error) {
		var a echoArgs
		if err := json.Unmarshal(raw, &a); err != nil {
			return nil, ecode.Errorf(ecode.Inval, "bad args: %v", err)
		}
		return echoReply{Word: a.Word, Calls: n.Add(1)}, nil
	})
	return &n
}

func TestCall(t *testing.T) {
	ca := newTestCA(t, "alpha")
	s := newNodeServer(t, ca, "node1", t.TempDir())
	calls := countingEcho(s)
	srv := startServer(t, s)
	c := newMasterClient(t, ca, epochOf(3))

	var r echoReply
	if err := c.Call(context.Background(), "node1", srv.addr, "echo", "", echoArgs{"hi"}, &r); err != nil {
		t.Fatal(err)
	}
	if r.Word != "hi" || r.Calls != 1 || calls.Load() != 1 {
		t.Fatalf("reply %+v after %d calls", r, calls.Load())
	}
	if s.Epoch() != 3 {
		t.Fatalf("server epoch = %d, want 3", s.Epoch())
	}
	// Read-only calls (no operation id) run every time.
	if err := c.Call(context.Background(), "node1", srv.addr, "echo", "", echoArgs{"hi"}, nil); err != nil {
		t.Fatal(err)
	}
	if calls.Load() != 2 {
		t.Fatalf("handler ran %d times, want 2", calls.Load())
	}
	err := c.Call(context.Background(), "node1", srv.addr, "nosuch", "", nil, nil)
	if ecode.ClassOf(err) != ecode.NoEnt {
		t.Fatalf("unknown method: err = %v (class %s)", err, ecode.ClassOf(err))
	}
}

func TestCallRefusals(t *testing.T) {
	ca := newTestCA(t, "alpha")
	other := newTestCA(t, "beta")
	s := newNodeServer(t, ca, "node1", t.TempDir())
	calls := countingEcho(s)
	srv := startServer(t, s)

	foreignCert, foreignKey := other.issue(t, "master", pki.RoleMaster)
	// Certificates of the same CA made for other jobs: none may call.
	roleClient := func(role pki.Role) *Client {
		cert, key := ca.issue(t, "x-"+string(role), role)
		return newClient(t, cert, key, ca.caPEM, epochOf(1))
	}

	// A node of another cluster (another CA) named like ours.
	foreign := newNodeServer(t, other, "node1", t.TempDir())
	countingEcho(foreign)
	foreignSrv := startServer(t, foreign)

	tests := []struct {
		name      string
		client    *Client
		node      string
		addr      string
		wantCalls int64
		wantOK    bool
	}{
		{"master", newMasterClient(t, ca, epochOf(1)), "node1", srv.addr, 1, true},
		{"etcd member role client", roleClient(pki.RoleEtcdMember), "node1", srv.addr, 1, false},
		{"etcd client role client", roleClient(pki.RoleEtcdClient), "node1", srv.addr, 1, false},
		{"old etcd member (master-candidate role) client", roleClient(pki.RoleMasterCandidate), "node1", srv.addr, 1, false},
		{"rapi role client", roleClient(pki.RoleRAPI), "node1", srv.addr, 1, false},
		{"admin role client", roleClient(pki.RoleAdmin), "node1", srv.addr, 1, false},
		{"no client certificate", newClient(t, nil, nil, ca.caPEM, epochOf(1)), "node1", srv.addr, 1, false},
		{"node role client", roleClient(pki.RoleNode), "node1", srv.addr, 1, false},
		{"client of another CA", newClient(t, foreignCert, foreignKey, other.caPEM, epochOf(1)), "node1", srv.addr, 1, false},
		{"server certificate names another node", newMasterClient(t, ca, epochOf(1)), "node9", srv.addr, 1, false},
		{"server of another CA", newMasterClient(t, ca, epochOf(1)), "node1", foreignSrv.addr, 1, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.client.Call(context.Background(), tc.node, tc.addr, "echo", "", echoArgs{"x"}, nil)
			if tc.wantOK && err != nil {
				t.Fatal(err)
			}
			if !tc.wantOK {
				mustBeUnreachable(t, err)
				if ecode.ClassOf(err) != ecode.Environ {
					t.Errorf("class = %s, want %s", ecode.ClassOf(err), ecode.Environ)
				}
			}
			if got := calls.Load(); got != tc.wantCalls {
				t.Fatalf("handler ran %d times, want %d", got, tc.wantCalls)
			}
		})
	}
}

func TestHandlerRefusesUnverifiedPeer(t *testing.T) {
	ca := newTestCA(t, "alpha")
	s := newNodeServer(t, ca, "node1", t.TempDir())
	calls := countingEcho(s)
	req := httptest.NewRequest(http.MethodPost, "/rpc/v1/echo", strings.NewReader(`{}`))
	req.Header.Set(HeaderEpoch, "1")
	rec := httptest.NewRecorder()
	s.Handler().ServeHTTP(rec, req)
	if rec.Code != http.StatusForbidden || calls.Load() != 0 {
		t.Fatalf("status %d after %d calls; want 403 and none", rec.Code, calls.Load())
	}
	err := decodeResponse(rec.Code, rec.Body.Bytes(), nil)
	if e, ok := ecode.As(err); !ok || e.Kind != ecode.PermissionDenied {
		t.Fatalf("err = %v", err)
	}
}

func TestEpochFencing(t *testing.T) {
	ca := newTestCA(t, "alpha")
	other := newTestCA(t, "beta")
	dir := t.TempDir()
	s := newNodeServer(t, ca, "node1", dir)
	calls := countingEcho(s)
	srv := startServer(t, s)
	epoch := epochOf(5)
	c := newMasterClient(t, ca, epoch)
	ctx := context.Background()
	call := func() error { return c.Call(ctx, "node1", srv.addr, "echo", "", echoArgs{"a"}, nil) }

	if err := call(); err != nil {
		t.Fatal(err)
	}
	// An older epoch is refused without learning the node's.
	epoch.Store(3)
	err := call()
	e, ok := ecode.As(err)
	if !ok || e.Kind != ecode.RemoteError || e.Class != ecode.State || e.Msg != errStaleEpoch.Msg {
		t.Fatalf("stale call: err = %#v", err)
	}
	if strings.Contains(err.Error(), "5") {
		t.Fatalf("the refusal names the node's epoch: %v", err)
	}
	// A higher epoch needs the CA's grant for exactly that epoch: without
	// one, with one for another epoch, or with one another CA signed, the
	// node refuses and keeps its epoch.
	refused := func(what string) {
		t.Helper()
		err := call()
		if e, ok := ecode.As(err); !ok || e.Kind != ecode.PermissionDenied {
			t.Fatalf("%s: err = %v", what, err)
		}
		if strings.Contains(err.Error(), "5") {
			t.Fatalf("%s: the refusal names the node's epoch: %v", what, err)
		}
		if s.Epoch() != 5 {
			t.Fatalf("%s: node epoch = %d, want 5", what, s.Epoch())
		}
	}
	epoch.Store(99999999)
	refused("no grant")
	grantEpoch(t, ca, c, epoch, 8)
	epoch.Store(7)
	refused("grant of another epoch")
	g, err := other.ca.SignEpochGrant(pki.EpochGrant{Epoch: 7, Master: "master"})
	if err != nil {
		t.Fatal(err)
	}
	c.SetEpochGrant(7, g)
	refused("grant of another CA")
	c.SetEpochGrant(7, "e30."+strings.Repeat("A", 86))
	refused("forged grant")
	if calls.Load() != 1 {
		t.Fatalf("handler ran %d times; refused calls must not run", calls.Load())
	}
	grantEpoch(t, ca, c, epoch, 7)
	if err := call(); err != nil {
		t.Fatal(err)
	}
	srv.stop()

	// The highest epoch survives a restart of the node daemon.
	s2 := newNodeServer(t, ca, "node1", dir)
	if s2.Epoch() != 7 {
		t.Fatalf("epoch after restart = %d, want 7", s2.Epoch())
	}
	countingEcho(s2)
	srv2 := startServer(t, s2)
	epoch.Store(6)
	err = c.Call(ctx, "node1", srv2.addr, "echo", "", echoArgs{"a"}, nil)
	if ecode.ClassOf(err) != ecode.State || strings.Contains(err.Error(), "7") {
		t.Fatalf("stale call after restart: %v", err)
	}
}

func TestEpochHeaderRequired(t *testing.T) {
	ca := newTestCA(t, "alpha")
	s := newNodeServer(t, ca, "node1", t.TempDir())
	calls := countingEcho(s)
	srv := startServer(t, s)
	cert, key := ca.issue(t, "master", pki.RoleMaster)
	cfg, err := pki.ClientTLSConfig(cert, key, ca.caPEM, "node1")
	if err != nil {
		t.Fatal(err)
	}
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: cfg}}
	defer hc.CloseIdleConnections()
	for _, v := range []string{"", "-1", "abc", "+5"} {
		req, _ := http.NewRequest(http.MethodPost, "https://"+srv.addr+"/rpc/v1/echo", strings.NewReader(`{}`))
		if v != "" {
			req.Header.Set(HeaderEpoch, v)
		}
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		err = decodeResponse(resp.StatusCode, body, nil)
		if resp.StatusCode != http.StatusBadRequest || ecode.ClassOf(err) != ecode.Inval {
			t.Errorf("epoch %q: status %d, err %v", v, resp.StatusCode, err)
		}
	}
	if calls.Load() != 0 {
		t.Fatalf("handler ran %d times", calls.Load())
	}
}

func TestOperationRecords(t *testing.T) {
	ca := newTestCA(t, "alpha")
	dir := t.TempDir()
	s := newNodeServer(t, ca, "node1", dir)
	calls := countingEcho(s)
	var fails atomic.Int64
	s.Handle("fail", func(context.Context, json.RawMessage) (any, error) {
		fails.Add(1)
		return nil, ecode.Errorf(ecode.Exists, "disk already exists")
	})
	srv := startServer(t, s)
	c := newMasterClient(t, ca, epochOf(1))
	ctx := context.Background()
	const op = "job/12/op/0/step/3"

	var r1, r2 echoReply
	if err := c.Call(ctx, "node1", srv.addr, "echo", op, echoArgs{"a"}, &r1); err != nil {
		t.Fatal(err)
	}
	if err := c.Call(ctx, "node1", srv.addr, "echo", op, echoArgs{"a"}, &r2); err != nil {
		t.Fatal(err)
	}
	if calls.Load() != 1 || r2 != r1 {
		t.Fatalf("retry ran the handler again: %d calls, replies %+v %+v", calls.Load(), r1, r2)
	}
	// The same id on another method, or another id, is another operation.
	if err := c.Call(ctx, "node1", srv.addr, "echo", op+"/x", echoArgs{"a"}, nil); err != nil {
		t.Fatal(err)
	}
	if calls.Load() != 2 {
		t.Fatalf("a different operation id was answered from a record")
	}
	for range 2 {
		err := c.Call(ctx, "node1", srv.addr, "fail", op, nil, nil)
		if ecode.ClassOf(err) != ecode.Exists {
			t.Fatalf("fail: %v", err)
		}
	}
	if fails.Load() != 1 {
		t.Fatalf("a recorded failure ran again: %d runs", fails.Load())
	}
	srv.stop()

	// Records survive a restart of the node daemon.
	s2 := newNodeServer(t, ca, "node1", dir)
	calls2 := countingEcho(s2)
	srv2 := startServer(t, s2)
	var r3 echoReply
	if err := c.Call(ctx, "node1", srv2.addr, "echo", op, echoArgs{"a"}, &r3); err != nil {
		t.Fatal(err)
	}
	if calls2.Load() != 0 || r3 != r1 {
		t.Fatalf("after restart: %d calls, reply %+v, want %+v from the record", calls2.Load(), r3, r1)
	}
}

func TestConcurrentDuplicateWaits(t *testing.T) {
	ca := newTestCA(t, "alpha")
	s := newNodeServer(t, ca, "node1", t.TempDir())
	var runs atomic.Int64
	entered := make(chan struct{}, 2)
	release := make(chan struct{})
	s.Handle("slow", func(ctx context.Context, _ json.RawMessage) (any, error) {
		n := runs.Add(1)
		entered <- struct{}{}
		<-release
		return n, nil
	})
	waiting := make(chan struct{}, 1)
	s.ops.onWait = func() { waiting <- struct{}{} }
	srv := startServer(t, s)
	c := newMasterClient(t, ca, epochOf(1))

	results := make([]int64, 2)
	errs := make([]error, 2)
	var wg sync.WaitGroup
	call := func(i int) {
		defer wg.Done()
		errs[i] = c.Call(context.Background(), "node1", srv.addr, "slow", "op-1", nil, &results[i])
	}
	wg.Add(2)
	go call(0)
	<-entered // the first call is in the handler
	go call(1)
	select {
	case <-waiting: // the duplicate waits for the first
	case <-entered:
		close(release)
		t.Fatal("the duplicate ran the handler instead of waiting")
	}
	close(release)
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
	}
	if runs.Load() != 1 || results[0] != 1 || results[1] != 1 {
		t.Fatalf("runs %d, results %v; want one run answering both", runs.Load(), results)
	}
}

func TestErrorClassCrossesTheWire(t *testing.T) {
	ca := newTestCA(t, "alpha")
	s := newNodeServer(t, ca, "node1", t.TempDir())
	tests := []struct {
		name      string
		err       error
		wantKind  ecode.Kind
		wantClass ecode.Class
		wantMsg   string
	}{
		{"prereq", ecode.Errorf(ecode.NoEnt, "instance %s not found", "web1"), ecode.OpPrereqError, ecode.NoEnt, "instance web1 not found"},
		{"hypervisor", ecode.New(ecode.HypervisorError, ecode.Environ, "qemu died"), ecode.HypervisorError, ecode.Environ, "qemu died"},
		{"wrapped", fmt.Errorf("step: %w", ecode.Errorf(ecode.TempNoRes, "no memory")), ecode.OpPrereqError, ecode.TempNoRes, "no memory"},
		{"plain", errors.New("boom"), ecode.OpExecError, ecode.Fault, "boom"},
	}
	for _, tc := range tests {
		s.Handle("e-"+tc.name, func(context.Context, json.RawMessage) (any, error) { return nil, tc.err })
	}
	s.Handle("panic", func(context.Context, json.RawMessage) (any, error) { panic("oops") })
	srv := startServer(t, s)
	c := newMasterClient(t, ca, epochOf(1))
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := c.Call(context.Background(), "node1", srv.addr, "e-"+tc.name, "", nil, nil)
			e, ok := ecode.As(err)
			if !ok {
				t.Fatalf("err %v is not an *ecode.Error", err)
			}
			if e.Kind != tc.wantKind || e.Class != tc.wantClass || e.Msg != tc.wantMsg {
				t.Fatalf("got %s/%s %q, want %s/%s %q", e.Kind, e.Class, e.Msg, tc.wantKind, tc.wantClass, tc.wantMsg)
			}
			if errors.Is(err, ErrUnreachable) {
				t.Fatal("a node's answer is reported as unreachable")
			}
		})
	}
	err := c.Call(context.Background(), "node1", srv.addr, "panic", "op", nil, nil)
	if ecode.ClassOf(err) != ecode.Fault || !strings.Contains(err.Error(), "panicked") {
		t.Fatalf("panic: %v", err)
	}
}

func TestUnreachable(t *testing.T) {
	ca := newTestCA(t, "alpha")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	c := newMasterClient(t, ca, epochOf(1))
	err = c.Call(context.Background(), "node1", addr, "echo", "", nil, nil)
	mustBeUnreachable(t, err)
	if !strings.Contains(err.Error(), "node1") || !strings.Contains(err.Error(), addr) {
		t.Fatalf("message %q names neither node nor address", err)
	}

	// A node that does not answer within the timeout is unreachable too.
	s := newNodeServer(t, ca, "node1", t.TempDir())
	release := make(chan struct{})
	// The handler waits for the test's end only: had it returned when
	// its own context ended, its answer could beat the client's timer.
	s.Handle("hang", func(ctx context.Context, _ json.RawMessage) (any, error) {
		<-release
		return nil, nil
	})
	srv := startServer(t, s)
	defer close(release)
	err = c.CallTimeout(context.Background(), 200*time.Millisecond, "node1", srv.addr, "hang", "", nil, nil)
	mustBeUnreachable(t, err)

	// The caller's own cancellation is not the node's fault.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err = c.Call(ctx, "node1", srv.addr, "hang", "", nil, nil)
	if !errors.Is(err, context.Canceled) || errors.Is(err, ErrUnreachable) {
		t.Fatalf("cancelled call: %v", err)
	}
}

func TestStream(t *testing.T) {
	ca := newTestCA(t, "alpha")
	s := newNodeServer(t, ca, "node1", t.TempDir())
	s.HandleStream("console", func(ctx context.Context, raw json.RawMessage, conn io.ReadWriter) error {
		var a echoArgs
		if err := json.Unmarshal(raw, &a); err != nil {
			return err
		}
		if _, err := io.WriteString(conn, a.Word+">"); err != nil {
			return err
		}
		_, err := io.Copy(conn, conn)
		return err
	})
	srv := startServer(t, s)
	epoch := epochOf(2)
	c := newMasterClient(t, ca, epoch)

	st, err := c.Stream(context.Background(), "node1", srv.addr, "console", echoArgs{"tty0"})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, err := io.WriteString(st, "hello"); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, len("tty0>hello"))
	if _, err := io.ReadFull(st, got); err != nil {
		t.Fatal(err)
	}
	if string(got) != "tty0>hello" {
		t.Fatalf("stream echoed %q", got)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}

	// Streams are fenced by epoch like calls.
	epoch.Store(1)
	_, err = c.Stream(context.Background(), "node1", srv.addr, "console", echoArgs{"x"})
	if ecode.ClassOf(err) != ecode.State {
		t.Fatalf("stale stream: %v", err)
	}
	// A plain call to a stream method is refused.
	epoch.Store(2)
	err = c.Call(context.Background(), "node1", srv.addr, "console", "", nil, nil)
	if ecode.ClassOf(err) != ecode.Inval {
		t.Fatalf("call to a stream method: %v", err)
	}
}

func TestStreamEndsWithContext(t *testing.T) {
	ca := newTestCA(t, "alpha")
	s := newNodeServer(t, ca, "node1", t.TempDir())
	ended := make(chan struct{})
	s.HandleStream("console", func(ctx context.Context, _ json.RawMessage, conn io.ReadWriter) error {
		defer close(ended)
		_, err := io.Copy(io.Discard, conn)
		return err
	})
	srv := startServer(t, s)
	c := newMasterClient(t, ca, epochOf(1))
	ctx, cancel := context.WithCancel(context.Background())
	st, err := c.Stream(ctx, "node1", srv.addr, "console", nil)
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	if _, err := st.Read(make([]byte, 1)); err == nil {
		t.Fatal("read after cancel succeeded")
	}
	<-ended // the server saw the connection close
}

func TestServeStopsOnCancel(t *testing.T) {
	ca := newTestCA(t, "alpha")
	s := newNodeServer(t, ca, "node1", t.TempDir())
	entered := make(chan struct{})
	s.Handle("block", func(ctx context.Context, _ json.RawMessage) (any, error) {
		close(entered)
		<-ctx.Done()
		return nil, ctx.Err()
	})
	srv := startServer(t, s)
	c := newMasterClient(t, ca, epochOf(1))
	errc := make(chan error, 1)
	go func() { errc <- c.Call(context.Background(), "node1", srv.addr, "block", "op-b", nil, nil) }()
	<-entered
	srv.stop() // must return although a handler with an operation id is running
	if err := <-errc; err == nil {
		t.Fatal("call interrupted by shutdown succeeded")
	}
	// The interrupted operation was not recorded: a retry must run it.
	rec, done, err := s.ops.begin(context.Background(), opKey("block", "op-b"))
	if err != nil || rec != nil {
		t.Fatalf("record after shutdown: %+v, %v", rec, err)
	}
	done()
}

func TestUpdateCA(t *testing.T) {
	oldCA := newTestCA(t, "alpha")
	newCA := newTestCA(t, "alpha")
	s := newNodeServer(t, newCA, "node1", t.TempDir())
	countingEcho(s)
	srv := startServer(t, s)
	c := newMasterClient(t, oldCA, epochOf(1))
	// Neither side trusts the other's CA yet.
	mustBeUnreachable(t, c.Call(context.Background(), "node1", srv.addr, "echo", "", nil, nil))
	bundle := append(append([]byte{}, oldCA.caPEM...), newCA.caPEM...)
	if err := c.UpdateCA(bundle); err != nil {
		t.Fatal(err)
	}
	if err := s.UpdateCA(bundle); err != nil {
		t.Fatal(err)
	}
	if err := c.Call(context.Background(), "node1", srv.addr, "echo", "", echoArgs{"x"}, nil); err != nil {
		t.Fatalf("after rotation: %v", err)
	}
	if err := c.UpdateCA([]byte("junk")); err == nil {
		t.Fatal("junk CA accepted")
	}
}

func TestServeReturnsListenerError(t *testing.T) {
	ca := newTestCA(t, "alpha")
	s := newNodeServer(t, ca, "node1", t.TempDir())
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln.Close()
	if err := s.Serve(context.Background(), ln); err == nil {
		t.Fatal("Serve on a closed listener returned nil")
	}
}

// BenchmarkCall measures a read-only call and a recorded operation over a
// pooled mTLS connection.
func BenchmarkCall(b *testing.B) {
	ca := newTestCA(b, "alpha")
	s := newNodeServer(b, ca, "node1", b.TempDir())
	countingEcho(s)
	srv := startServer(b, s)
	c := newMasterClient(b, ca, epochOf(1))
	ctx := context.Background()
	b.Run("read-only", func(b *testing.B) {
		for b.Loop() {
			if err := c.Call(ctx, "node1", srv.addr, "echo", "", echoArgs{"x"}, nil); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("operation", func(b *testing.B) {
		i := 0
		for b.Loop() {
			i++
			if err := c.Call(ctx, "node1", srv.addr, "echo", fmt.Sprintf("job/%d/op/0/step/0", i), echoArgs{"x"}, nil); err != nil {
				b.Fatal(err)
			}
		}
	})
}
