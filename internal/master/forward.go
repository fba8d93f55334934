package master

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/corral/corral/internal/ecode"
	"github.com/corral/corral/internal/election"
	"github.com/corral/corral/internal/forwardtls"
	"github.com/corral/corral/internal/luxi"
	"github.com/corral/corral/internal/store"
)

// Forwarding lets every master candidate's LUXI socket serve the cluster:
// the elected master also serves LUXI over mutual TLS on its forward
// address, which it publishes in the election record, and a standby relays
// each connection on its socket, byte for byte, to that address. Both ends
// use the cluster CA and the master certificate in the master state
// directory, which every master candidate holds (as Ganeti copies its
// server certificate to every candidate); forwardtls.Configs says what
// each end accepts.

const (
	// forwardDialTimeout bounds connecting to the master, handshake
	// included.
	forwardDialTimeout = forwardtls.DialTimeout
	// forwardHandshakeTimeout bounds a client's TLS handshake on the
	// master's forward listener.
	forwardHandshakeTimeout = 10 * time.Second
	// forwardGrace is how long a standby that stops relaying (it has won
	// the election, or is shutting down) lets the replies of calls in
	// progress through before failing them.
	forwardGrace = 2 * time.Second
	// forwardErrorTimeout bounds writing the error replies for calls a
	// broken master connection left without an answer.
	forwardErrorTimeout = 2 * time.Second
	// relayBuf is the copy buffer of each direction of a relayed
	// connection.
	relayBuf = 32 << 10
)

// forwardTLS builds the master's server and the standby's client
// configurations from the master state directory.
func forwardTLS(stateDir string) (server, client *tls.Config, err error) {
	return forwardtls.Configs(stateDir)
}

// candidateAddress is what this candidate publishes in the election
// record: with forwarding, the address standbys dial (the forward address,
// or CandidateAddress when the listener is on a wildcard address); without
// it, CandidateAddress or the LUXI socket, for the operator to read.
func candidateAddress(opts Options) (string, error) {
	if opts.ForwardAddress == "" {
		if opts.CandidateAddress != "" {
			return opts.CandidateAddress, nil
		}
		return opts.SocketPath, nil
	}
	host, _, err := net.SplitHostPort(opts.ForwardAddress)
	if err != nil {
		return "", fmt.Errorf("forward address %q: %w", opts.ForwardAddress, err)
	}
	if opts.CandidateAddress != "" {
		if !forwardable(opts.CandidateAddress) {
			return "", fmt.Errorf("candidate address %q: with a forward address it must be the HOST:PORT where the other candidates reach it", opts.CandidateAddress)
		}
		return opts.CandidateAddress, nil
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		return "", fmt.Errorf("forward address %q listens on every address: give the candidate address (HOST:PORT) the other candidates should dial", opts.ForwardAddress)
	}
	return opts.ForwardAddress, nil
}

// forwardable reports whether a master's published address is a forward
// address (HOST:PORT) rather than a socket path from a master that does
// not forward.
func forwardable(addr string) bool {
	if strings.HasPrefix(addr, "/") {
		return false
	}
	host, port, err := net.SplitHostPort(addr)
	return err == nil && host != "" && port != ""
}

func dialForward(ctx context.Context, cfg *tls.Config, addr string) (net.Conn, error) {
	return forwardtls.Dial(ctx, cfg, addr)
}

// tlsListener is the master's forward listener: TLS over TCP, each
// connection's handshake done (and bounded) in the connection's own
// goroutine.
type tlsListener struct {
	net.Listener
	cfg *tls.Config
	log *slog.Logger
}

func (l tlsListener) Accept() (net.Conn, error) {
	nc, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &handshakeConn{Conn: tls.Server(nc, l.cfg), log: l.log}, nil
}

// handshakeConn completes its handshake, bounded, on its first Read, so a
// peer that stalls or presents a refused certificate costs only its own
// goroutine and leaves a log line.
type handshakeConn struct {
	*tls.Conn
	log  *slog.Logger
	once sync.Once
	err  error
}

func (c *handshakeConn) Read(b []byte) (int, error) {
	c.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), forwardHandshakeTimeout)
		defer cancel()
		if c.err = c.Conn.HandshakeContext(ctx); c.err != nil {
			c.log.Warn("forward listener: connection refused", "peer", c.RemoteAddr().String(), "err", c.err)
		}
	})
	if c.err != nil {
		return 0, c.err
	}
	return c.Conn.Read(b)
}

// forwarder is a standby's relay: each connection on its LUXI socket goes
// to the current master over one TLS connection of its own, so requests
// keep their order and long polls their semantics. It never reads what it
// relays beyond counting message ends, which tells whether a call is in
// progress when the master connection breaks. Whether to relay is decided
// per request: while no master can be reached each request is answered with
// the standby error, and the first request that finds a master moves the
// whole connection to it, so a client's connection accepted during a
// failover starts working as soon as the new master serves.
type forwarder struct {
	leader  func(ctx context.Context) (election.Leader, error)
	standby func(ctx context.Context) error // the error a request gets while no master is reached
	self    string                          // this candidate's name: never relay to oneself
	tls     *tls.Config
	log     *slog.Logger
	grace   time.Duration
	// maxRequest bounds a request read while no master is reached; idle
	// and frame bound the wait for it and its arrival, as the LUXI
	// server's IdleTimeout and FrameTimeout do (<= 0: none).
	maxRequest  int
	idle, frame time.Duration
	// lastWarn rate-limits the warning about an unreachable master (unix
	// nanoseconds).
	lastWarn atomic.Int64
}

func newForwarder(opts Options, st store.Store, self string) (*forwarder, error) {
	_, cfg, err := forwardTLS(opts.StateDir)
	if err != nil {
		return nil, err
	}
	return &forwarder{
		leader:  func(ctx context.Context) (election.Leader, error) { return election.CurrentLeader(ctx, st, "") },
		standby: func(ctx context.Context) error { return standbyError(ctx, st) },
		self:    self, tls: cfg, log: opts.Logger, grace: forwardGrace, maxRequest: opts.MaxMessageBytes,
		idle: orDefault(opts.LUXIIdleTimeout, luxi.DefaultIdleTimeout), frame: orDefault(opts.LUXIFrameTimeout, luxi.DefaultFrameTimeout),
	}, nil
}

// forwardWarnEvery bounds how often a standby logs that it cannot reach
// the master: during a failover every request would.
const forwardWarnEvery = 5 * time.Second

// dialMaster connects to the current master, or reports false when there
// is none to relay to (none elected, this candidate, a master that does not
// forward, or one that cannot be reached).
func (f *forwarder) dialMaster(ctx context.Context) (election.Leader, net.Conn, bool) {
	lctx, cancel := context.WithTimeout(ctx, forwardDialTimeout)
	l, err := f.leader(lctx)
	cancel()
	if err != nil || l.Name == f.self || !forwardable(l.Address) {
		return l, nil, false
	}
	up, err := dialForward(ctx, f.tls, l.Address)
	if err != nil {
		now := time.Now().UnixNano()
		if last := f.lastWarn.Load(); now-last >= int64(forwardWarnEvery) && f.lastWarn.CompareAndSwap(last, now) {
			f.log.Warn("standby: cannot forward LUXI requests to the master", "master", l.Name, "err", err)
		}
		return l, nil, false
	}
	return l, up, true
}

// divert serves nc and reports true (the luxi server then leaves it
// alone): relayed to the master from the first request that finds one,
// each earlier request answered with the standby error. When ctx ends
// (the standby stops) a connection not yet relayed is closed.
func (f *forwarder) divert(ctx context.Context, nc net.Conn) bool {
	stop := context.AfterFunc(ctx, func() { _ = nc.SetReadDeadline(time.Unix(1, 0)) })
	defer stop()
	br := bufio.NewReaderSize(nc, 4<<10)
	var pending []byte // a request read while no master was reached
	for ctx.Err() == nil {
		if l, up, ok := f.dialMaster(ctx); ok {
			f.relay(ctx, &prefixedConn{Conn: nc, r: io.MultiReader(bytes.NewReader(pending), br)}, up, l)
			return true
		}
		if pending != nil {
			if err := f.answerStandby(ctx, nc); err != nil {
				break
			}
		}
		var tooBig bool
		pending, tooBig = f.readRequest(ctx, nc, br)
		if tooBig {
			_ = nc.SetWriteDeadline(time.Now().Add(forwardErrorTimeout))
			_ = luxi.WriteFrame(nc, luxi.EncodeFailure(ecode.New(ecode.LuxiError, ecode.Inval,
				fmt.Sprintf("request exceeds %d bytes", f.maxRequestBytes()))))
			break
		}
		if pending == nil {
			break // the client left
		}
	}
	nc.Close()
	return true
}

// orDefault is d, or def when d is 0 (a negative d means none).
func orDefault(d, def time.Duration) time.Duration {
	if d == 0 {
		return def
	}
	return d
}

// readRequest waits, up to the idle timeout, for the client's next request
// and reads it, up to the frame timeout once its first byte came.
func (f *forwarder) readRequest(ctx context.Context, nc net.Conn, br *bufio.Reader) (req []byte, tooBig bool) {
	f.readDeadline(ctx, nc, f.idle)
	if _, err := br.Peek(1); err != nil {
		return nil, false
	}
	f.readDeadline(ctx, nc, f.frame)
	req, tooBig = readRequest(br, f.maxRequestBytes())
	f.readDeadline(ctx, nc, 0)
	return req, tooBig
}

// readDeadline sets nc's read deadline d from now (none for d <= 0),
// unless ctx has ended: then the deadline stays in the past, as divert's
// AfterFunc set it, so a stopping standby never waits for a read.
func (f *forwarder) readDeadline(ctx context.Context, nc net.Conn, d time.Duration) {
	t := time.Time{}
	if d > 0 {
		t = time.Now().Add(d)
	}
	_ = nc.SetReadDeadline(t)
	if ctx.Err() != nil {
		_ = nc.SetReadDeadline(time.Unix(1, 0))
	}
}

func (f *forwarder) maxRequestBytes() int {
	if f.maxRequest <= 0 {
		return luxi.DefaultMaxMessageBytes
	}
	return f.maxRequest
}

// answerStandby writes the standby error as the reply of one request.
func (f *forwarder) answerStandby(ctx context.Context, nc net.Conn) error {
	var err error
	if f.standby != nil {
		err = f.standby(ctx)
	}
	if err == nil {
		err = ecode.Errorf(ecode.State, "this corrald is a standby; no master is elected at the moment, retry shortly")
	}
	_ = nc.SetWriteDeadline(time.Now().Add(forwardErrorTimeout))
	defer nc.SetWriteDeadline(time.Time{})
	return luxi.WriteFrame(nc, luxi.EncodeFailure(err))
}

// readRequest reads one request, its end marker included. It returns nil
// when the client left (or ctx cut the read) and tooBig when the request
// grew past max bytes.
func readRequest(br *bufio.Reader, max int) (req []byte, tooBig bool) {
	for {
		chunk, err := br.ReadSlice(luxi.ETX)
		if len(req)+len(chunk) > max {
			return nil, true
		}
		req = append(req, chunk...)
		switch {
		case err == nil:
			return req, false
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		default:
			return nil, false
		}
	}
}

// prefixedConn reads r (bytes a standby read before it found the master,
// then the rest of the connection) and otherwise is the client connection.
type prefixedConn struct {
	net.Conn
	r io.Reader
}

func (c *prefixedConn) Read(b []byte) (int, error) { return c.r.Read(b) }

// side names the end of a relayed connection that failed.
type side int

const (
	clientSide side = iota
	masterSide
)

// relay copies both ways between the client (down) and the master (up)
// until either leaves, then closes both. When the master's end breaks
// with calls unanswered, each gets an error reply, unless a reply was cut
// in the middle (the client then sees the connection close). When ctx
// ends, no further request is read; replies of calls in progress still
// pass for up to f.grace.
func (f *forwarder) relay(ctx context.Context, down, up net.Conn, l election.Leader) {
	var inflight atomic.Int64 // requests relayed whose reply has not come back
	var midReply atomic.Bool  // the client has part of a reply
	idle := make(chan struct{}, 1)
	fromClient := make(chan side, 1)
	fromMaster := make(chan side, 1)
	go func() {
		fromClient <- pump(up, down, clientSide, masterSide, func(frames int) { inflight.Add(int64(frames)) }, nil)
	}()
	go func() {
		fromMaster <- pump(down, up, masterSide, clientSide, nil, func(frames int, ends bool) {
			midReply.Store(!ends)
			if frames > 0 && inflight.Add(-int64(frames)) <= 0 {
				select {
				case idle <- struct{}{}:
				default:
				}
			}
		})
	}()

	clientDone, masterDone := false, false
	masterLost := false
	draining := false
	stopping := ctx.Done()
	var grace <-chan time.Time
loop:
	for {
		select {
		case s := <-fromClient:
			clientDone = true
			if s == masterSide {
				masterLost = true
				break loop
			}
			if !draining {
				break loop // the client left
			}
			// Draining: its reads were stopped on purpose.
		case s := <-fromMaster:
			masterDone = true
			if s == masterSide {
				masterLost = true
			}
			break loop
		case <-stopping:
			stopping = nil
			draining = true
			_ = down.SetReadDeadline(time.Unix(1, 0))
			if inflight.Load() <= 0 {
				break loop
			}
			t := time.NewTimer(f.grace)
			defer t.Stop()
			grace = t.C
		case <-idle:
			if draining && inflight.Load() <= 0 {
				break loop
			}
		case <-grace:
			masterLost = true
			break loop
		}
	}
	up.Close()
	if !masterDone {
		<-fromMaster
	}
	// Only now is this goroutine the client's one writer.
	if n := inflight.Load(); masterLost && n > 0 && !midReply.Load() {
		f.failCalls(down, int(n), l)
	}
	down.Close()
	if !clientDone {
		<-fromClient
	}
}

// failCalls answers n unanswered calls with the standby error.
func (f *forwarder) failCalls(down net.Conn, n int, l election.Leader) {
	f.log.Warn("standby: the connection to the master broke with calls in progress", "master", l.Name, "calls", n)
	msg := luxi.EncodeFailure(ecode.Errorf(ecode.Environ,
		"this corrald is a standby and lost its connection to the master %s at %s during the call: whether it took effect is unknown; check, then retry", l.Name, l.Address))
	_ = down.SetWriteDeadline(time.Now().Add(forwardErrorTimeout))
	for range n {
		if err := luxi.WriteFrame(down, msg); err != nil {
			return
		}
	}
}

// pump copies src to dst until one fails and returns the side that did
// (the source's when reading failed, the destination's when writing did).
// before runs ahead of each write with the number of message ends in it,
// after once it is written, with whether it ended on a message end.
func pump(dst, src net.Conn, srcSide, dstSide side, before func(frames int), after func(frames int, ends bool)) side {
	buf := make([]byte, relayBuf)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			chunk := buf[:n]
			frames := bytes.Count(chunk, []byte{luxi.ETX})
			if before != nil {
				before(frames)
			}
			if _, werr := dst.Write(chunk); werr != nil {
				return dstSide
			}
			if after != nil {
				after(frames, chunk[n-1] == luxi.ETX)
			}
		}
		if err != nil {
			return srcSide
		}
	}
}
