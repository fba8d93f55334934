package rapiclient

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"

	"github.com/corral/corral/internal/ecode"
	"github.com/corral/corral/internal/luxi"
)

// filterCall answers the job filter calls with /2/filters, or reports
// false when method is not one of them.
func (c *Client) filterCall(ctx context.Context, method string, a args) (json.RawMessage, bool, error) {
	switch method {
	case luxi.MethodQueryFilters:
		var uuids, fields []string
		if err := a.get(method, &uuids, &fields); err != nil {
			return nil, true, err
		}
		raw, err := c.queryFilters(ctx, uuids, fields)
		return raw, true, err
	case luxi.MethodReplaceFilter:
		var uuid *string
		var prio int
		var preds, reason []any
		var action any
		if err := a.get(method, &uuid, &prio, &preds, &action, &reason); err != nil {
			return nil, true, err
		}
		body := map[string]any{"priority": prio, "predicates": preds, "action": action, "reason": reason}
		if uuid == nil || *uuid == "" {
			raw, err := c.do(ctx, http.MethodPost, "/2/filters", nil, body)
			return raw, true, err
		}
		raw, err := c.do(ctx, http.MethodPut, "/2/filters/"+url.PathEscape(*uuid), nil, body)
		return raw, true, err
	case luxi.MethodDeleteFilter:
		var uuid string
		if err := a.get(method, &uuid); err != nil {
			return nil, true, err
		}
		raw, err := c.do(ctx, http.MethodDelete, "/2/filters/"+url.PathEscape(uuid), nil, nil)
		return raw, true, err
	}
	return nil, false, nil
}

// queryFilters answers QueryFilters with the bulk rule list, or one GET
// per uuid asked for.
func (c *Client) queryFilters(ctx context.Context, uuids, fields []string) (json.RawMessage, error) {
	var list []map[string]json.RawMessage
	if len(uuids) == 0 {
		raw, err := c.do(ctx, http.MethodGet, "/2/filters", url.Values{"bulk": {"1"}}, nil)
		if err != nil {
			return nil, err
		}
		if err := json.Unmarshal(raw, &list); err != nil {
			return nil, ecode.New(ecode.GenericError, ecode.Fault, fmt.Sprintf("decoding the filter list: %v", err))
		}
	}
	for _, id := range uuids {
		raw, err := c.do(ctx, http.MethodGet, "/2/filters/"+url.PathEscape(id), nil, nil)
		if ecode.ClassOf(err) == ecode.NoEnt {
			return nil, ecode.Errorf(ecode.NoEnt, "Filter uuid %s not found", id)
		}
		if err != nil {
			return nil, err
		}
		var m map[string]json.RawMessage
		if err := json.Unmarshal(raw, &m); err != nil {
			return nil, ecode.New(ecode.GenericError, ecode.Fault, fmt.Sprintf("decoding filter %s: %v", id, err))
		}
		list = append(list, m)
	}
	rows := make([][]json.RawMessage, 0, len(list))
	for _, m := range list {
		rows = append(rows, pick(m, fields))
	}
	return json.Marshal(rows)
}
