package etcdstore

import (
	"context"
	"errors"
	"fmt"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"

	"github.com/corral/corral/internal/etcdproc"
	"github.com/corral/corral/internal/store"
)

// The membership API: what a cluster whose members Corral manages needs to
// add a member as a learner, promote it to a voter and remove it. Errors
// the caller acts on wrap store.ErrLearnerNotReady and
// store.ErrMemberNotFound, so that callers need not link etcd's client.

// Members lists the etcd cluster's members as the member the client reaches
// knows them.
func (s *Store) Members(ctx context.Context) ([]etcdproc.MemberInfo, error) {
	if err := s.check(ctx); err != nil {
		return nil, err
	}
	resp, err := s.cli.MemberList(ctx)
	if err != nil {
		return nil, fmt.Errorf("etcd member list: %w", s.mapMemberErr(err))
	}
	out := make([]etcdproc.MemberInfo, 0, len(resp.Members))
	for _, m := range resp.Members {
		out = append(out, etcdproc.MemberInfo{ID: m.ID, Name: m.Name, PeerURLs: m.PeerURLs, ClientURLs: m.ClientURLs, Learner: m.IsLearner})
	}
	return out, nil
}

// AddLearner adds a non-voting member that will listen on peerURL and
// returns its id. The learner takes no part in the quorum until promoted,
// so adding it cannot cost the cluster its quorum even if it never starts.
func (s *Store) AddLearner(ctx context.Context, peerURL string) (uint64, error) {
	if err := s.check(ctx); err != nil {
		return 0, err
	}
	resp, err := s.cli.MemberAddAsLearner(ctx, []string{peerURL})
	if err != nil {
		return 0, fmt.Errorf("etcd member add %s as learner: %w", peerURL, s.mapMemberErr(err))
	}
	return resp.Member.ID, nil
}

// PromoteMember makes the learner id a voting member. It fails with
// store.ErrLearnerNotReady until the learner has caught up.
func (s *Store) PromoteMember(ctx context.Context, id uint64) error {
	if err := s.check(ctx); err != nil {
		return err
	}
	if _, err := s.cli.MemberPromote(ctx, id); err != nil {
		return fmt.Errorf("etcd member promote %x: %w", id, s.mapMemberErr(err))
	}
	return nil
}

// RemoveMember removes member id from the cluster; store.ErrMemberNotFound
// when it is not (or no longer) a member, store.ErrReconfigUnsafe while
// etcd cannot tell the members left would keep a quorum.
func (s *Store) RemoveMember(ctx context.Context, id uint64) error {
	if err := s.check(ctx); err != nil {
		return err
	}
	if _, err := s.cli.MemberRemove(ctx, id); err != nil {
		return fmt.Errorf("etcd member remove %x: %w", id, s.mapMemberErr(err))
	}
	return nil
}

func (s *Store) mapMemberErr(err error) error {
	switch {
	case errors.Is(err, rpctypes.ErrMemberLearnerNotReady):
		return fmt.Errorf("%w (etcd: %w)", store.ErrLearnerNotReady, err)
	case errors.Is(err, rpctypes.ErrMemberNotFound):
		return fmt.Errorf("%w (etcd: %w)", store.ErrMemberNotFound, err)
	case errors.Is(err, rpctypes.ErrUnhealthy):
		return fmt.Errorf("%w (etcd: %w)", store.ErrReconfigUnsafe, err)
	}
	return s.mapErr(err)
}
