package luxi

import (
	"bufio"
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
	Path            string        // socket path (at most MaxSocketPath bytes)
	Mode            os.FileMode   // default 0660
	Group           string        // chown the socket to this group if set; an unknown group is an error
	MaxConns        int           // default 65536; connections beyond are answered with an error and closed
	MaxMessageBytes int           // default 16 MiB; a larger request gets an error reply and the connection is closed
	IdleTimeout     time.Duration // 0 = none; a connection with no call in progress is closed after this long
	Logger          *slog.Logger  // default: discard
}

// Defaults and limits.
const (
	DefaultMode            os.FileMode = 0o660
	DefaultMaxConns                    = 65536
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
// while calls are in progress a second goroutine runs them one after another
// and writes the replies in request order.
type Server struct {
	h       Handler
	opts    ServerOptions
	log     *slog.Logger
	readers sync.Pool // *bufio.Reader of readBufSize, lent to connections while a message arrives
	conns   atomic.Int64
	started atomic.Bool
	ready   chan struct{}
}

// NewServer returns a server for h; Serve starts it.
func NewServer(h Handler, opts ServerOptions) *Server {
	if opts.Mode == 0 {
		opts.Mode = DefaultMode
	}
	if opts.MaxConns <= 0 {
		opts.MaxConns = DefaultMaxConns
	}
	if opts.MaxMessageBytes <= 0 {
		opts.MaxMessageBytes = DefaultMaxMessageBytes
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Server{h: h, opts: opts, log: log, ready: make(chan struct{})}
	s.readers.New = func() any { return bufio.NewReaderSize(nil, readBufSize) }
	return s
}

// Addr returns the socket path.
func (s *Server) Addr() string { return s.opts.Path }

// ConnCount returns the number of connections being served (not counting
// those rejected over MaxConns).
func (s *Server) ConnCount() int { return int(s.conns.Load()) }

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
	close(s.ready)
	s.log.Info("LUXI server listening", "path", s.opts.Path)
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
			return fmt.Errorf("luxi: accept on %s: %w", s.opts.Path, err)
		}
		backoff = 0
		if s.conns.Load() >= int64(s.opts.MaxConns) {
			wg.Go(func() { s.reject(nc) })
			continue
		}
		s.conns.Add(1)
		wg.Go(func() {
			defer s.conns.Add(-1)
			s.serveConn(ctx, nc)
		})
	}
	wg.Wait()
	s.log.Info("LUXI server stopped", "path", s.opts.Path)
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

// reject answers a connection over the limit with an error and closes it.
func (s *Server) reject(nc net.Conn) {
	defer nc.Close()
	s.log.Warn("LUXI connection rejected: too many connections", "limit", s.opts.MaxConns)
	msg := encodeFailure(ecode.New(ecode.LuxiError, ecode.TempNoRes,
		fmt.Sprintf("too many connections (limit %d)", s.opts.MaxConns)))
	_ = nc.SetWriteDeadline(time.Now().Add(rejectTimeout))
	_ = WriteFrame(nc, msg)
}

// call runs one method and encodes its reply. Only the method name is
// logged: arguments and results may carry secrets.
func (s *Server) call(ctx context.Context, method string, args []json.RawMessage) (reply []byte) {
	start := time.Now()
	defer func() {
		if r := recover(); r != nil {
			s.log.Error("LUXI handler panicked", "method", method, "panic", r)
			reply = encodeFailure(ecode.New(ecode.ProgrammerError, ecode.Fault,
				fmt.Sprintf("internal error while running %s", method)))
		}
	}()
	result, err := s.h.Call(ctx, method, args)
	if err != nil {
		s.log.Debug("LUXI call failed", "method", method, "duration", time.Since(start), "kind", errKind(err))
		return encodeFailure(err)
	}
	out, err := encodeSuccess(result)
	if err != nil {
		s.log.Error("LUXI result not encodable", "method", method, "err", err)
		return encodeFailure(ecode.New(ecode.GenericError, ecode.Fault,
			fmt.Sprintf("cannot encode the result of %s", method)))
	}
	s.log.Debug("LUXI call", "method", method, "duration", time.Since(start))
	return out
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
	ctx    context.Context
	cancel context.CancelFunc

	first [1]byte      // the first byte of the next message, read without a buffer
	pre   prefixReader // feeds first, then nc, to a borrowed bufio.Reader
	slots chan struct{}

	mu      sync.Mutex
	queue   []queued
	running bool // a worker goroutine is draining queue
	worker  sync.WaitGroup
}

// queued is a request waiting for its turn, or (reply set) a final error
// reply after which the connection closes.
type queued struct {
	method string
	args   []json.RawMessage
	reply  []byte
}

func (s *Server) serveConn(ctx context.Context, nc net.Conn) {
	cctx, cancel := context.WithCancel(ctx)
	c := &conn{s: s, nc: nc, ctx: cctx, cancel: cancel, slots: make(chan struct{}, maxPipeline)}
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

// readLoop reads requests until the client goes away or sends something it
// must not. It reports whether the client disconnected (calls in progress
// are then pointless), as opposed to a protocol error whose pending replies,
// and the error reply, must still go out.
func (c *conn) readLoop() (clientGone bool) {
	s := c.s
	var br *bufio.Reader
	defer func() {
		if br != nil {
			s.putReader(br)
		}
	}()
	for {
		if br == nil {
			// Idle: wait for the next message without holding a buffer.
			c.armReadDeadline()
			n, err := c.nc.Read(c.first[:])
			if n == 0 {
				if err != nil {
					return true
				}
				continue
			}
			// The rest of the message gets its own idle allowance.
			c.armReadDeadline()
			c.pre = prefixReader{b: c.first[0], has: true, r: c.nc}
			br = s.readers.Get().(*bufio.Reader)
			br.Reset(&c.pre)
		}
		msg, err := ReadFrame(br, s.opts.MaxMessageBytes)
		if err != nil {
			if errors.Is(err, ErrFrameTooLarge) {
				s.log.Warn("LUXI request too large, closing connection", "limit", s.opts.MaxMessageBytes)
				c.enqueue(queued{reply: encodeFailure(ecode.New(ecode.LuxiError, ecode.Inval,
					fmt.Sprintf("request exceeds %d bytes", s.opts.MaxMessageBytes)))})
				return false
			}
			return true
		}
		if br.Buffered() == 0 {
			s.putReader(br)
			br = nil
		}
		method, args, err := DecodeRequest(msg)
		if err != nil {
			s.log.Warn("LUXI malformed request, closing connection", "err", err)
			c.enqueue(queued{reply: encodeFailure(ecode.New(ecode.LuxiError, ecode.Inval, err.Error()))})
			return false
		}
		if !c.enqueue(queued{method: method, args: args}) {
			return true
		}
	}
}

func (s *Server) putReader(br *bufio.Reader) {
	br.Reset(nil)
	s.readers.Put(br)
}

// armReadDeadline applies the idle timeout, but only while no call is in
// progress: a client waiting minutes for WaitForJobChange is not idle.
func (c *conn) armReadDeadline() {
	if c.s.opts.IdleTimeout <= 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.running {
		_ = c.nc.SetReadDeadline(time.Time{})
	} else {
		_ = c.nc.SetReadDeadline(time.Now().Add(c.s.opts.IdleTimeout))
	}
}

// enqueue adds a request behind those in progress, starting a worker if none
// runs. It blocks while maxPipeline requests await replies, and reports false
// if the connection ended meanwhile.
func (c *conn) enqueue(q queued) bool {
	select {
	case c.slots <- struct{}{}:
	case <-c.ctx.Done():
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.queue = append(c.queue, q)
	if !c.running {
		c.running = true
		c.worker.Add(1)
		go c.work()
	}
	return true
}

// work runs queued requests in order and writes their replies. It exits when
// the queue is empty, so an idle connection keeps only its reader goroutine.
func (c *conn) work() {
	defer c.worker.Done()
	for {
		c.mu.Lock()
		if len(c.queue) == 0 {
			c.queue = nil // drop the backing array
			c.running = false
			if d := c.s.opts.IdleTimeout; d > 0 {
				_ = c.nc.SetReadDeadline(time.Now().Add(d))
			}
			c.mu.Unlock()
			return
		}
		q := c.queue[0]
		c.queue[0] = queued{}
		c.queue = c.queue[1:]
		c.mu.Unlock()

		reply, final := q.reply, q.reply != nil
		if !final && c.ctx.Err() == nil {
			reply = c.s.call(c.ctx, q.method, q.args)
		}
		if reply != nil && c.ctx.Err() == nil {
			_ = c.nc.SetWriteDeadline(time.Now().Add(writeTimeout))
			if err := WriteFrame(c.nc, reply); err != nil {
				c.s.log.Debug("LUXI reply not delivered", "method", q.method, "err", err)
				c.cancel()
			}
		}
		<-c.slots
		if final {
			// Stop before anything else queued: the connection is closing.
			c.cancel()
		}
	}
}

// prefixReader yields one byte already read, then reads from r.
type prefixReader struct {
	b   byte
	has bool
	r   io.Reader
}

func (p *prefixReader) Read(buf []byte) (int, error) {
	if p.has {
		if len(buf) == 0 {
			return 0, nil
		}
		buf[0] = p.b
		p.has = false
		return 1, nil
	}
	return p.r.Read(buf)
}
