package rapi

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"

	"github.com/corral/corral/internal/ecode"
)

// nodeEvacuate is POST /2/nodes/[n]/evacuate: the body is OP_NODE_EVACUATE's
// parameters (mode, iallocator, remote_node, early_release,
// ignore_soft_errors), the node comes from the path and dry-run from the
// query. The job's result lists the child jobs ({"jobs": [[true, id], ...]}).
func (h *Handler) nodeEvacuate(ctx context.Context, rq *request) (any, error) {
	body, err := rq.bodyDict(nil)
	if err != nil {
		return nil, err
	}
	static, err := rq.staticParams(map[string]any{"node_name": rq.params[0]}, "dry-run")
	if err != nil {
		return nil, err
	}
	return h.submit(ctx, rq, "OP_NODE_EVACUATE", static, body)
}

// nodeMigrate is POST /2/nodes/[n]/migrate. Ganeti's client sends the
// parameters in the body (mode, iallocator, target_node, ...); clients
// from before body support send live=0|1 or mode= in the query, and both
// at once is a 400, as in Ganeti. A query form ignores the body.
func (h *Handler) nodeMigrate(ctx context.Context, rq *request) (any, error) {
	static := map[string]any{"node_name": rq.params[0]}
	_, live := rq.query["live"]
	_, mode := rq.query["mode"]
	if live && mode {
		return nil, errf(http.StatusBadRequest, "Only one of 'live' and 'mode' should be passed")
	}
	if live || mode || len(rq.query) > 0 {
		data := map[string]any{"mode": nil}
		switch {
		case live:
			n, err := rq.intParam("live", 1)
			if err != nil {
				return nil, err
			}
			data["mode"] = "non-live"
			if n != 0 {
				data["mode"] = "live"
			}
		case mode:
			data["mode"] = rq.query["mode"][0]
		}
		return h.submit(ctx, rq, "OP_NODE_MIGRATE", static, data)
	}
	body, err := rq.bodyDict(nil)
	if err != nil {
		return nil, err
	}
	return h.submit(ctx, rq, "OP_NODE_MIGRATE", static, body)
}

// instancesMultiAlloc is POST /2/instances-multi-alloc: the body holds
// "instances", each a creation as POST /2/instances takes it without
// __version__ (name and os are renamed as there), and the op's own
// iallocator and opportunistic_locking; dry-run comes from the query. The
// job's result is Ganeti's {"jobs": [...], "allocatable": [...],
// "failed": [...]}.
func (h *Handler) instancesMultiAlloc(ctx context.Context, rq *request) (any, error) {
	body, err := rq.bodyDict(nil)
	if err != nil {
		return nil, err
	}
	items, present := body["instances"]
	if !present {
		return nil, errf(http.StatusBadRequest, "Request is missing required 'instances' field in body")
	}
	list, ok := items.([]any)
	if !ok {
		return nil, errf(http.StatusBadRequest, "Invalid body contents: 'instances' is not a list")
	}
	creates := make([]any, 0, len(list))
	for i, it := range list {
		m, ok := it.(map[string]any)
		if !ok {
			return nil, errf(http.StatusBadRequest, "Invalid body contents: instances[%d] is not a dictionary", i)
		}
		c := make(map[string]any, len(m)+1)
		for k, v := range m {
			c[k] = v
		}
		for alias, name := range map[string]string{"name": "instance_name", "os": "os_type"} {
			v, ok := c[alias]
			if !ok {
				continue
			}
			if _, both := c[name]; both {
				return nil, errf(http.StatusBadRequest, "Parameter '%s' was renamed to '%s', but both are specified", alias, name)
			}
			c[name] = v
			delete(c, alias)
		}
		c["OP_ID"] = "OP_INSTANCE_CREATE"
		raw, err := json.Marshal(c)
		if err != nil {
			return nil, errf(http.StatusBadRequest, "Invalid body parameters: instances[%d]: %v", i, err)
		}
		if _, err := h.ops.Decode(raw); err != nil {
			var e *ecode.Error
			if errors.As(err, &e) {
				return nil, errf(http.StatusBadRequest, "Invalid body parameters: instances[%d]: %s", i, e.Msg)
			}
			return nil, err
		}
		creates = append(creates, c)
	}
	body["instances"] = creates
	static, err := rq.staticParams(map[string]any{}, "dry-run")
	if err != nil {
		return nil, err
	}
	return h.submit(ctx, rq, "OP_INSTANCE_MULTI_ALLOC", static, body)
}
