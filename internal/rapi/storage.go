package rapi

import (
	"context"
	"net/http"
	"strings"
)

// queryString is a string query parameter (its first value), "" when
// absent, as Ganeti's _checkStringVariable.
func (rq *request) queryString(name string) string {
	if v := rq.query[name]; len(v) > 0 {
		return v[0]
	}
	return ""
}

// maybeString is nil for "", so an absent parameter is the opcode's null.
func maybeString(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// nodeStorage is GET /2/nodes/{name}/storage: OP_NODE_QUERY_STORAGE for the
// node, as a job (Ganeti's resource takes locks, hence a job and the write
// option even for a GET). output_fields is required.
func (h *Handler) nodeStorage(ctx context.Context, rq *request) (any, error) {
	fields := rq.queryString("output_fields")
	if fields == "" {
		return nil, errf(http.StatusBadRequest, "Missing the required 'output_fields' parameter")
	}
	static := map[string]any{"nodes": []any{rq.params[0]}, "storage_type": maybeString(rq.queryString("storage_type")),
		"output_fields": toAnyList(strings.Split(fields, ","))}
	return h.submit(ctx, rq, "OP_NODE_QUERY_STORAGE", static, nil)
}

// nodeStorageModify is PUT /2/nodes/{name}/storage/modify:
// OP_NODE_MODIFY_STORAGE of the unit ?name=, with ?allocatable=0|1.
func (h *Handler) nodeStorageModify(ctx context.Context, rq *request) (any, error) {
	name := rq.queryString("name")
	if name == "" {
		return nil, errf(http.StatusBadRequest, "Missing the required 'name' parameter")
	}
	changes := map[string]any{}
	if _, ok := rq.query["allocatable"]; ok {
		v, err := rq.intParam("allocatable", 1)
		if err != nil {
			return nil, err
		}
		changes["allocatable"] = v != 0
	}
	static := map[string]any{"node_name": rq.params[0], "storage_type": maybeString(rq.queryString("storage_type")),
		"name": name, "changes": changes}
	return h.submit(ctx, rq, "OP_NODE_MODIFY_STORAGE", static, nil)
}

// nodeStorageRepair is PUT /2/nodes/{name}/storage/repair:
// OP_REPAIR_NODE_STORAGE of the unit ?name=.
func (h *Handler) nodeStorageRepair(ctx context.Context, rq *request) (any, error) {
	name := rq.queryString("name")
	if name == "" {
		return nil, errf(http.StatusBadRequest, "Missing the required 'name' parameter")
	}
	static := map[string]any{"node_name": rq.params[0], "storage_type": maybeString(rq.queryString("storage_type")), "name": name}
	return h.submit(ctx, rq, "OP_REPAIR_NODE_STORAGE", static, nil)
}

func toAnyList(l []string) []any {
	out := make([]any, len(l))
	for i, s := range l {
		out[i] = s
	}
	return out
}
