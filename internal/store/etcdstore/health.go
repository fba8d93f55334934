package etcdstore

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/corral/corral/internal/store"
)

// memberStatusTimeout bounds the status call to one member.
const memberStatusTimeout = 3 * time.Second

// Health implements store.HealthReporter: it lists the etcd cluster's members and asks each for its status.
// The member list comes from whichever member the client reaches; an
// error means no member answered at all.
func (s *Store) Health(ctx context.Context) ([]store.MemberHealth, error) {
	if err := s.check(ctx); err != nil {
		return nil, err
	}
	list, err := s.cli.MemberList(ctx)
	if err != nil {
		return nil, fmt.Errorf("etcd member list: %w", s.mapErr(err))
	}
	out := make([]store.MemberHealth, 0, len(list.Members))
	for _, m := range list.Members {
		h := store.MemberHealth{Name: m.Name}
		if len(m.ClientURLs) == 0 {
			h.Err = "no client URL (not started yet?)"
			out = append(out, h)
			continue
		}
		h.Endpoint = m.ClientURLs[0]
		sctx, cancel := context.WithTimeout(ctx, memberStatusTimeout)
		st, err := s.cli.Status(sctx, h.Endpoint)
		cancel()
		switch {
		case err != nil:
			h.Err = s.mapErr(err).Error()
		case st.Leader == 0:
			h.Err = "has no leader"
		default:
			h.Healthy = true
			h.Leader = st.Leader == m.ID
			h.DBSize, h.RaftIndex = st.DbSize, st.RaftIndex
			for _, e := range st.Errors {
				h.Healthy, h.Err = false, e
			}
		}
		out = append(out, h)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}
