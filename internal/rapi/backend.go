package rapi

import (
	"context"
	"sync"

	"github.com/corral/corral/internal/apifront"
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
// default (apifront.DefaultMaxIdle).
const DefaultMaxIdle = apifront.DefaultMaxIdle

// LuxiBackend is the Backend over corrald's LUXI socket, through the API
// front's pool of persistent connections (apifront.LuxiPool: a connection
// per call in progress, reused afterwards, following a master failover
// over Sockets).
//
// The zero value (with Socket set) is ready to use; Close releases the idle
// connections.
type LuxiBackend struct {
	Socket string
	// Sockets are further master candidates' sockets, tried in order when
	// the one in use cannot be dialed.
	Sockets []string
	// MaxIdle bounds the idle connections kept; 0 means DefaultMaxIdle and
	// a negative value keeps none (a connection per call).
	MaxIdle int

	// dial replaces luxi.Dial in tests, which count connections.
	dial func(ctx context.Context, path string) (*luxi.Client, error)

	once sync.Once
	p    *apifront.LuxiPool
}

// backendDownError marks a failure to reach corrald (502, as Ganeti).
type backendDownError = apifront.BackendDownError

// NewLuxiBackend returns the Backend over an existing pool (the API
// front's, shared with its other APIs).
func NewLuxiBackend(p *apifront.LuxiPool) *LuxiBackend {
	b := &LuxiBackend{p: p}
	b.once.Do(func() {})
	return b
}

func (b *LuxiBackend) pool() *apifront.LuxiPool {
	b.once.Do(func() {
		sockets := append([]string{b.Socket}, b.Sockets...)
		if b.Socket == "" {
			sockets = b.Sockets
		}
		b.p = apifront.NewLuxiPool(sockets, apifront.PoolOptions{MaxIdle: b.MaxIdle, Dial: b.dial})
	})
	return b.p
}

// Close closes the idle connections; connections in use are closed when
// their call ends. Calls after Close still work, without reuse.
func (b *LuxiBackend) Close() error { return b.pool().Close() }

// IdleConns returns the number of idle connections kept.
func (b *LuxiBackend) IdleConns() int { return b.pool().IdleConns() }

func (b *LuxiBackend) with(ctx context.Context, f func(*luxi.Client) error) error {
	return b.pool().Do(ctx, f)
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
