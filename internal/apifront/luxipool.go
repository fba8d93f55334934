package apifront

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"syscall"

	"github.com/corral/corral/internal/luxi"
)

// DefaultMaxIdle is how many idle LUXI connections a LuxiPool keeps by
// default: enough for corral-rapi's default of 20 concurrent requests to
// mostly find one, few enough to be nothing for corrald.
const DefaultMaxIdle = 16

// LuxiPool hands out persistent LUXI connections to the APIs' backends. A
// luxi.Client serialises its calls, so a connection is never shared by two
// requests: each call takes an idle connection (or dials one), has it to
// itself for the whole call, long polls included, and gives it back
// afterwards. Dialing per call costs a connect and an accept on both sides
// for every request; reuse leaves only the exchange itself.
//
// The pool follows a master failover over the sockets it was given, the
// master candidates' LUXI sockets in order of preference. Any candidate
// relays to whichever is master, so one that runs is enough; when the
// socket in use cannot be dialed (its corrald was killed or stopped), the
// next call tries the others in turn and stays on the first that answers.
type LuxiPool struct {
	sockets []string
	maxIdle int
	dial    func(ctx context.Context, path string) (*luxi.Client, error)
	log     *slog.Logger

	mu     sync.Mutex
	cur    int            // index in sockets of the one dialed first
	idle   []*luxi.Client // most recently used last; all on sockets[cur]
	closed bool
}

// PoolOptions configures a LuxiPool.
type PoolOptions struct {
	// MaxIdle bounds the idle connections kept; 0 means DefaultMaxIdle and
	// a negative value keeps none (a connection per call).
	MaxIdle int
	// Dial replaces luxi.Dial (tests count connections with it).
	Dial func(ctx context.Context, path string) (*luxi.Client, error)
	// Log receives a warning when the pool moves to another socket; nil:
	// not logged.
	Log *slog.Logger
}

// NewLuxiPool returns a pool over sockets, tried in order.
func NewLuxiPool(sockets []string, o PoolOptions) *LuxiPool {
	p := &LuxiPool{sockets: append([]string(nil), sockets...), maxIdle: o.MaxIdle, dial: o.Dial, log: o.Log}
	if p.log == nil {
		p.log = slog.New(slog.DiscardHandler)
	}
	if p.maxIdle == 0 {
		p.maxIdle = DefaultMaxIdle
	}
	p.maxIdle = max(p.maxIdle, 0)
	if p.dial == nil {
		p.dial = luxi.Dial
	}
	return p
}

// BackendDownError marks a failure to reach corrald at all: no socket of
// the pool could be dialed. APIs answer it as a bad gateway.
type BackendDownError struct{ Err error }

func (e *BackendDownError) Error() string { return e.Err.Error() }
func (e *BackendDownError) Unwrap() error { return e.Err }

// Close closes the idle connections; connections in use are closed when
// their call ends. Calls after Close still work, without reuse.
func (p *LuxiPool) Close() error {
	p.mu.Lock()
	idle := p.idle
	p.idle, p.closed = nil, true
	p.mu.Unlock()
	for _, c := range idle {
		c.Close()
	}
	return nil
}

// IdleConns returns the number of idle connections kept.
func (p *LuxiPool) IdleConns() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.idle)
}

// Socket returns the socket the pool dials first now.
func (p *LuxiPool) Socket() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.sockets) == 0 {
		return ""
	}
	return p.sockets[p.cur]
}

// take returns the most recently used idle connection, or nil, and the
// index of the socket it (or a fresh one) is on.
func (p *LuxiPool) take() (*luxi.Client, int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := len(p.idle)
	if n == 0 {
		return nil, p.cur
	}
	c := p.idle[n-1]
	p.idle[n-1] = nil
	p.idle = p.idle[:n-1]
	return c, p.cur
}

// give returns a healthy connection to the pool, or closes it when the pool
// is full or closed, or when it was dialed on a socket the pool has left.
func (p *LuxiPool) give(c *luxi.Client, socket int) {
	p.mu.Lock()
	if !p.closed && socket == p.cur && len(p.idle) < p.maxIdle {
		p.idle = append(p.idle, c)
		c = nil
	}
	p.mu.Unlock()
	if c != nil {
		c.Close()
	}
}

// flush closes every idle connection. One idle connection found dead means
// corrald closed it, almost always because it restarted, and then all the
// others are dead too: better one fresh dial each than a failed try each.
func (p *LuxiPool) flush() {
	p.mu.Lock()
	idle := p.idle
	p.idle = nil
	p.mu.Unlock()
	for _, c := range idle {
		c.Close()
	}
}

// connect dials the current socket and, when that fails, the others in
// order; the first that answers becomes the current one. It returns the
// index of the socket dialed.
func (p *LuxiPool) connect(ctx context.Context) (*luxi.Client, int, error) {
	p.mu.Lock()
	start, n := p.cur, len(p.sockets)
	p.mu.Unlock()
	if n == 0 {
		return nil, 0, &BackendDownError{errors.New("no LUXI socket configured")}
	}
	var errs []error
	for k := range n {
		i := (start + k) % n
		c, err := p.dial(ctx, p.sockets[i])
		if err == nil {
			if i != start {
				p.log.Warn("LUXI socket unreachable, moving to the next master candidate's",
					"from", p.sockets[start], "to", p.sockets[i], "err", errors.Join(errs...))
				p.moveTo(i)
			}
			return c, i, nil
		}
		if ctx.Err() != nil {
			return nil, 0, &BackendDownError{err}
		}
		if n > 1 {
			err = fmt.Errorf("%s: %w", p.sockets[i], err)
		}
		errs = append(errs, err)
	}
	return nil, 0, &BackendDownError{errors.Join(errs...)}
}

// moveTo makes socket i the current one; idle connections to the old one
// are closed.
func (p *LuxiPool) moveTo(i int) {
	p.mu.Lock()
	idle := p.idle
	p.idle, p.cur = nil, i
	p.mu.Unlock()
	for _, c := range idle {
		c.Close()
	}
}

// Do runs f on a connection of its own. A pooled connection that turns out
// to be dead before corrald could read f's request (see unsent) is replaced
// by a fresh one and f runs once more; that is safe for every method, job
// submission included, as corrald never saw the request. Any failure after
// corrald may have read the request is returned as it is: a SubmitJob
// retried then could queue the job twice.
func (p *LuxiPool) Do(ctx context.Context, f func(*luxi.Client) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	c, socket := p.take()
	pooled := c != nil
	for {
		if c == nil {
			var err error
			if c, socket, err = p.connect(ctx); err != nil {
				return err
			}
		}
		err := f(c)
		if reusable(ctx, err) {
			p.give(c, socket)
			return err
		}
		c.Close()
		if err == nil || !pooled || !unsent(err) {
			return err
		}
		p.flush()
		c, pooled = nil, false
	}
}

// reusable tells whether a connection can serve another call after one that
// ended with err: only after a success. An error answer leaves the stream in
// step, but it may come from a corrald that is not (or no longer) the one
// that should answer, a standby during a failover say, and a fresh
// connection then reaches whoever serves now; errors are rare enough that
// the dial costs nothing that matters. A failed exchange or a cancelled call
// leaves the stream out of step anyway.
func reusable(ctx context.Context, err error) bool {
	// After ctx ended, the client may have moved the socket deadline or
	// abandoned the stream, even if the reply made it.
	return err == nil && ctx.Err() == nil
}

// unsent tells whether err proves that corrald did not act on the request,
// from how Linux unix stream sockets report a closed peer:
//   - the client was already broken before writing (ErrClientClosed);
//   - EPIPE: the write found the peer closed, so it took no bytes;
//   - ECONNRESET: the peer closed with bytes of ours still unread. The
//     connection was idle before this call, so those bytes are this
//     request's, and they include its end marker (the last byte written),
//     which corrald must read before it acts. Had corrald read the whole
//     request and then gone away, the read would end with EOF instead.
func unsent(err error) bool {
	return errors.Is(err, luxi.ErrClientClosed) || errors.Is(err, syscall.EPIPE) || errors.Is(err, syscall.ECONNRESET)
}
