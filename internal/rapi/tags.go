package rapi

import (
	"context"
	"net/http"

	"github.com/corral/corral/internal/opcodes"
)

// tagsChange answers PUT (add) and DELETE (remove) on a tags resource: the
// tags come from repeated ?tag= query parameters, as Ganeti's code and
// client send them (its documentation's body list is not what it reads).
// The job id is the answer. Tags are checked here, before any job exists,
// so a bad tag is a 400 the client sees at once rather than a failed job.
func (h *Handler) tagsChange(kind, opID string) handlerFunc {
	return func(ctx context.Context, rq *request) (any, error) {
		tags := rq.query["tag"]
		if len(tags) == 0 {
			if opID == "OP_TAGS_DEL" {
				return nil, errf(http.StatusBadRequest, "Cannot delete all tags - please specify tag(s) using the 'tag' parameter")
			}
			return nil, errf(http.StatusBadRequest, "Please specify tag(s) to add using the 'tag' parameter")
		}
		list := make([]any, len(tags))
		for i, t := range tags {
			if err := opcodes.ValidateTag(t); err != nil {
				return nil, err
			}
			list[i] = t
		}
		static := map[string]any{"kind": kind, "tags": list}
		if kind != opcodes.TagCluster {
			static["name"] = rq.params[0]
		}
		static, err := rq.staticParams(static, "dry-run")
		if err != nil {
			return nil, err
		}
		// Ganeti ignores any body here.
		return h.submit(ctx, rq, opID, static, nil)
	}
}
