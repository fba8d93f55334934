package rapi

import (
	"context"
	"net/http"
)

// clusterModifyForbidden are the OP_CLUSTER_SET_PARAMS parameters Ganeti
// refuses over RAPI: the compression tools name programs run as root on every
// node, too much power for a web user.
var clusterModifyForbidden = []string{"compression_tools"}

// clusterModify is PUT /2/modify: the body is OP_CLUSTER_SET_PARAMS's
// parameters. Keys the opcode table does not know (including Ganeti ones
// Corral has no use for yet) are refused with 400 by the opcode validation.
func (h *Handler) clusterModify(ctx context.Context, rq *request) (any, error) {
	body, err := rq.bodyDict(nil)
	if err != nil {
		return nil, err
	}
	for _, k := range clusterModifyForbidden {
		_, inBody := body[k]
		_, inQuery := rq.query[k]
		if inBody || inQuery {
			return nil, errf(http.StatusForbidden, "The parameter %s cannot be set via RAPI", k)
		}
	}
	static, err := rq.staticParams(map[string]any{}, "dry-run")
	if err != nil {
		return nil, err
	}
	return h.submit(ctx, rq, "OP_CLUSTER_SET_PARAMS", static, body)
}

// nodeModify is POST /2/nodes/[n]/modify (Ganeti 2.x): the body is
// OP_NODE_SET_PARAMS's parameters with the node from the path. The
// opcode's own checks (one state flag at a time, something to change)
// happen in the logical unit, as for the CLI.
//
// master_capable is passed through as Ganeti does today. Ganeti's design
// has a cluster switch (master_capability_rapi_modifiable, off by default)
// that makes RAPI refuse it, because SSH keys follow master capability; when
// Corral grows that switch, this is where the refusal belongs.
func (h *Handler) nodeModify(ctx context.Context, rq *request) (any, error) {
	body, err := rq.bodyDict(nil)
	if err != nil {
		return nil, err
	}
	static, err := rq.staticParams(map[string]any{"node_name": rq.params[0]}, "dry-run")
	if err != nil {
		return nil, err
	}
	return h.submit(ctx, rq, "OP_NODE_SET_PARAMS", static, body)
}
