package master

import (
	"context"
	"encoding/json"
	"slices"
	"time"

	"github.com/corral/corral/internal/ecode"
	"github.com/corral/corral/internal/jobfilter"
	"github.com/corral/corral/internal/luxi"
	"github.com/corral/corral/internal/query"
)

// The job filter rules (gnt-filter) over LUXI; the job queue keeps and
// enforces them.

var qFilter = query.FilterRules()

func init() {
	luxiMethods[luxi.MethodQueryFilters] = (*luxiHandler).luxiQueryFilters
	luxiMethods[luxi.MethodReplaceFilter] = (*luxiHandler).luxiReplaceFilter
	luxiMethods[luxi.MethodDeleteFilter] = (*luxiHandler).luxiDeleteFilter
}

// filterRows are the rules with the given uuids (all when none), in
// evaluation order; an unknown uuid is an error.
func (d *Daemon) filterRows(uuids []string) ([]*jobfilter.Rule, error) {
	all := d.queue.Filters()
	if len(uuids) == 0 {
		return all, nil
	}
	out := make([]*jobfilter.Rule, 0, len(uuids))
	for _, id := range uuids {
		i := slices.IndexFunc(all, func(r *jobfilter.Rule) bool { return r.UUID == id })
		if i < 0 {
			return nil, ecode.Errorf(ecode.NoEnt, "Filter uuid %s not found", id)
		}
		out = append(out, all[i])
	}
	return out, nil
}

// luxiQueryFilters answers QueryFilters [uuids or null, fields].
func (h *luxiHandler) luxiQueryFilters(_ context.Context, args []json.RawMessage) (any, error) {
	uuids, err := optArg[[]string](args, 0, nil)
	if err != nil {
		return nil, err
	}
	fields, err := arg[[]string](args, 1, "fields")
	if err != nil {
		return nil, err
	}
	if err := qFilter.Check(fields); err != nil {
		return nil, err
	}
	rows, err := h.d.filterRows(uuids)
	if err != nil {
		return nil, err
	}
	return classic(qFilter, rows, fields)
}

// reasonSourceLUXI names the LUXI server in the reason trail of a rule it
// stores, as Ganeti's does.
const reasonSourceLUXI = "luxid"

// luxiReplaceFilter answers ReplaceFilter [uuid or null, priority,
// predicates, action, reason]: it returns the rule's uuid.
func (h *luxiHandler) luxiReplaceFilter(ctx context.Context, args []json.RawMessage) (any, error) {
	id, err := optArg(args, 0, "")
	if err != nil {
		return nil, err
	}
	prio, err := arg[int](args, 1, "priority")
	if err != nil {
		return nil, err
	}
	if prio < 0 {
		return nil, ecode.Errorf(ecode.Inval, "Filter priority must be a non-negative integer, got %d", prio)
	}
	var r jobfilter.Rule
	if len(args) < 5 {
		return nil, ecode.Errorf(ecode.Inval, "ReplaceFilter takes 5 arguments (uuid, priority, predicates, action, reason), got %d", len(args))
	}
	if err := json.Unmarshal(args[2], &r.Predicates); err != nil {
		return nil, filterArgErr("predicates", err)
	}
	if err := json.Unmarshal(args[3], &r.Action); err != nil {
		return nil, filterArgErr("action", err)
	}
	reason, err := arg[[]any](args, 4, "reason")
	if err != nil {
		return nil, err
	}
	for _, e := range reason {
		if l, ok := e.([]any); !ok || len(l) != 3 {
			return nil, ecode.Errorf(ecode.Inval, "A reason trail entry must be [source, reason, timestamp], got %v", e)
		}
	}
	r.UUID, r.Priority = id, prio
	r.ReasonTrail = append(reason, []any{reasonSourceLUXI, "", time.Now().UnixNano()})
	return h.d.queue.ReplaceFilter(ctx, r)
}

func filterArgErr(what string, err error) error {
	if e, ok := ecode.As(err); ok {
		return e
	}
	return ecode.Errorf(ecode.Inval, "Invalid filter %s: %w", what, err)
}

// luxiDeleteFilter answers DeleteFilter [uuid].
func (h *luxiHandler) luxiDeleteFilter(ctx context.Context, args []json.RawMessage) (any, error) {
	id, err := arg[string](args, 0, "uuid")
	if err != nil {
		return nil, err
	}
	return nil, h.d.queue.DeleteFilter(ctx, id)
}
