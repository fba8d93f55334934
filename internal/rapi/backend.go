package rapi

import (
	"context"
	"errors"
	"sync"
	"syscall"

	"github.com/corral/corral/internal/luxi"
)

// Backend is what the handler needs from corrald: the LUXI methods it
// calls, with the shapes the luxi client decodes them to.
type Backend interface {
	QueryClusterInfo(ctx context.Context) (map[string]any, error)
	QueryInstances(ctx context.Context, names, fields []string) ([][]any, error)
	QueryNodes(ctx context.Context, names, fields []string) ([][]any, error)
	QueryGroups(ctx context.Context, names, fields []string) ([][]any, error)
	QueryJobs(ctx context.Context, ids []int64, fields []string) ([][]any, error)
	QueryTags(ctx context.Context, kind, name string) ([]string, error)
	Query(ctx context.Context, what string, fields []string, filter any) (*luxi.QueryResult, error)
	QueryFields(ctx context.Context, what string, fields []string) (*luxi.QueryFieldsResult, error)
	SubmitJob(ctx context.Context, ops []any) (int64, error)
	CancelJob(ctx context.Context, id int64) (bool, string, error)
	WaitForJobChange(ctx context.Context, id int64, fields []string, prev []any, prevSerial *int64, timeout int) (*luxi.JobChange, error)
	// QueryMetrics returns corrald's metrics in the text exposition format.
	QueryMetrics(ctx context.Context) (string, error)
}

// DefaultMaxIdle is how many idle LUXI connections a LuxiBackend keeps by
// default: enough for corral-rapi's default of 20 concurrent requests to
// mostly find one, few enough to be nothing for corrald.
const DefaultMaxIdle = 16

// LuxiBackend is the Backend over corrald's LUXI socket. A luxi.Client
// serialises its calls, so a connection is never shared by two requests:
// each call takes an idle connection (or dials one), has it to itself for
// the whole call, long polls included, and gives it back afterwards. Dialing
// per call used to cost a connect and an accept on both sides for every
// request; reuse leaves only the exchange itself.
//
// The zero value (with Socket set) is ready to use; Close releases the idle
// connections.
type LuxiBackend struct {
	Socket string
	// MaxIdle bounds the idle connections kept; 0 means DefaultMaxIdle and
	// a negative value keeps none (a connection per call).
	MaxIdle int

	// dial replaces luxi.Dial in tests, which count connections.
	dial func(ctx context.Context, path string) (*luxi.Client, error)

	mu     sync.Mutex
	idle   []*luxi.Client // most recently used last
	closed bool
}

// backendDownError marks a failure to reach corrald (502, as Ganeti).
type backendDownError struct{ err error }

func (e *backendDownError) Error() string { return e.err.Error() }
func (e *backendDownError) Unwrap() error { return e.err }

// Close closes the idle connections; connections in use are closed when
// their call ends. Calls after Close still work, without reuse.
func (b *LuxiBackend) Close() error {
	b.mu.Lock()
	idle := b.idle
	b.idle, b.closed = nil, true
	b.mu.Unlock()
	for _, c := range idle {
		c.Close()
	}
	return nil
}

// IdleConns returns the number of idle connections kept.
func (b *LuxiBackend) IdleConns() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.idle)
}

func (b *LuxiBackend) maxIdle() int {
	if b.MaxIdle == 0 {
		return DefaultMaxIdle
	}
	return max(b.MaxIdle, 0)
}

// take returns the most recently used idle connection, or nil.
func (b *LuxiBackend) take() *luxi.Client {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := len(b.idle)
	if n == 0 {
		return nil
	}
	c := b.idle[n-1]
	b.idle[n-1] = nil
	b.idle = b.idle[:n-1]
	return c
}

// give returns a healthy connection to the pool, or closes it when the pool
// is full or closed.
func (b *LuxiBackend) give(c *luxi.Client) {
	b.mu.Lock()
	if !b.closed && len(b.idle) < b.maxIdle() {
		b.idle = append(b.idle, c)
		c = nil
	}
	b.mu.Unlock()
	if c != nil {
		c.Close()
	}
}

// flush closes every idle connection. One idle connection found dead means
// corrald closed it, almost always because it restarted, and then all the
// others are dead too: better one fresh dial each than a failed try each.
func (b *LuxiBackend) flush() {
	b.mu.Lock()
	idle := b.idle
	b.idle = nil
	b.mu.Unlock()
	for _, c := range idle {
		c.Close()
	}
}

func (b *LuxiBackend) connect(ctx context.Context) (*luxi.Client, error) {
	dial := b.dial
	if dial == nil {
		dial = luxi.Dial
	}
	c, err := dial(ctx, b.Socket)
	if err != nil {
		return nil, &backendDownError{err}
	}
	return c, nil
}

// with runs f on a connection of its own. A pooled connection that turns
// out to be dead before corrald could read f's request (see unsent) is
// replaced by a fresh one and f runs once more; that is safe for every
// method, job submission included, as corrald never saw the request. Any
// failure after corrald may have read the request is returned as it is: a
// SubmitJob retried then could queue the job twice.
func (b *LuxiBackend) with(ctx context.Context, f func(*luxi.Client) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	c := b.take()
	pooled := c != nil
	for {
		if c == nil {
			var err error
			if c, err = b.connect(ctx); err != nil {
				return err
			}
		}
		err := f(c)
		if reusable(ctx, err) {
			b.give(c)
			return err
		}
		c.Close()
		if err == nil || !pooled || !unsent(err) {
			return err
		}
		b.flush()
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

func (b *LuxiBackend) QueryClusterInfo(ctx context.Context) (info map[string]any, err error) {
	err = b.with(ctx, func(c *luxi.Client) error { info, err = c.QueryClusterInfo(ctx); return err })
	return info, err
}

func (b *LuxiBackend) QueryInstances(ctx context.Context, names, fields []string) (rows [][]any, err error) {
	err = b.with(ctx, func(c *luxi.Client) error { rows, err = c.QueryInstances(ctx, names, fields, false); return err })
	return rows, err
}

func (b *LuxiBackend) QueryNodes(ctx context.Context, names, fields []string) (rows [][]any, err error) {
	err = b.with(ctx, func(c *luxi.Client) error { rows, err = c.QueryNodes(ctx, names, fields, false); return err })
	return rows, err
}

func (b *LuxiBackend) QueryGroups(ctx context.Context, names, fields []string) (rows [][]any, err error) {
	err = b.with(ctx, func(c *luxi.Client) error { rows, err = c.QueryGroups(ctx, names, fields, false); return err })
	return rows, err
}

func (b *LuxiBackend) QueryJobs(ctx context.Context, ids []int64, fields []string) (rows [][]any, err error) {
	err = b.with(ctx, func(c *luxi.Client) error { rows, err = c.QueryJobs(ctx, ids, fields); return err })
	return rows, err
}

func (b *LuxiBackend) QueryTags(ctx context.Context, kind, name string) (tags []string, err error) {
	err = b.with(ctx, func(c *luxi.Client) error { tags, err = c.QueryTags(ctx, kind, name); return err })
	return tags, err
}

func (b *LuxiBackend) Query(ctx context.Context, what string, fields []string, filter any) (res *luxi.QueryResult, err error) {
	err = b.with(ctx, func(c *luxi.Client) error { res, err = c.Query(ctx, what, fields, filter); return err })
	return res, err
}

func (b *LuxiBackend) QueryFields(ctx context.Context, what string, fields []string) (res *luxi.QueryFieldsResult, err error) {
	err = b.with(ctx, func(c *luxi.Client) error { res, err = c.QueryFields(ctx, what, fields); return err })
	return res, err
}

func (b *LuxiBackend) SubmitJob(ctx context.Context, ops []any) (id int64, err error) {
	err = b.with(ctx, func(c *luxi.Client) error { id, err = c.SubmitJob(ctx, ops); return err })
	return id, err
}

func (b *LuxiBackend) CancelJob(ctx context.Context, id int64) (ok bool, msg string, err error) {
	err = b.with(ctx, func(c *luxi.Client) error { ok, msg, err = c.CancelJob(ctx, id, false); return err })
	return ok, msg, err
}

// WaitForJobChange holds its connection for the whole long poll; other
// requests meanwhile take other connections, so it holds up no one.
func (b *LuxiBackend) WaitForJobChange(ctx context.Context, id int64, fields []string, prev []any, prevSerial *int64, timeout int) (ch *luxi.JobChange, err error) {
	err = b.with(ctx, func(c *luxi.Client) error {
		ch, err = c.WaitForJobChange(ctx, id, fields, prev, prevSerial, timeout)
		return err
	})
	return ch, err
}

func (b *LuxiBackend) QueryMetrics(ctx context.Context) (text string, err error) {
	err = b.with(ctx, func(c *luxi.Client) error { text, err = c.QueryMetrics(ctx); return err })
	return text, err
}
