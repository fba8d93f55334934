package master

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/corral/corral/internal/ecode"
	"github.com/corral/corral/internal/election"
	"github.com/corral/corral/internal/luxi"
	"github.com/corral/corral/internal/pki"
)

var quiet = slog.New(slog.DiscardHandler)

// issueCert makes a key and a certificate of ca with role for name.
func issueCert(t testing.TB, ca *pki.CA, role pki.Role, name string) (certPEM, keyPEM []byte) {
	t.Helper()
	keyPEM, key, err := pki.NewKeyPair()
	if err != nil {
		t.Fatal(err)
	}
	certPEM, err = ca.Issue(pki.IssueRequest{CommonName: name, Role: role, DNSNames: []string{name}, PublicKey: key.Public()})
	if err != nil {
		t.Fatal(err)
	}
	return certPEM, keyPEM
}

// masterState writes a master state directory with the files forwarding
// uses: a cluster CA and a master certificate for node1.
func masterState(t testing.TB, ca *pki.CA) string {
	t.Helper()
	dir := t.TempDir()
	if err := ca.Save(filepath.Join(dir, FileCA), filepath.Join(dir, FileCAKey)); err != nil {
		t.Fatal(err)
	}
	certPEM, keyPEM := issueCert(t, ca, pki.RoleMaster, "node1")
	if err := pki.WriteKeyPair(filepath.Join(dir, FileMasterCert), filepath.Join(dir, FileMasterKey), certPEM, keyPEM); err != nil {
		t.Fatal(err)
	}
	return dir
}

func newCA(t testing.TB, name string) *pki.CA {
	t.Helper()
	ca, err := pki.NewCA(name, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return ca
}

// fakeMaster serves h on a forward listener with the certificates of
// stateDir; stop closes it and every connection.
func fakeMaster(t testing.TB, stateDir string, h luxi.Handler) (addr string, stop func()) {
	t.Helper()
	cfg, _, err := forwardTLS(stateDir)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	srv := luxi.NewServer(h, luxi.ServerOptions{Logger: quiet})
	go func() {
		defer close(done)
		_ = srv.ServeListener(ctx, tlsListener{Listener: ln, cfg: cfg, log: quiet})
	}()
	stop = func() { cancel(); <-done }
	t.Cleanup(stop)
	return ln.Addr().String(), stop
}

// runStandby runs standBy as node2 with forwarding, with node1 elected at
// masterAddr (none when masterAddr is ""), and returns its socket and a
// function that stops it and returns standBy's error.
func runStandby(t *testing.T, stateDir, masterAddr string) (sock string, stop func() error) {
	t.Helper()
	st := testStore(t)
	if masterAddr != "" {
		term := campaign(t, candidate(t, st, "node1", masterAddr))
		t.Cleanup(func() { _ = term.Resign(context.Background()) })
	}
	sock = shortSocket(t)
	opts := Options{SocketPath: sock, StateDir: stateDir, ForwardAddress: "127.0.0.1:1", Logger: quiet}.withDefaults()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := standBy(ctx, opts, st, candidate(t, st, "node2", "127.0.0.1:1"), "node2")
		done <- err
	}()
	stopped := false
	stop = func() error {
		cancel()
		if stopped {
			return nil
		}
		stopped = true
		select {
		case err := <-done:
			return err
		case <-time.After(testWait):
			t.Fatal("standBy did not return")
			return nil
		}
	}
	t.Cleanup(func() { _ = stop() })
	waitSocket(t, sock)
	return sock, stop
}

func waitSocket(t *testing.T, sock string) {
	t.Helper()
	deadline := time.Now().Add(testWait)
	for {
		c, err := net.Dial("unix", sock)
		if err == nil {
			c.Close()
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("socket %s never answered: %v", sock, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func dialSock(t *testing.T, sock string) *luxi.Client {
	t.Helper()
	c, err := luxi.Dial(context.Background(), sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func callCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), testWait)
	t.Cleanup(cancel)
	return ctx
}

// forwardRig is a fake master with an echo handler and a standby that
// forwards to it, both on the certificates of one cluster CA.
type forwardRig struct {
	h           *echo
	addr        string // the master's forward listener
	sock        string // the standby's socket
	stopMaster  func()
	stopStandby func() error
}

func newForwardRig(t *testing.T) *forwardRig {
	t.Helper()
	r := &forwardRig{h: newEcho()}
	dir := masterState(t, newCA(t, "c1"))
	r.addr, r.stopMaster = fakeMaster(t, dir, r.h)
	r.sock, r.stopStandby = runStandby(t, dir, r.addr)
	return r
}

// startWait sends a "Wait" call on c and returns its result once the master
// has started it.
func (r *forwardRig) startWait(t *testing.T, ctx context.Context, c *luxi.Client) <-chan error {
	t.Helper()
	errc := make(chan error, 1)
	go func() {
		var out []any
		errc <- c.Call(ctx, "Wait", []any{"w"}, &out)
	}()
	if got := <-r.h.started; got != "Wait" {
		t.Fatalf("started %q", got)
	}
	return errc
}

// serveLuxi serves srv until the test ends and returns once it is ready;
// the context returned ends with the test too.
func serveLuxi(tb testing.TB, srv *luxi.Server) context.Context {
	tb.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(ctx)
	}()
	tb.Cleanup(func() { cancel(); <-done })
	<-srv.Ready()
	return ctx
}

// echo answers every call with its method and first argument; "Wait"
// blocks until release is closed.
type echo struct {
	release chan struct{}
	started chan string
	calls   atomic.Int64
}

func newEcho() *echo {
	return &echo{release: make(chan struct{}), started: make(chan string, 16)}
}

func (e *echo) Call(ctx context.Context, method string, args []json.RawMessage) (any, error) {
	e.calls.Add(1)
	var arg any
	if len(args) > 0 {
		_ = json.Unmarshal(args[0], &arg)
	}
	switch method {
	case "Wait":
		e.started <- method
		select {
		case <-e.release:
		case <-ctx.Done():
			e.started <- "cancelled"
			return nil, ctx.Err()
		}
	case "Fail":
		return nil, ecode.Errorf(ecode.Inval, "refused %v", arg)
	}
	return []any{method, arg}, nil
}

func TestForwardRelaysCallsInOrder(t *testing.T) {
	r := newForwardRig(t)
	ctx := callCtx(t)

	// A long poll on one connection does not hold up another.
	waited := r.startWait(t, ctx, dialSock(t, r.sock))
	c := dialSock(t, r.sock)
	for i, m := range []string{"QueryJobs", "SubmitJob", "QueryTags"} {
		var out []any
		if err := c.Call(ctx, m, []any{float64(i)}, &out); err != nil {
			t.Fatalf("%s through the standby: %v", m, err)
		}
		if len(out) != 2 || out[0] != m || out[1] != float64(i) {
			t.Fatalf("%s: reply %v", m, out)
		}
	}
	// Failure replies pass through unchanged.
	err := c.Call(ctx, "Fail", []any{"x"}, nil)
	var ee *ecode.Error
	if !errors.As(err, &ee) || ee.Class != ecode.Inval || !strings.Contains(ee.Msg, "refused x") {
		t.Fatalf("failure reply: %v", err)
	}
	close(r.h.release)
	if err := <-waited; err != nil {
		t.Fatalf("long poll through the standby: %v", err)
	}
}

func TestForwardWithoutMasterAnswersStandbyError(t *testing.T) {
	// A standby alone would win at once: serve its socket as standBy does,
	// on a store where nobody is elected.
	dir := masterState(t, newCA(t, "c1"))
	st := testStore(t)
	sock := shortSocket(t)
	fw, err := newForwarder(Options{StateDir: dir, Logger: quiet}, st, "node2")
	if err != nil {
		t.Fatal(err)
	}
	serveLuxi(t, luxi.NewServer(standbyHandler{st: st}, luxi.ServerOptions{Path: sock, Divert: fw.divert}))
	err = dialSock(t, sock).Call(callCtx(t), "QueryJobs", []any{}, nil)
	if err == nil || !strings.Contains(err.Error(), "this corrald is a standby; no master is elected") {
		t.Fatalf("call with no master: %v", err)
	}
}

func TestForwardRefusesMasterOfAnotherCA(t *testing.T) {
	dir := masterState(t, newCA(t, "c1"))
	other := masterState(t, newCA(t, "c1"))
	h := newEcho()
	addr, _ := fakeMaster(t, other, h)
	sock, _ := runStandby(t, dir, addr)
	err := dialSock(t, sock).Call(callCtx(t), "QueryJobs", []any{}, nil)
	if err == nil || !strings.Contains(err.Error(), "this corrald is a standby; the master is node1 at "+addr) {
		t.Fatalf("call relayed to a master of another CA: %v", err)
	}
	if n := h.calls.Load(); n != 0 {
		t.Fatalf("the impostor master got %d calls", n)
	}
}

func TestForwardListenerChecksClientCertificates(t *testing.T) {
	ca := newCA(t, "c1")
	dir := masterState(t, ca)
	h := newEcho()
	addr, _ := fakeMaster(t, dir, h)
	foreign := newCA(t, "c1")
	tests := []struct {
		name  string
		ca    *pki.CA
		role  pki.Role
		noCrt bool
		ok    bool
	}{
		{"master of the cluster CA", ca, pki.RoleMaster, false, true},
		{"master candidate of the cluster CA (as etcd members hold)", ca, pki.RoleMasterCandidate, false, false},
		{"node of the cluster CA", ca, pki.RoleNode, false, false},
		{"rapi of the cluster CA", ca, pki.RoleRAPI, false, false},
		{"master of another CA", foreign, pki.RoleMaster, false, false},
		{"no certificate", nil, "", true, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var certPEM, keyPEM []byte
			if !tt.noCrt {
				certPEM, keyPEM = issueCert(t, tt.ca, tt.role, "node9")
			}
			cfg, err := pki.ClientTLSConfig(certPEM, keyPEM, ca.CertPEM(), "node1", pki.RoleMaster)
			if err != nil {
				t.Fatal(err)
			}
			before := h.calls.Load()
			ctx := callCtx(t)
			err = func() error {
				nc, err := (&tls.Dialer{Config: cfg}).DialContext(ctx, "tcp", addr)
				if err != nil {
					return err
				}
				c := luxi.NewClient(nc)
				defer c.Close()
				return c.Call(ctx, "QueryJobs", []any{}, nil)
			}()
			if (err == nil) != tt.ok {
				t.Fatalf("call: %v, want success %v", err, tt.ok)
			}
			if got := h.calls.Load() - before; got != map[bool]int64{true: 1, false: 0}[tt.ok] {
				t.Fatalf("the master ran %d calls", got)
			}
		})
	}
}

func TestForwardMasterBreaksMidCall(t *testing.T) {
	r := newForwardRig(t)
	errc := r.startWait(t, callCtx(t), dialSock(t, r.sock))
	r.stopMaster()
	select {
	case err := <-errc:
		var ee *ecode.Error
		if !errors.As(err, &ee) || !strings.Contains(ee.Msg, "lost its connection to the master node1") {
			t.Fatalf("call cut by the master: %v", err)
		}
	case <-time.After(testWait):
		t.Fatal("the client hangs after the master connection broke")
	}
}

func TestForwardClientLeavingCancelsTheCall(t *testing.T) {
	r := newForwardRig(t)
	c, err := luxi.Dial(context.Background(), r.sock)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	errc := r.startWait(t, ctx, c)
	cancel() // abandons the connection
	<-errc
	select {
	case got := <-r.h.started:
		if got != "cancelled" {
			t.Fatalf("got %q", got)
		}
	case <-time.After(testWait):
		t.Fatal("the master's call outlived the client's connection")
	}
}

func TestForwardStandbyStoppingLetsRepliesThrough(t *testing.T) {
	r := newForwardRig(t)
	errc := r.startWait(t, callCtx(t), dialSock(t, r.sock))
	stopped := make(chan error, 1)
	go func() { stopped <- r.stopStandby() }()
	// The socket goes away at once for the master's own server...
	deadline := time.Now().Add(testWait)
	for {
		nc, err := net.Dial("unix", r.sock)
		if err != nil {
			break
		}
		nc.Close()
		if time.Now().After(deadline) {
			t.Fatal("the standby socket still accepts while stopping")
		}
		time.Sleep(10 * time.Millisecond)
	}
	// ...while the call in progress still gets its reply.
	close(r.h.release)
	if err := <-errc; err != nil {
		t.Fatalf("reply of a call in progress while the standby stops: %v", err)
	}
	if err := <-stopped; !errors.Is(err, context.Canceled) {
		t.Fatalf("standBy: %v", err)
	}
}

func TestCandidateAddress(t *testing.T) {
	tests := []struct {
		name          string
		fwd, cand     string
		want, wantErr string
	}{
		{"socket without forwarding", "", "", "/run/s.sock", ""},
		{"candidate address without forwarding", "", "node1", "node1", ""},
		{"forward address", "10.0.0.1:1811", "", "10.0.0.1:1811", ""},
		{"forward on every address needs the candidate address", ":1811", "", "", "every address"},
		{"forward on 0.0.0.0", "0.0.0.0:1811", "", "", "every address"},
		{"candidate address names where to dial", "0.0.0.0:1811", "node1.example:1811", "node1.example:1811", ""},
		{"candidate address must be HOST:PORT", "10.0.0.1:1811", "/run/s.sock", "", "HOST:PORT"},
		{"bad forward address", "10.0.0.1", "", "", "forward address"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := candidateAddress(Options{SocketPath: "/run/s.sock", ForwardAddress: tt.fwd, CandidateAddress: tt.cand})
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("got %q, %v; want an error with %q", got, err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("got %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}

func TestForwardable(t *testing.T) {
	for addr, want := range map[string]bool{
		"127.0.0.1:1811": true, "[::1]:1811": true, "node1:1811": true,
		"/run/corral/master/luxi.sock": false, "node1": false, ":1811": false, "": false,
	} {
		if got := forwardable(addr); got != want {
			t.Errorf("forwardable(%q) = %v", addr, got)
		}
	}
}

// forwardRigAt serves a standby's socket through a forwarder f whose TLS is
// set from a fake master's state; leader gets that master's address. The
// socket's own handler must never answer.
func forwardRigAt(t *testing.T, f *forwarder, leader func(addr string) func(context.Context) (election.Leader, error)) (sock string, h *echo) {
	t.Helper()
	dir := masterState(t, newCA(t, "c1"))
	h = newEcho()
	addr, _ := fakeMaster(t, dir, h)
	_, cfg, err := forwardTLS(dir)
	if err != nil {
		t.Fatal(err)
	}
	f.self, f.tls, f.log, f.grace, f.leader = "node2", cfg, quiet, forwardGrace, leader(addr)
	sock = shortSocket(t)
	serveLuxi(t, luxi.NewServer(luxi.HandlerFunc(func(context.Context, string, []json.RawMessage) (any, error) {
		return nil, errors.New("not the standby's handler")
	}), luxi.ServerOptions{Path: sock, Divert: f.divert}))
	return sock, h
}

// The forwarder never relays to itself, even when the record names it
// (its own key from before a restart): the request gets the standby error.
func TestForwardNeverToSelf(t *testing.T) {
	sock, h := forwardRigAt(t, &forwarder{}, func(addr string) func(context.Context) (election.Leader, error) {
		return func(context.Context) (election.Leader, error) {
			return election.Leader{Name: "node2", Address: addr}, nil
		}
	})
	err := dialSock(t, sock).Call(callCtx(t), "QueryJobs", []any{}, nil)
	if err == nil || !strings.Contains(err.Error(), "this corrald is a standby") {
		t.Fatalf("call: %v", err)
	}
	if n := h.calls.Load(); n != 0 {
		t.Fatalf("relayed %d calls to itself", n)
	}
}

// A connection accepted while no master could be reached is not the
// standby's for good: the first request after a master appears is relayed,
// on the same connection, and so is everything after it.
func TestForwardDecidesPerRequest(t *testing.T) {
	var elected atomic.Bool
	f := &forwarder{standby: func(context.Context) error {
		return ecode.Errorf(ecode.State, "this corrald is a standby; no master is elected at the moment, retry shortly")
	}}
	sock, h := forwardRigAt(t, f, func(addr string) func(context.Context) (election.Leader, error) {
		return func(context.Context) (election.Leader, error) {
			if !elected.Load() {
				return election.Leader{}, election.ErrNoLeader
			}
			return election.Leader{Name: "node1", Address: addr}, nil
		}
	})
	c := dialSock(t, sock)
	ctx := callCtx(t)
	for range 3 {
		if err := c.Call(ctx, "QueryJobs", []any{}, nil); err == nil || !strings.Contains(err.Error(), "no master is elected") {
			t.Fatalf("call without a master: %v", err)
		}
	}
	elected.Store(true)
	for i := range 3 {
		var out []any
		if err := c.Call(ctx, "QueryJobs", []any{float64(i)}, &out); err != nil {
			t.Fatalf("call %d once a master serves: %v", i, err)
		}
		if len(out) != 2 || out[0] != "QueryJobs" || out[1] != float64(i) {
			t.Fatalf("reply %v", out)
		}
	}
	if n := h.calls.Load(); n != 3 {
		t.Fatalf("the master ran %d calls, want 3", n)
	}
}

// FuzzPumpCountsFrames checks the relay's accounting: whatever the bytes
// and however they arrive, the copy is exact, the message ends counted are
// the ETX bytes in it, and the last chunk tells whether it ended on one.
func FuzzPumpCountsFrames(f *testing.F) {
	f.Add([]byte("{\"method\":\"QueryJobs\",\"args\":[]}\x03"), uint8(7))
	f.Add([]byte("\x03\x03\x03"), uint8(1))
	f.Add([]byte("partial"), uint8(3))
	f.Add([]byte{}, uint8(0))
	f.Fuzz(func(t *testing.T, data []byte, step uint8) {
		srcA, srcB := net.Pipe()
		dstA, dstB := net.Pipe()
		defer dstB.Close()
		frames, lastEnds := 0, false
		done := make(chan side, 1)
		go func() {
			done <- pump(dstA, srcB, clientSide, masterSide, nil, func(n int, ends bool) { frames += n; lastEnds = ends })
			dstA.Close()
		}()
		go func() {
			n := max(int(step), 1)
			for rest := data; len(rest) > 0; {
				k := min(n, len(rest))
				if _, err := srcA.Write(rest[:k]); err != nil {
					return
				}
				rest = rest[k:]
			}
			srcA.Close()
		}()
		got, _ := io.ReadAll(dstB)
		if s := <-done; s != clientSide {
			t.Fatalf("pump ended on side %d, want the source's", s)
		}
		if !bytes.Equal(got, data) {
			t.Fatalf("copied %q, want %q", got, data)
		}
		if want := bytes.Count(data, []byte{luxi.ETX}); frames != want {
			t.Fatalf("counted %d message ends, want %d", frames, want)
		}
		if len(data) > 0 && lastEnds != (data[len(data)-1] == luxi.ETX) {
			t.Fatalf("last chunk ends a message: %v", lastEnds)
		}
	})
}

// BenchmarkForwardCall measures one small call relayed by a standby to the
// master over TLS, on an open connection.
func BenchmarkForwardCall(b *testing.B) {
	dir := masterState(b, newCA(b, "c1"))
	addr, _ := fakeMaster(b, dir, newEcho())
	_, cfg, err := forwardTLS(dir)
	if err != nil {
		b.Fatal(err)
	}
	fw := &forwarder{self: "node2", tls: cfg, log: quiet, grace: forwardGrace,
		leader: func(context.Context) (election.Leader, error) {
			return election.Leader{Name: "node1", Address: addr}, nil
		}}
	tmp, err := os.MkdirTemp("", "crl")
	if err != nil {
		b.Fatal(err)
	}
	defer os.RemoveAll(tmp)
	sock := filepath.Join(tmp, "s")
	ctx := serveLuxi(b, luxi.NewServer(luxi.HandlerFunc(func(context.Context, string, []json.RawMessage) (any, error) {
		return nil, errors.New("not relayed")
	}), luxi.ServerOptions{Path: sock, Divert: fw.divert}))
	c, err := luxi.Dial(ctx, sock)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	for b.Loop() {
		var out []any
		if err := c.Call(ctx, "QueryJobs", []any{1}, &out); err != nil {
			b.Fatal(err)
		}
	}
}

// While no master can be reached, a standby serves a connection itself
// under the LUXI server's timeouts: a client that sends nothing is closed
// after the idle timeout, one that stops in the middle of a request after
// the frame timeout.
func TestForwardStandbyConnectionTimeouts(t *testing.T) {
	f := &forwarder{idle: 300 * time.Millisecond, frame: 300 * time.Millisecond}
	sock, _ := forwardRigAt(t, f, func(string) func(context.Context) (election.Leader, error) {
		return func(context.Context) (election.Leader, error) { return election.Leader{}, election.ErrNoLeader }
	})
	for _, sent := range []string{"", `{"method":"QueryJobs","ar`} {
		nc, err := net.Dial("unix", sock)
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		if _, err := io.WriteString(nc, sent); err != nil {
			t.Fatal(err)
		}
		_ = nc.SetReadDeadline(time.Now().Add(testWait))
		start := time.Now()
		if n, err := nc.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
			t.Fatalf("sent %q: read %d, %v; want the standby to close the connection", sent, n, err)
		}
		if time.Since(start) >= testWait {
			t.Fatalf("sent %q: not closed before the test's own limit", sent)
		}
	}
}
