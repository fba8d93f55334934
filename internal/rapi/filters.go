package rapi

import (
	"context"
	"math"
	"net/http"
	"net/url"

	"github.com/corral/corral/internal/luxi"
)

// Job filter rules: /2/filters and /2/filters/{uuid}, over corrald's
// QueryFilters, ReplaceFilter and DeleteFilter.

// FilterBackend is the part of a Backend that manages job filter rules.
// A Backend without it answers the filter resources with 501.
type FilterBackend interface {
	QueryFilters(ctx context.Context, uuids, fields []string) ([][]any, error)
	ReplaceFilter(ctx context.Context, uuid string, priority int, predicates []any, action any, reason []any) (string, error)
	DeleteFilter(ctx context.Context, uuid string) error
}

// filterRuleFields are what the bulk list and a rule's GET return.
var filterRuleFields = []string{"watermark", "priority", "predicates", "action", "reason_trail", "uuid"}

func (h *Handler) filterBackend() (FilterBackend, error) {
	fb, ok := h.be.(FilterBackend)
	if !ok {
		return nil, errf(http.StatusNotImplemented, "Not implemented in Corral yet: %s", "job filters over this backend")
	}
	return fb, nil
}

func (h *Handler) filtersList(ctx context.Context, rq *request) (any, error) {
	fb, err := h.filterBackend()
	if err != nil {
		return nil, err
	}
	bulk, err := rq.intParam("bulk", 0)
	if err != nil {
		return nil, err
	}
	fields := []string{"uuid"}
	if bulk != 0 {
		fields = filterRuleFields
	}
	rows, err := fb.QueryFilters(ctx, nil, fields)
	if err != nil {
		return nil, err
	}
	if bulk != 0 {
		return rowsToDicts(fields, rows), nil
	}
	out := make([]map[string]any, 0, len(rows))
	for _, row := range rows {
		if len(row) == 0 {
			continue
		}
		id, _ := row[0].(string)
		out = append(out, map[string]any{"uuid": id, "uri": "/2/filters/" + url.PathEscape(id)})
	}
	return out, nil
}

func (h *Handler) filterGet(ctx context.Context, rq *request) (any, error) {
	fb, err := h.filterBackend()
	if err != nil {
		return nil, err
	}
	rows, err := fb.QueryFilters(ctx, []string{rq.params[0]}, filterRuleFields)
	if err != nil {
		return nil, notFoundIfNoEnt(err)
	}
	d := rowsToDicts(filterRuleFields, rows)
	if len(d) == 0 {
		return nil, errNotFound
	}
	return d[0], nil
}

// filterAdd answers POST /2/filters: a new rule; its uuid.
func (h *Handler) filterAdd(ctx context.Context, rq *request) (any, error) {
	return h.filterReplace(ctx, rq, "")
}

// filterPut answers PUT /2/filters/{uuid}: the rule is replaced, or
// created with that uuid.
func (h *Handler) filterPut(ctx context.Context, rq *request) (any, error) {
	return h.filterReplace(ctx, rq, rq.params[0])
}

func (h *Handler) filterReplace(ctx context.Context, rq *request, uuid string) (any, error) {
	fb, err := h.filterBackend()
	if err != nil {
		return nil, err
	}
	body := rq.body
	if !rq.hasBdy || body == nil {
		body = map[string]any{}
	}
	prio, preds, action, reason, err := filterParams(body)
	if err != nil {
		return nil, err
	}
	return fb.ReplaceFilter(ctx, uuid, prio, preds, action, reason)
}

// filterParams checks a filter rule body as Ganeti does: only priority
// (integer, default 0), predicates (list, default []), action (default
// "CONTINUE"; its form is checked by corrald) and reason (list).
func filterParams(body any) (int, []any, any, []any, error) {
	m, ok := body.(map[string]any)
	if !ok {
		return 0, nil, nil, nil, errf(http.StatusBadRequest, "Invalid body contents, not a dictionary")
	}
	for k := range m {
		switch k {
		case "priority", "predicates", "action", "reason":
		default:
			return 0, nil, nil, nil, errf(http.StatusBadRequest, "Invalid body parameters: filter rule doesn't support the parameter '%s'", k)
		}
	}
	prio := 0
	if v, ok := m["priority"]; ok {
		f, isNum := v.(float64)
		if !isNum || f != math.Trunc(f) || math.Abs(f) > math.MaxInt32 {
			return 0, nil, nil, nil, typeErr("priority", v, "int")
		}
		prio = int(f)
	}
	preds := []any{}
	if v, ok := m["predicates"]; ok {
		l, isList := v.([]any)
		if !isList {
			return 0, nil, nil, nil, typeErr("predicates", v, "list")
		}
		preds = l
	}
	var action any = "CONTINUE"
	if v, ok := m["action"]; ok {
		action = v
	}
	reason := []any{}
	if v, ok := m["reason"]; ok {
		l, isList := v.([]any)
		if !isList {
			return 0, nil, nil, nil, typeErr("reason", v, "list")
		}
		reason = l
	}
	return prio, preds, action, reason, nil
}

// typeErr is Ganeti's 400 for a body parameter of the wrong type, with
// Python's names of the JSON types.
func typeErr(name string, v any, want string) error {
	got := "NoneType"
	switch x := v.(type) {
	case bool:
		got = "bool"
	case float64:
		got = "float"
		if x == math.Trunc(x) {
			got = "int"
		}
	case string:
		got = "str"
	case []any:
		got = "list"
	case map[string]any:
		got = "dict"
	}
	return errf(http.StatusBadRequest, "'%s' parameter: Type is '%s', but '%s' is expected", name, got, want)
}

func (h *Handler) filterDelete(ctx context.Context, rq *request) (any, error) {
	fb, err := h.filterBackend()
	if err != nil {
		return nil, err
	}
	return nil, notFoundIfNoEnt(fb.DeleteFilter(ctx, rq.params[0]))
}

func (b *LuxiBackend) QueryFilters(ctx context.Context, uuids, fields []string) (rows [][]any, err error) {
	err = b.with(ctx, func(c *luxi.Client) error { rows, err = c.QueryFilters(ctx, uuids, fields); return err })
	return rows, err
}

func (b *LuxiBackend) ReplaceFilter(ctx context.Context, uuid string, priority int, predicates []any, action any, reason []any) (id string, err error) {
	err = b.with(ctx, func(c *luxi.Client) error {
		id, err = c.ReplaceFilter(ctx, uuid, priority, predicates, action, reason)
		return err
	})
	return id, err
}

func (b *LuxiBackend) DeleteFilter(ctx context.Context, uuid string) error {
	return b.with(ctx, func(c *luxi.Client) error { return c.DeleteFilter(ctx, uuid) })
}
