package rapi

import (
	"context"
	"net/http"
	"strconv"

	"github.com/corral/corral/internal/ecode"
)

// maxDiskIndex bounds the {id} of /2/instances/[i]/disk/[n]/grow, as
// Ganeti's 16 disks per instance.
const maxDiskIndex = 16

// osBulkFields are the keys of a /2/os?bulk=1 entry.
var osBulkFields = []string{"name", "valid", "variants", "parameters", "api_versions", "blacklisted", "hidden", "trusted"}

// Job statuses after which a job no longer changes.
var finalJobStatus = map[string]bool{"success": true, "error": true, "canceled": true}

// instanceActivateDisks is PUT …/activate-disks: Ganeti ignores the body.
func (h *Handler) instanceActivateDisks() handlerFunc {
	return h.instanceAction("OP_INSTANCE_ACTIVATE_DISKS", []string{}, []string{"ignore_size"}, nil)
}

// instanceDeactivateDisks is PUT …/deactivate-disks.
func (h *Handler) instanceDeactivateDisks() handlerFunc {
	return h.instanceAction("OP_INSTANCE_DEACTIVATE_DISKS", []string{}, []string{"force"}, nil)
}

// instanceGrowDisk is POST …/disk/[n]/grow: the index is static, the body
// carries amount, absolute, wait_for_sync and ignore_ipolicy.
func (h *Handler) instanceGrowDisk(ctx context.Context, rq *request) (any, error) {
	idx, err := strconv.Atoi(rq.params[1])
	if err != nil || idx < 0 || idx >= maxDiskIndex {
		return nil, errf(http.StatusBadRequest, "Invalid disk index '%s'", rq.params[1])
	}
	body, err := rq.bodyDict(nil)
	if err != nil {
		return nil, err
	}
	return h.submit(ctx, rq, "OP_INSTANCE_GROW_DISK", map[string]any{"instance_name": rq.params[0], "disk": idx}, body)
}

// instanceConsole is GET …/console. As Ganeti, a stopped instance is a 503;
// the dict itself comes from the console opcode, run to completion.
func (h *Handler) instanceConsole(ctx context.Context, rq *request) (any, error) {
	rows, err := h.be.QueryInstances(ctx, rq.params[:1], []string{"oper_state"})
	if err != nil {
		return nil, notFoundIfNoEnt(err)
	}
	if len(rows) == 0 || len(rows[0]) == 0 {
		return nil, errNotFound
	}
	if up, _ := rows[0][0].(bool); !up {
		return nil, errf(http.StatusServiceUnavailable, "Instance console unavailable")
	}
	return h.runOpSync(ctx, rq, "OP_INSTANCE_CONSOLE", map[string]any{"instance_name": rq.params[0]})
}

// osList is GET /2/os: the names a client may install, "name+variant" for
// an OS with variants; with bulk=1 the dicts of every OS, unfiltered.
func (h *Handler) osList(ctx context.Context, rq *request) (any, error) {
	bulk, err := rq.intParam("bulk", 0)
	if err != nil {
		return nil, err
	}
	fields := []string{"name", "variants"}
	if bulk != 0 {
		fields = osBulkFields
	}
	res, err := h.runOpSync(ctx, rq, "OP_OS_DIAGNOSE", map[string]any{"output_fields": fields, "names": []any{}})
	if err != nil {
		return nil, err
	}
	list, ok := res.([]any)
	if !ok {
		return nil, errf(http.StatusBadGateway, "Can't get OS list")
	}
	if bulk != 0 {
		out := make([]map[string]any, 0, len(list))
		for _, r := range list {
			row, _ := r.([]any)
			m := rowsToDicts(fields, [][]any{row})
			if len(m) == 0 {
				continue
			}
			m[0]["parameters"] = osParamDicts(m[0]["parameters"])
			out = append(out, m[0])
		}
		return out, nil
	}
	names := []string{}
	for _, r := range list {
		row, _ := r.([]any)
		if len(row) != 2 {
			return nil, errf(http.StatusBadGateway, "Can't get OS list")
		}
		names = append(names, osNames(row[0], row[1])...)
	}
	return names, nil
}

// osNames expands an OS into the names it is installed by.
func osNames(name, variants any) []string {
	n, _ := name.(string)
	vs, _ := variants.([]any)
	if len(vs) == 0 {
		return []string{n}
	}
	out := make([]string, 0, len(vs))
	for _, v := range vs {
		if s, ok := v.(string); ok {
			out = append(out, n+"+"+s)
		}
	}
	return out
}

// osParamDicts turns [[name, doc], …] into [{name, description}, …].
func osParamDicts(v any) []map[string]any {
	l, _ := v.([]any)
	out := make([]map[string]any, 0, len(l))
	for _, p := range l {
		pair, _ := p.([]any)
		if len(pair) == 2 {
			out = append(out, map[string]any{"name": pair[0], "description": pair[1]})
		}
	}
	return out
}

// runOpSync submits one opcode and waits for its result, as Ganeti's RAPI
// does for the few resources that answer with data instead of a job id. A
// failed job answers with its error.
func (h *Handler) runOpSync(ctx context.Context, rq *request, opID string, static map[string]any) (any, error) {
	op, err := h.buildOp(rq, opID, static, nil)
	if err != nil {
		return nil, err
	}
	id, err := h.be.SubmitJob(ctx, []any{op})
	if err != nil {
		return nil, err
	}
	var prev []any
	for {
		ch, err := h.be.WaitForJobChange(ctx, id, []string{"status"}, prev, nil, waitTimeout)
		if err != nil {
			return nil, err
		}
		if !ch.NoChange {
			prev = ch.JobInfo
		}
		if len(prev) > 0 {
			if st, _ := prev[0].(string); finalJobStatus[st] {
				break
			}
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
	}
	rows, err := h.be.QueryJobs(ctx, []int64{id}, []string{"status", "opresult"})
	if err != nil {
		return nil, err
	}
	if len(rows) != 1 || len(rows[0]) != 2 {
		return nil, errf(http.StatusBadGateway, "Job %d vanished before its result was read", id)
	}
	status, _ := rows[0][0].(string)
	results, _ := rows[0][1].([]any)
	var first any
	if len(results) > 0 {
		first = results[0]
	}
	switch status {
	case "success":
		return first, nil
	case "canceled":
		return nil, errf(http.StatusInternalServerError, "Job %d was canceled", id)
	}
	if first == nil {
		return nil, errf(http.StatusInternalServerError, "Job %d failed", id)
	}
	return nil, ecode.Decode(first)
}
