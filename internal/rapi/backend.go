package rapi

import (
	"context"

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
}

// LuxiBackend is the Backend over corrald's LUXI socket. Each call opens its
// own connection: a luxi.Client serialises calls, and one request's
// WaitForJobChange must not hold up every other request.
type LuxiBackend struct {
	Socket string
}

func (b *LuxiBackend) with(ctx context.Context, f func(*luxi.Client) error) error {
	c, err := luxi.Dial(ctx, b.Socket)
	if err != nil {
		return &backendDownError{err}
	}
	defer c.Close()
	return f(c)
}

// backendDownError marks a failure to reach corrald (502, as Ganeti).
type backendDownError struct{ err error }

func (e *backendDownError) Error() string { return e.err.Error() }
func (e *backendDownError) Unwrap() error { return e.err }

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

func (b *LuxiBackend) WaitForJobChange(ctx context.Context, id int64, fields []string, prev []any, prevSerial *int64, timeout int) (ch *luxi.JobChange, err error) {
	err = b.with(ctx, func(c *luxi.Client) error {
		ch, err = c.WaitForJobChange(ctx, id, fields, prev, prevSerial, timeout)
		return err
	})
	return ch, err
}
