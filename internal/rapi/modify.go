package rapi

import (
	"context"
	"net/http"
)

// clusterModifyForbidden are the OP_CLUSTER_SET_PARAMS parameters Ganeti
// refuses over RAPI: the compression tools name programs run as root on every
// node, too much power for a web user.
// The switch that lets RAPI change master capability is itself not
// settable over RAPI, or a web user could flip it and then the flag.
var clusterModifyForbidden = []string{"compression_tools", "master_capability_rapi_modifiable"}

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
// master_capable is refused (403) unless the cluster switch
// master_capability_rapi_modifiable is on, as in Ganeti's node-security
// design: master capability decides whose SSH keys every node trusts, so a
// stolen RAPI password must not be able to grant it.
func (h *Handler) nodeModify(ctx context.Context, rq *request) (any, error) {
	body, err := rq.bodyDict(nil)
	if err != nil {
		return nil, err
	}
	if err := h.checkMasterCapable(ctx, rq, body); err != nil {
		return nil, err
	}
	static, err := rq.staticParams(map[string]any{"node_name": rq.params[0]}, "dry-run")
	if err != nil {
		return nil, err
	}
	return h.submit(ctx, rq, "OP_NODE_SET_PARAMS", static, body)
}

// checkMasterCapable refuses a change of master_capable unless the cluster
// allows it over RAPI. A cluster that does not report the switch is
// treated as off.
func (h *Handler) checkMasterCapable(ctx context.Context, rq *request, body map[string]any) error {
	_, inBody := body["master_capable"]
	_, inQuery := rq.query["master_capable"]
	if !inBody && !inQuery {
		return nil
	}
	ci, err := h.be.QueryClusterInfo(ctx)
	if err != nil {
		return err
	}
	if on, _ := ci["master_capability_rapi_modifiable"].(bool); on {
		return nil
	}
	return errf(http.StatusForbidden, "The parameter master_capable cannot be changed via RAPI: the cluster's master_capability_rapi_modifiable is off (change it with 'corral node modify --master-capable' on the master, or turn the switch on with 'corral cluster modify --master-capability-rapi-modifiable yes')")
}
