package luxi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"os/user"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/corral/corral/internal/ecode"
)

// Handler runs the calls a Server receives.
type Handler interface {
	// Call runs one method. args are the positional arguments, undecoded. A
	// returned *ecode.Error is sent as the encoded exception; any other error
	// as ["GenericError", [msg]]. ctx is cancelled when the client disconnects
	// or the server stops.
	Call(ctx context.Context, method string, args []json.RawMessage) (any, error)
}

// HandlerFunc adapts a function to Handler.
type HandlerFunc func(ctx context.Context, method string, args []json.RawMessage) (any, error)

// Call calls f.
func (f HandlerFunc) Call(ctx context.Context, method string, args []json.RawMessage) (any, error) {
	return f(ctx, method, args)
}

// ServerOptions configure a Server. Zero values take the documented defaults.
type ServerOptions struct {
	Path  string      // socket path (at most MaxSocketPath bytes)
	Mode  os.FileMode // default 0660
	Group string      // chown the socket to this group if set; an unknown group is an error
	// MaxConns bounds the connections served at once; connections beyond
	// are answered with an error and closed. 0 = derived from
	// RLIMIT_NOFILE (ConnLimit); a larger value than that is clamped to
	// it, with a warning, as each connection holds a descriptor.
	MaxConns int
	// AdminConns is a reserve of connections beyond MaxConns for peers on
	// a unix socket whose uid is root or the server's own, so that an
	// operator gets in while other clients hold every normal slot.
	// 0 = DefaultAdminConns (less if the descriptor limit is tiny);
	// < 0 = none.
	AdminConns int
	// DescriptorsPerConn is how many descriptors one connection holds when
	// MaxConns is derived (default 1; a standby relaying each connection
	// to the master holds 2).
	DescriptorsPerConn int
	// ShareLimits, when set, makes this server count its connections and
	// request memory together with that server's, under that server's
	// limits (MaxConns, AdminConns and FrameMemory here are then unused):
	// servers of one process share its descriptors and memory.
	ShareLimits     *Server
	MaxMessageBytes int // default 16 MiB; a larger request gets an error reply and the connection is closed
	// FrameMemory bounds the memory all connections together hold in
	// requests being received and in long ones waiting to run; a request
	// that would exceed it gets an error reply and its connection is
	// closed. 0 = max(DefaultFrameMemory, 4×MaxMessageBytes); < 0 = none.
	FrameMemory int64
	// FrameTimeout bounds how long a request may take to arrive once its
	// first byte has: a client that stops in the middle gets an error
	// reply and is closed. 0 = DefaultFrameTimeout; < 0 = none.
	FrameTimeout time.Duration
	// IdleTimeout closes a connection with no call in progress and no
	// request arriving for this long (a call such as WaitForJobChange
	// that runs longer is not idleness). 0 = DefaultIdleTimeout; < 0 = none.
	IdleTimeout time.Duration
	Logger      *slog.Logger // default: discard
	// Divert, when set, is offered each accepted connection first, in the
	// connection's own goroutine: when it returns true it has served and
	// closed the connection itself (a standby relaying it to the master),
	// otherwise the server serves it as usual. ctx ends when Serve stops,
	// and Serve waits for Divert to return.
	Divert func(ctx context.Context, nc net.Conn) bool
}

// Defaults and limits.
const (
	DefaultMode            os.FileMode = 0o660
	DefaultMaxMessageBytes             = 16 << 20
	// MaxSocketPath is the longest usable unix socket path: sun_path holds
	// 108 bytes including the terminating NUL.
	MaxSocketPath = 107
)

const (
	// readBufSize is the buffer a connection borrows while a message is
	// arriving; idle connections hold none.
	readBufSize = 16 << 10
	// maxPipeline bounds the requests one connection may have queued ahead
	// of their replies, so a pipelining client cannot make us buffer
	// without limit.
	maxPipeline = 32
	// writeTimeout matches Ganeti's LUXI read/write timeout: a client that
	// stops reading its replies is dropped after this long.
	writeTimeout = 180 * time.Second
	// rejectTimeout bounds the error reply sent to connections over MaxConns.
	rejectTimeout = time.Second
)

// Server accepts LUXI connections on a unix socket and hands each call to a
// Handler. Each connection has one goroutine reading its messages in order;
// while calls are in progress a worker from a pool runs them one after
// another and writes the replies in request order.
type Server struct {
	h       Handler
	opts    ServerOptions
	log     *slog.Logger
	bufs    sync.Pool // *[readBufSize]byte, lent to connections while a message arrives
	replies sync.Pool // *replyBuf
	workers workerPool
	lim     *limits // shared with other servers (ShareLimits)
	clamped int     // the MaxConns asked for when it was clamped, else 0
	conns   atomic.Int64
	started atomic.Bool
	ready   chan struct{}
}

// NewServer returns a server for h; Serve starts it.
func NewServer(h Handler, opts ServerOptions) *Server {
	if opts.Mode == 0 {
		opts.Mode = DefaultMode
	}
	if opts.MaxMessageBytes <= 0 {
		opts.MaxMessageBytes = DefaultMaxMessageBytes
	}
	if opts.FrameTimeout == 0 {
		opts.FrameTimeout = DefaultFrameTimeout
	}
	if opts.IdleTimeout == 0 {
		opts.IdleTimeout = DefaultIdleTimeout
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Server{h: h, opts: opts, log: log, ready: make(chan struct{})}
	if opts.ShareLimits != nil {
		s.lim = opts.ShareLimits.lim
	} else {
		s.lim, s.clamped = resolveLimits(opts)
	}
	s.bufs.New = func() any { return new([readBufSize]byte) }
	s.replies.New = func() any {
		rb := &replyBuf{}
		rb.enc = json.NewEncoder(&rb.b)
		return rb
	}
	return s
}

// Addr returns the socket path.
func (s *Server) Addr() string { return s.opts.Path }

// ConnCount returns the number of connections being served (not counting
// those rejected over MaxConns).
func (s *Server) ConnCount() int { return int(s.conns.Load()) }

// MaxConns returns the effective connection limit, and the admin reserve
// beyond it.
func (s *Server) MaxConns() (normal, admin int) {
	return int(s.lim.maxConns), int(s.lim.adminConns)
}

// Ready is closed once Serve is listening, so callers can dial without
// polling.
func (s *Server) Ready() <-chan struct{} { return s.ready }

// Serve listens on the socket (removing a stale socket file left by a dead
// server first) and serves connections until ctx ends. It then closes the
// listener and every connection, cancels calls in progress, waits for them,
// and returns nil. Errors setting up the socket are returned at once.
func (s *Server) Serve(ctx context.Context) error {
	if !s.started.CompareAndSwap(false, true) {
		return errors.New("luxi: server already started")
	}
	ln, err := s.listen(ctx)
	if err != nil {
		return err
	}
	return s.serve(ctx, ln, s.opts.Path)
}

// ServeListener is Serve on a listener the caller made (a TLS listener for
// instance), which it closes when ctx ends. Path, Mode and Group are not
// used.
func (s *Server) ServeListener(ctx context.Context, ln net.Listener) error {
	if !s.started.CompareAndSwap(false, true) {
		ln.Close()
		return errors.New("luxi: server already started")
	}
	return s.serve(ctx, ln, ln.Addr().String())
}

func (s *Server) serve(ctx context.Context, ln net.Listener, where string) error {
	close(s.ready)
	s.logStart(where)
	stop := context.AfterFunc(ctx, func() { ln.Close() })
	defer stop()

	var wg sync.WaitGroup
	var backoff time.Duration
	for {
		nc, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil {
				break
			}
			if temporaryAcceptError(err) {
				// Out of descriptors or memory: wait rather than spin, as
				// connections closing will free them.
				backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
				s.log.Warn("LUXI accept failed, retrying", "err", err, "backoff", backoff)
				t := time.NewTimer(backoff)
				select {
				case <-ctx.Done():
				case <-t.C:
				}
				t.Stop()
				continue
			}
			ln.Close()
			wg.Wait()
			s.workers.close()
			return fmt.Errorf("luxi: accept on %s: %w", where, err)
		}
		backoff = 0
		if !s.lim.admit(func() bool { return adminPeer(nc) }) {
			wg.Go(func() { s.reject(nc) })
			continue
		}
		s.conns.Add(1)
		wg.Go(func() {
			defer s.lim.leave()
			defer s.conns.Add(-1)
			if s.opts.Divert != nil && s.opts.Divert(ctx, nc) {
				return
			}
			s.serveConn(ctx, nc)
		})
	}
	wg.Wait()
	s.workers.close()
	s.log.Info("LUXI server stopped", "path", where)
	return nil
}

// listen prepares and binds the socket with its mode and group.
func (s *Server) listen(ctx context.Context) (*net.UnixListener, error) {
	path := s.opts.Path
	if path == "" {
		return nil, errors.New("luxi: no socket path")
	}
	if len(path) > MaxSocketPath {
		return nil, fmt.Errorf("luxi: socket path %q is %d bytes, longer than the %d a unix socket allows; use a shorter run directory",
			path, len(path), MaxSocketPath)
	}
	gid := -1
	if s.opts.Group != "" {
		g, err := user.LookupGroup(s.opts.Group)
		if err != nil {
			return nil, fmt.Errorf("luxi: socket group %q: %w", s.opts.Group, err)
		}
		if gid, err = strconv.Atoi(g.Gid); err != nil {
			return nil, fmt.Errorf("luxi: socket group %q has non-numeric gid %q", s.opts.Group, g.Gid)
		}
	}
	if err := removeStaleSocket(ctx, path); err != nil {
		return nil, err
	}
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("luxi: listen on %s: %w", path, err)
	}
	// The socket exists with umask permissions until the chmod; with the
	// usual umask nobody else can connect during that window (connecting
	// needs write permission).
	if err := os.Chmod(path, s.opts.Mode); err != nil {
		ln.Close()
		return nil, fmt.Errorf("luxi: chmod %s: %w", path, err)
	}
	if gid >= 0 {
		if err := os.Chown(path, -1, gid); err != nil {
			ln.Close()
			return nil, fmt.Errorf("luxi: chown %s to group %q: %w", path, s.opts.Group, err)
		}
	}
	return ln, nil
}

// removeStaleSocket deletes a socket file nobody listens on any more. It
// refuses to touch anything else: a regular file at the path, or a socket a
// running server still answers on.
func removeStaleSocket(ctx context.Context, path string) error {
	fi, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("luxi: %w", err)
	}
	if fi.Mode().Type() != fs.ModeSocket {
		return fmt.Errorf("luxi: %s exists and is not a socket", path)
	}
	dctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	var d net.Dialer
	if c, err := d.DialContext(dctx, "unix", path); err == nil {
		c.Close()
		return fmt.Errorf("luxi: %s: another server is listening on it", path)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("luxi: removing stale socket: %w", err)
	}
	return nil
}

func temporaryAcceptError(err error) bool {
	for _, e := range []error{syscall.EMFILE, syscall.ENFILE, syscall.ENOBUFS, syscall.ENOMEM, syscall.ECONNABORTED} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// logStart logs the server's address and effective limits, and warns of
// a connection limit clamped to what the descriptor limit allows.
func (s *Server) logStart(where string) {
	if s.clamped > 0 {
		s.log.Warn("LUXI connection limit lowered to what the descriptor limit allows (raise LimitNOFILE to allow more)",
			"asked", s.clamped, "max_connections", s.lim.maxConns, "nofile", s.lim.nofile)
	}
	s.log.Info("LUXI server listening", "path", where,
		"max_connections", s.lim.maxConns, "admin_connections", s.lim.adminConns, "nofile", s.lim.nofile,
		"idle_timeout", s.opts.IdleTimeout, "frame_timeout", s.opts.FrameTimeout,
		"max_message_bytes", s.opts.MaxMessageBytes, "request_memory", s.lim.frames.limit)
}

// reject answers a connection over the limit with an error and closes it.
func (s *Server) reject(nc net.Conn) {
	defer nc.Close()
	s.log.Warn("LUXI connection rejected: too many connections", "limit", s.lim.maxConns)
	msg := encodeFailure(ecode.New(ecode.LuxiError, ecode.TempNoRes,
		fmt.Sprintf("too many connections (limit %d)", s.lim.maxConns)))
	_ = nc.SetWriteDeadline(time.Now().Add(rejectTimeout))
	_ = WriteFrame(nc, msg)
}

// call runs one method and encodes its reply, ETX included. The reply is
// rb's bytes when rb is not nil; hand rb back with putReply once written.
// Only the method name is logged: arguments and results may carry secrets.
func (s *Server) call(ctx context.Context, method string, args []json.RawMessage) (reply []byte, rb *replyBuf) {
	var start time.Time
	debug := s.log.Enabled(ctx, slog.LevelDebug)
	if debug {
		start = time.Now()
	}
	defer func() {
		if r := recover(); r != nil {
			s.log.Error("LUXI handler panicked", "method", method, "panic", r)
			s.putReply(rb)
			reply, rb = failureFrame(ecode.New(ecode.ProgrammerError, ecode.Fault,
				fmt.Sprintf("internal error while running %s", method))), nil
		}
	}()
	result, err := s.h.Call(ctx, method, args)
	if err != nil {
		if debug {
			s.log.Debug("LUXI call failed", "method", method, "duration", time.Since(start), "kind", errKind(err))
		}
		return failureFrame(err), nil
	}
	rb = s.replies.Get().(*replyBuf)
	if err := rb.success(result); err != nil {
		s.putReply(rb)
		s.log.Error("LUXI result not encodable", "method", method, "err", err)
		return failureFrame(ecode.New(ecode.GenericError, ecode.Fault,
			fmt.Sprintf("cannot encode the result of %s", method))), nil
	}
	if debug {
		s.log.Debug("LUXI call", "method", method, "duration", time.Since(start))
	}
	return rb.b.Bytes(), rb
}

// maxPooledReply bounds the reply buffers kept for reuse, so that one huge
// query answer does not stay allocated.
const maxPooledReply = 64 << 10

func (s *Server) putReply(rb *replyBuf) {
	if rb != nil && rb.b.Cap() <= maxPooledReply {
		s.replies.Put(rb)
	}
}

func errKind(err error) string {
	if e, ok := ecode.As(err); ok {
		return string(e.Kind)
	}
	return string(ecode.GenericError)
}

// conn is one client connection.
type conn struct {
	s      *Server
	nc     net.Conn
	rc     syscall.RawConn // nc's descriptor; nil if it has none (then nc.Read and nc.Write serve)
	ctx    context.Context
	cancel context.CancelFunc

	in    inbox
	first [1]byte // without rc: the first byte of a message, read without a buffer
	// Raw I/O callbacks, bound once, and their state.
	readFn, writeFn func(fd uintptr) bool
	shortReadDrains bool // a read shorter than asked empties the socket (unix stream)
	gone            bool // why reading stopped: the client left (else a protocol error)
	werr            error
	out             []byte // what writeFn has yet to write

	// Timeouts, owned by the reader: see onDeadline.
	deadline   time.Time // the read deadline set (zero: none)
	frameStart time.Time // when the pending message began to arrive

	slots chan struct{}

	mu        sync.Mutex
	queue     []queued
	running   bool      // a worker is draining queue
	idleSince time.Time // when the last call ended (or the connection began)
	worker    sync.WaitGroup
}

// queued is a request waiting for its turn, or (reply set) a final error
// reply, ETX included, after which the connection closes. cost is the
// request memory budget its message holds until it has run.
type queued struct {
	method string
	args   []json.RawMessage
	reply  []byte
	cost   int64
}

func (s *Server) serveConn(ctx context.Context, nc net.Conn) {
	cctx, cancel := context.WithCancel(WithPeer(ctx, peerOf(nc)))
	c := &conn{s: s, nc: nc, ctx: cctx, cancel: cancel, slots: make(chan struct{}, maxPipeline)}
	c.in = inbox{pool: &s.bufs, max: s.opts.MaxMessageBytes, budget: &s.lim.frames}
	if sc, ok := nc.(syscall.Conn); ok {
		if rc, err := sc.SyscallConn(); err == nil {
			c.rc, c.readFn, c.writeFn = rc, c.onReadable, c.tryWrite
			_, c.shortReadDrains = nc.(*net.UnixConn)
		}
	}
	// Closing the socket is how a cancelled connection unblocks its reader
	// and writer; AfterFunc costs no goroutine until it fires.
	stop := context.AfterFunc(cctx, func() { nc.Close() })
	defer stop()

	if clientGone := c.readLoop(); clientGone {
		c.cancel()
	}
	c.worker.Wait()
	c.cancel()
	nc.Close()
}

// readLoop reads requests until the client goes away, sends something it
// must not or times out. It reports whether the client disconnected (or
// idled out: calls in progress are then pointless), as opposed to a
// protocol error whose pending replies, and the error reply, must still go
// out.
func (c *conn) readLoop() (clientGone bool) {
	defer c.in.drop()
	c.startTimeouts()
	for {
		var err error
		if c.rc == nil {
			err = c.readConn()
		} else {
			// One raw read operation at a time: see onReadable.
			c.gone = true
			err = c.rc.Read(c.readFn)
		}
		if !errors.Is(err, os.ErrDeadlineExceeded) {
			return err != nil || c.gone
		}
		if !c.onDeadline() {
			return c.gone
		}
	}
}

// onReadable is the connection's read loop, run by the runtime poller: it
// is called once at the start and then each time the socket becomes
// readable, and returning false waits for that. It reads straight into
// the inbox and hands complete messages to deliver.
//
// Go's net package reads until EAGAIN before it waits, because each Read
// call forgets readiness reported earlier. Staying inside one raw read
// keeps that readiness, so after a read that did not fill the buffer (a
// unix stream socket then has nothing more queued) it waits at once: one
// read(2) per request instead of two. The buffer goes back to the pool
// before each wait when no message is pending.
func (c *conn) onReadable(fd uintptr) bool {
	for {
		wasPending := c.in.pending()
		space := c.in.space()
		n, err := syscall.Read(int(fd), space)
		switch {
		case err == syscall.EINTR:
			continue
		case err == syscall.EAGAIN:
			c.in.release()
			return false
		case err != nil || n <= 0:
			c.gone = true // a read error, or EOF
			return true
		}
		c.in.commit(n)
		delivered, keep := c.deliver()
		if !keep {
			return true
		}
		if c.in.pending() && (!wasPending || delivered > 0) {
			c.frameBegan()
		}
		if n < len(space) && c.shortReadDrains {
			c.in.release()
			return false
		}
	}
}

// readConn is the read loop for connections without a descriptor: plain
// Reads, the first byte of each message without a buffer. It returns nil
// when reading must stop (c.gone tells why), or the read error.
func (c *conn) readConn() error {
	for {
		wasPending := c.in.pending()
		var n int
		var err error
		if !wasPending {
			if n, err = c.nc.Read(c.first[:]); n > 0 {
				c.in.space()[0] = c.first[0]
			}
		} else {
			n, err = c.nc.Read(c.in.space())
		}
		if n == 0 {
			if err != nil {
				return err
			}
			continue
		}
		c.in.commit(n)
		delivered, keep := c.deliver()
		if !keep {
			return nil
		}
		if c.in.pending() && (!wasPending || delivered > 0) {
			c.frameBegan()
		}
	}
}

// deliver decodes the complete messages in the inbox and queues them,
// reporting how many. keep is false when reading must stop, with c.gone
// telling whether the client left or broke the protocol.
func (c *conn) deliver() (delivered int, keep bool) {
	s := c.s
	for {
		msg, cost, ok, err := c.in.next()
		if err != nil {
			c.refuseRequest(err)
			return delivered, false
		}
		if !ok {
			return delivered, true
		}
		method, args, err := decodeCall(msg)
		if err != nil {
			s.lim.frames.give(cost)
			s.log.Warn("LUXI malformed request, closing connection", "err", err)
			c.enqueue(queued{reply: failureFrame(ecode.New(ecode.LuxiError, ecode.Inval, err.Error()))})
			c.gone = false
			return delivered, false
		}
		if !c.enqueue(queued{method: method, args: args, cost: cost}) {
			s.lim.frames.give(cost)
			c.gone = true
			return delivered, false
		}
		delivered++
	}
}

// refuseRequest answers a request the inbox refused (too large, or over
// the memory budget) with an error, after the replies before it.
func (c *conn) refuseRequest(err error) {
	s := c.s
	var e *ecode.Error
	if errors.Is(err, ErrFrameBudget) {
		s.log.Warn("LUXI request refused: the memory for requests being received is exhausted, closing connection",
			"request_memory", s.lim.frames.limit)
		e = ecode.New(ecode.LuxiError, ecode.TempNoRes, fmt.Sprintf(
			"the server is receiving too many large requests at once (budget %d bytes); retry later", s.lim.frames.limit))
	} else {
		s.log.Warn("LUXI request too large, closing connection", "limit", s.opts.MaxMessageBytes)
		e = ecode.New(ecode.LuxiError, ecode.Inval, fmt.Sprintf("request exceeds %d bytes", s.opts.MaxMessageBytes))
	}
	c.enqueue(queued{reply: failureFrame(e)})
	c.gone = false
}

// enqueue adds a request behind those in progress, handing the connection
// to a worker if none runs. It blocks while maxPipeline requests await
// replies, and reports false if the connection ended meanwhile.
func (c *conn) enqueue(q queued) bool {
	select {
	case c.slots <- struct{}{}:
	case <-c.ctx.Done():
		return false
	}
	c.mu.Lock()
	c.queue = append(c.queue, q)
	start := !c.running
	if start {
		c.running = true
		c.worker.Add(1)
	}
	c.mu.Unlock()
	if start {
		c.s.workers.run(c)
	}
	return true
}

// drain runs queued requests in order and writes their replies. It returns
// when the queue is empty, so an idle connection keeps only its reader
// goroutine; after it returns the worker must not touch c.
func (c *conn) drain() {
	for {
		c.mu.Lock()
		if len(c.queue) == 0 {
			if cap(c.queue) > 2 {
				c.queue = nil // drop an array a burst of pipelined requests grew
			}
			c.running = false
			if c.s.opts.IdleTimeout > 0 {
				c.idleSince = time.Now()
			}
			c.mu.Unlock()
			c.worker.Done()
			return
		}
		// Shift rather than reslice, so that the array is reused: at
		// most maxPipeline requests wait.
		q := c.queue[0]
		n := copy(c.queue, c.queue[1:])
		c.queue[n] = queued{}
		c.queue = c.queue[:n]
		c.mu.Unlock()

		reply, final := q.reply, q.reply != nil
		var rb *replyBuf
		if !final && c.ctx.Err() == nil {
			reply, rb = c.s.call(c.ctx, q.method, q.args)
		}
		c.s.lim.frames.give(q.cost)
		if reply != nil && c.ctx.Err() == nil {
			if err := c.write(reply); err != nil {
				c.s.log.Debug("LUXI reply not delivered", "method", q.method, "err", err)
				c.cancel()
			}
		}
		c.s.putReply(rb)
		<-c.slots
		if final {
			// Stop before anything else queued: the connection is closing.
			c.cancel()
		}
	}
}

// write sends one reply (ETX included). The first attempt writes without
// a deadline, which costs a timer; only a client too slow to take the
// reply at once gets one, and is dropped after writeTimeout.
func (c *conn) write(msg []byte) error {
	if i := bytes.IndexByte(msg[:len(msg)-1], ETX); i >= 0 {
		return errors.New("luxi: message contains the ETX delimiter")
	}
	if c.rc != nil {
		c.out, c.werr = msg, nil
		err := c.rc.Write(c.writeFn)
		msg, c.out = c.out, nil
		if err != nil {
			return err
		}
		if c.werr != nil {
			return c.werr
		}
		if len(msg) == 0 {
			return nil
		}
	}
	_ = c.nc.SetWriteDeadline(time.Now().Add(writeTimeout))
	_, err := c.nc.Write(msg)
	_ = c.nc.SetWriteDeadline(time.Time{})
	return err
}

// tryWrite writes as much of c.out as the socket takes without waiting.
func (c *conn) tryWrite(fd uintptr) bool {
	for len(c.out) > 0 {
		n, err := syscall.Write(int(fd), c.out)
		if n > 0 {
			c.out = c.out[n:]
		}
		switch err {
		case nil:
		case syscall.EINTR:
		case syscall.EAGAIN:
			return true
		default:
			c.werr = err
			return true
		}
	}
	return true
}
