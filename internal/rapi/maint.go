package rapi

import "context"

// redistConfig is PUT /2/redistribute-config: OP_CLUSTER_REDIST_CONF.
func (h *Handler) redistConfig(ctx context.Context, rq *request) (any, error) {
	static, err := rq.staticParams(map[string]any{}, "dry-run")
	if err != nil {
		return nil, err
	}
	return h.submit(ctx, rq, "OP_CLUSTER_REDIST_CONF", static, nil)
}

// nodePowercycle is POST /2/nodes/{name}/powercycle: OP_NODE_POWERCYCLE,
// with ?force=1 for the master's node.
func (h *Handler) nodePowercycle(ctx context.Context, rq *request) (any, error) {
	static, err := rq.staticParams(map[string]any{"node_name": rq.params[0]}, "force", "dry-run")
	if err != nil {
		return nil, err
	}
	return h.submit(ctx, rq, "OP_NODE_POWERCYCLE", static, nil)
}
