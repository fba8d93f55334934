package rapi

import (
	"context"
	"net/http"
)

// Node group writes: each submits one OP_GROUP_* job and answers its id.

// groupCreate is POST /2/groups. Ganeti's client sends the name as
// "name", which the body's group_name replaced; both at once is an error.
// A __version__ key, if given, must be 1 (the only body version).
func (h *Handler) groupCreate(ctx context.Context, rq *request) (any, error) {
	body, err := rq.bodyDict(nil)
	if err != nil {
		return nil, err
	}
	if body == nil {
		return nil, errf(http.StatusBadRequest, "Invalid body contents, not a dictionary")
	}
	if v, ok := body["__version__"]; ok {
		if f, isNum := v.(float64); !isNum || f != 1 {
			return nil, errf(http.StatusBadRequest, "Unsupported request data version %v", v)
		}
	}
	if body, err = renameKeys(body, map[string]string{"name": "group_name"}); err != nil {
		return nil, err
	}
	delete(body, "__version__")
	static, err := rq.staticParams(map[string]any{}, "dry-run")
	if err != nil {
		return nil, err
	}
	return h.submit(ctx, rq, "OP_GROUP_ADD", static, body)
}

// groupModify is PUT /2/groups/[g]/modify; like instance modify it takes
// the custom_* names of the query fields for the parameter dicts.
func (h *Handler) groupModify(ctx context.Context, rq *request) (any, error) {
	body, err := rq.bodyDict(nil)
	if err != nil {
		return nil, err
	}
	if body, err = renameKeys(body, map[string]string{"custom_ndparams": "ndparams",
		"custom_ipolicy": "ipolicy", "custom_diskparams": "diskparams"}); err != nil {
		return nil, err
	}
	static, err := rq.staticParams(map[string]any{"group_name": rq.params[0]}, "dry-run")
	if err != nil {
		return nil, err
	}
	return h.submit(ctx, rq, "OP_GROUP_SET_PARAMS", static, body)
}

// groupAction answers a request that submits opID on the group named in
// the path, with the body as parameters and flags from the query.
func (h *Handler) groupAction(opID string, flags ...string) handlerFunc {
	return func(ctx context.Context, rq *request) (any, error) {
		static, err := rq.staticParams(map[string]any{"group_name": rq.params[0]}, flags...)
		if err != nil {
			return nil, err
		}
		var body map[string]any
		if opID != "OP_GROUP_REMOVE" { // Ganeti ignores a DELETE body
			if body, err = rq.bodyDict(nil); err != nil {
				return nil, err
			}
		}
		return h.submit(ctx, rq, opID, static, body)
	}
}

// renameKeys returns body with the old names of parameters replaced by
// the new ones (Ganeti's rename rule): giving both is an error.
func renameKeys(body map[string]any, renames map[string]string) (map[string]any, error) {
	if body == nil {
		return nil, nil
	}
	out := make(map[string]any, len(body))
	for k, v := range body {
		out[k] = v
	}
	for from, to := range renames {
		v, ok := out[from]
		if !ok {
			continue
		}
		if _, both := out[to]; both {
			return nil, errf(http.StatusBadRequest, "Parameter '%s' has been renamed to '%s'; both were given", from, to)
		}
		out[to] = v
		delete(out, from)
	}
	return out, nil
}
