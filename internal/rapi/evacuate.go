package rapi

import (
	"context"
	"net/http"
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
