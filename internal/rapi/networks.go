package rapi

import (
	"context"
	"net/http"
)

// netFields is Ganeti's NET_FIELDS (lib/rapi/rlib2.py).
var netFields = []string{"name", "network", "gateway", "network6", "gateway6", "mac_prefix",
	"free_count", "reserved_count", "map", "group_list", "inst_list", "external_reservations",
	"ctime", "mtime", "uuid", "serial_no", "tags"}

// networks is the /2/networks collection, read through LUXI Query on the
// network resource (names as a filter on "name").
var networks = collection{
	fields: netFields, absent: map[string]bool{}, idKey: "name", prefix: "/2/networks/",
	query: queryNetworks,
}

// queryNetworks answers as the classic QueryNetworks would: plain values,
// null where the field has none; an unknown name is not found.
func queryNetworks(b Backend, ctx context.Context, names, fields []string) ([][]any, error) {
	var filter any
	if len(names) > 0 {
		or := []any{"|"}
		for _, n := range names {
			or = append(or, []any{"=", "name", n})
		}
		filter = or
	}
	res, err := b.Query(ctx, "network", fields, filter)
	if err != nil {
		return nil, err
	}
	if len(names) > 0 && len(res.Data) < len(names) {
		return nil, errNotFound
	}
	rows := make([][]any, 0, len(res.Data))
	for _, cells := range res.Data {
		row := make([]any, len(cells))
		for i, c := range cells {
			if st, _ := c[0].(float64); st == 0 {
				row[i] = c[1]
			}
		}
		rows = append(rows, row)
	}
	return rows, nil
}

// networkCreate is POST /2/networks: the body is OP_NETWORK_ADD's
// parameters, the name given as "name" or "network_name".
func (h *Handler) networkCreate(ctx context.Context, rq *request) (any, error) {
	body, err := rq.bodyDict(nil)
	if err != nil {
		return nil, err
	}
	if body == nil {
		return nil, errf(http.StatusBadRequest, "Invalid body contents, not a dictionary")
	}
	if body, err = renameKeys(body, map[string]string{"name": "network_name"}); err != nil {
		return nil, err
	}
	static, err := rq.staticParams(map[string]any{}, "dry-run")
	if err != nil {
		return nil, err
	}
	return h.submit(ctx, rq, "OP_NETWORK_ADD", static, body)
}

// networkAction submits opID on the network named in the path, with the
// body as parameters and flags from the query.
func (h *Handler) networkAction(opID string, flags ...string) handlerFunc {
	return func(ctx context.Context, rq *request) (any, error) {
		static, err := rq.staticParams(map[string]any{"network_name": rq.params[0]}, flags...)
		if err != nil {
			return nil, err
		}
		body, err := rq.bodyDict(nil)
		if err != nil {
			return nil, err
		}
		return h.submit(ctx, rq, opID, static, body)
	}
}
