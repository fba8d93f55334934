package rapi

import (
	"context"
	"net/http"
)

// Instance exports and inter-cluster moves (spec 1.5/1.6 and 4.4): the
// source cluster's half of move-instance is prepare-export then export.

// instancePrepareExport answers PUT /2/instances/[i]/prepare-export?mode=:
// OP_BACKUP_PREPARE, whose job result is, for mode remote, the handshake,
// the signed key name and the signed certificate the destination needs.
// The body is ignored, as Ganeti does.
func (h *Handler) instancePrepareExport(ctx context.Context, rq *request) (any, error) {
	mode := rq.query["mode"]
	if len(mode) == 0 || mode[0] == "" {
		return nil, errf(http.StatusBadRequest, "Missing the 'mode' parameter (local or remote)")
	}
	static, err := rq.staticParams(map[string]any{"instance_name": rq.params[0], "mode": mode[0]}, "dry-run")
	if err != nil {
		return nil, err
	}
	return h.submit(ctx, rq, "OP_BACKUP_PREPARE", static, nil)
}

// instancePrepareExportCleanup answers DELETE /2/instances/[i]/prepare-export
// (Corral only): OP_BACKUP_CLEANUP with the signed x509_key_name of the
// body, for a move that failed before its export began.
func (h *Handler) instancePrepareExportCleanup(ctx context.Context, rq *request) (any, error) {
	body, err := rq.bodyDict(nil)
	if err != nil {
		return nil, err
	}
	key, ok := body["x509_key_name"]
	if !ok {
		return nil, errf(http.StatusBadRequest, "Missing the signed 'x509_key_name' of the prepared export")
	}
	static, err := rq.staticParams(map[string]any{"instance_name": rq.params[0], "x509_key_name": key}, "dry-run")
	if err != nil {
		return nil, err
	}
	return h.submit(ctx, rq, "OP_BACKUP_CLEANUP", static, nil)
}

// exportDefaults are OP_BACKUP_EXPORT's parameters a request leaves out,
// as Ganeti's RAPI documents them; they are written into the opcode so that
// the job shows what it does.
func exportDefaults() map[string]any {
	return map[string]any{"mode": "local", "shutdown": true, "shutdown_timeout": 120, "remove_instance": false, "compress": "none"}
}

// instanceExport answers PUT /2/instances/[i]/export: OP_BACKUP_EXPORT
// from the body, whose "destination" is the opcode's target_node (a node
// name for mode local, the destination's signed disk list for remote).
func (h *Handler) instanceExport(ctx context.Context, rq *request) (any, error) {
	body, err := rq.bodyDict(nil)
	if err != nil {
		return nil, err
	}
	op := map[string]any{}
	for k, v := range body {
		op[k] = v
	}
	if v, ok := op["destination"]; ok {
		if _, both := op["target_node"]; both {
			return nil, errf(http.StatusBadRequest, "Parameter 'destination' has been renamed to 'target_node'; both were given")
		}
		op["target_node"] = v
		delete(op, "destination")
	}
	for k, v := range exportDefaults() {
		if _, set := op[k]; !set {
			op[k] = v
		}
	}
	static, err := rq.staticParams(map[string]any{"instance_name": rq.params[0]}, "dry-run")
	if err != nil {
		return nil, err
	}
	return h.submit(ctx, rq, "OP_BACKUP_EXPORT", static, op)
}
