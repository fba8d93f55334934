package query

import "github.com/corral/corral/internal/jobfilter"

// FilterRules is the job filter rule resource (Ganeti's "filter").
func FilterRules() *Resource[*jobfilter.Rule] {
	return NewResource("filter", []Field[*jobfilter.Rule]{
		{Name: "uuid", Title: "UUID", Kind: KOther, Doc: "Filter ID", Get: func(r *jobfilter.Rule) (any, int) { return ok(r.UUID) }},
		{Name: "watermark", Title: "Watermark", Kind: KOther, Doc: "Highest job ID handed out when the filter was added", Get: func(r *jobfilter.Rule) (any, int) { return ok(r.Watermark) }},
		{Name: "priority", Title: "Priority", Kind: KOther, Doc: "Filter priority (0 is evaluated first)", Get: func(r *jobfilter.Rule) (any, int) { return ok(r.Priority) }},
		{Name: "predicates", Title: "Predicates", Kind: KOther, Doc: "The filter's predicates, all of which a job must match", Get: func(r *jobfilter.Rule) (any, int) {
			if r.Predicates == nil {
				return ok([]jobfilter.Predicate{})
			}
			return ok(r.Predicates)
		}},
		{Name: "action", Title: "Action", Kind: KOther, Doc: "What happens to the jobs the filter applies to", Get: func(r *jobfilter.Rule) (any, int) {
			// As on the wire, so that filters compare with "REJECT".
			if r.Action.Kind == jobfilter.RateLimit {
				return ok([]any{r.Action.Kind, r.Action.Limit})
			}
			return ok(r.Action.Kind)
		}},
		{Name: "reason_trail", Title: "ReasonTrail", Kind: KOther, Doc: "Why the filter was added", Get: func(r *jobfilter.Rule) (any, int) {
			if r.ReasonTrail == nil {
				return ok([]any{})
			}
			return ok(r.ReasonTrail)
		}},
	})
}
