package luxi

import "context"

// The job filter methods, as Ganeti 2.13+ names them.
const (
	MethodQueryFilters  = "QueryFilters"
	MethodReplaceFilter = "ReplaceFilter"
	MethodDeleteFilter  = "DeleteFilter"
)

// QueryFilters is the classic query of job filter rules: one row of
// values per uuid (all rules when uuids is empty).
func (c *Client) QueryFilters(ctx context.Context, uuids, fields []string) ([][]any, error) {
	var rows [][]any
	var ids any // null asks for every rule
	if len(uuids) > 0 {
		ids = uuids
	}
	err := c.Call(ctx, MethodQueryFilters, []any{ids, nonNilStrings(fields)}, &rows)
	return rows, err
}

// ReplaceFilter adds a job filter rule (uuid "") or replaces the rule
// with that uuid, and returns the rule's uuid. predicates are
// [kind, filter] lists; action is "ACCEPT", "PAUSE", "REJECT", "CONTINUE"
// or ["RATE_LIMIT", n]; reason is a reason trail.
func (c *Client) ReplaceFilter(ctx context.Context, uuid string, priority int, predicates []any, action any, reason []any) (string, error) {
	var id any
	if uuid != "" {
		id = uuid
	}
	if predicates == nil {
		predicates = []any{}
	}
	if reason == nil {
		reason = []any{}
	}
	var out string
	err := c.Call(ctx, MethodReplaceFilter, []any{id, priority, predicates, action, reason}, &out)
	return out, err
}

// DeleteFilter removes a job filter rule.
func (c *Client) DeleteFilter(ctx context.Context, uuid string) error {
	return c.Call(ctx, MethodDeleteFilter, []any{uuid}, nil)
}
