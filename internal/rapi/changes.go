package rapi

import (
	"context"
	"net/http"
)

// groupFields is Ganeti's G_FIELDS; groupFieldsAbsent lists those answered
// as null until corrald computes them (none today).
var (
	groupFields = []string{"alloc_policy", "name", "node_cnt", "node_list", "ipolicy", "custom_ipolicy",
		"diskparams", "custom_diskparams", "ndparams", "custom_ndparams", "ctime", "mtime", "uuid",
		"serial_no", "tags"}
	groupFieldsAbsent = map[string]bool{}
)

// groups is the /2/groups collection (its list keys names by "name").
var groups = collection{
	fields: groupFields, absent: groupFieldsAbsent, idKey: "name", prefix: "/2/groups/",
	query: Backend.QueryGroups,
}

// nodeRoleSet is PUT /2/nodes/[n]/role: the body is a bare role string.
func (h *Handler) nodeRoleSet(ctx context.Context, rq *request) (any, error) {
	role, ok := rq.body.(string)
	if !ok {
		return nil, errf(http.StatusBadRequest, "Invalid body contents, expected a role string")
	}
	static := map[string]any{"node_name": rq.params[0]}
	switch role {
	case "regular":
		static["master_candidate"], static["offline"], static["drained"] = false, false, false
	case "master-candidate":
		static["master_candidate"] = true
	case "drained":
		static["drained"] = true
	case "offline":
		static["offline"] = true
	default:
		return nil, errf(http.StatusBadRequest, "Can't set '%s' role", role)
	}
	static, err := rq.staticParams(static, "force", "auto-promote")
	if err != nil {
		return nil, err
	}
	return h.submit(ctx, rq, "OP_NODE_SET_PARAMS", static, nil)
}

// instanceModify is PUT /2/instances/[i]/modify; Ganeti accepts the
// custom_* names of its query fields for the parameter dicts.
func (h *Handler) instanceModify(ctx context.Context, rq *request) (any, error) {
	body, err := rq.bodyDict(nil)
	if err != nil {
		return nil, err
	}
	if body != nil {
		renamed := make(map[string]any, len(body))
		for k, v := range body {
			renamed[k] = v
		}
		for from, to := range map[string]string{"custom_beparams": "beparams", "custom_hvparams": "hvparams"} {
			v, ok := renamed[from]
			if !ok {
				continue
			}
			if _, both := renamed[to]; both {
				return nil, errf(http.StatusBadRequest, "Parameter '%s' has been renamed to '%s'; both were given", from, to)
			}
			renamed[to] = v
			delete(renamed, from)
		}
		body = renamed
	}
	static, err := rq.staticParams(map[string]any{"instance_name": rq.params[0]}, "dry-run")
	if err != nil {
		return nil, err
	}
	return h.submit(ctx, rq, "OP_INSTANCE_SET_PARAMS", static, body)
}

// instanceReinstall is POST /2/instances/[i]/reinstall: one job of
// shutdown, reinstall and (unless start is false) startup.
func (h *Handler) instanceReinstall(ctx context.Context, rq *request) (any, error) {
	name := rq.params[0]
	osType, start, osparams, err := reinstallArgs(rq)
	if err != nil {
		return nil, err
	}
	static := func(extra map[string]any) map[string]any {
		m := map[string]any{"instance_name": name}
		for k, v := range extra {
			m[k] = v
		}
		return m
	}
	reinstall := map[string]any{"os_type": osType}
	if osparams != nil {
		reinstall["osparams"] = osparams
	}
	specs := []struct {
		id     string
		params map[string]any
	}{
		{"OP_INSTANCE_SHUTDOWN", static(nil)},
		{"OP_INSTANCE_REINSTALL", static(reinstall)},
	}
	if start {
		specs = append(specs, struct {
			id     string
			params map[string]any
		}{"OP_INSTANCE_STARTUP", static(map[string]any{"force": false})})
	}
	ops := make([]any, 0, len(specs))
	for _, s := range specs {
		op, err := h.buildOp(rq, s.id, s.params, nil)
		if err != nil {
			return nil, err
		}
		ops = append(ops, op)
	}
	return h.be.SubmitJob(ctx, ops)
}

// reinstallArgs reads the body form (os, start, osparams) or the legacy
// query form (os=, nostartup=); mixing them is an error, as in Ganeti.
func reinstallArgs(rq *request) (osType any, start bool, osparams any, err error) {
	m, isDict := rq.body.(map[string]any)
	if rq.hasBdy && !isDict {
		return nil, false, nil, errf(http.StatusBadRequest, "Invalid body contents, not a dictionary")
	}
	_, qOS := rq.query["os"]
	_, qNoStart := rq.query["nostartup"]
	if isDict && len(m) > 0 {
		if qOS || qNoStart {
			return nil, false, nil, errf(http.StatusBadRequest, "Can't combine query and body parameters")
		}
		for k := range m {
			if k != "os" && k != "start" && k != "osparams" {
				return nil, false, nil, errf(http.StatusBadRequest, "Invalid body parameters: unknown parameter %q", k)
			}
		}
		start = true
		if v, ok := m["start"]; ok {
			b, ok := v.(bool)
			if !ok {
				return nil, false, nil, errf(http.StatusBadRequest, "Invalid body parameters: 'start' must be a boolean")
			}
			start = b
		}
		return m["os"], start, m["osparams"], nil
	}
	nostart, err := rq.intParam("nostartup", 0)
	if err != nil {
		return nil, false, nil, err
	}
	if qOS {
		osType = rq.query["os"][0]
	}
	return osType, nostart == 0, nil, nil
}
