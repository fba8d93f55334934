package etcdstore

import (
	"context"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/corral/corral/internal/store"
)

// Grant implements store.Store. etcd raises a TTL below its minimum (about
// 1.5 election timeouts, 2 s with default settings) to that minimum.
func (s *Store) Grant(ctx context.Context, ttlSeconds int64) (int64, error) {
	// etcd would take 0 or less as its minimum TTL; the store refuses it.
	if ttlSeconds <= 0 || ttlSeconds > maxLeaseTTL {
		return 0, fmt.Errorf("grant: ttl %d (want 1 to %d): %w", ttlSeconds, int64(maxLeaseTTL), store.ErrInvalid)
	}
	if err := s.check(ctx); err != nil {
		return 0, fmt.Errorf("grant: %w", err)
	}
	resp, err := s.cli.Grant(ctx, ttlSeconds)
	if err != nil {
		return 0, fmt.Errorf("grant: %w", s.mapErr(err))
	}
	return int64(resp.ID), nil
}

// KeepAlive implements store.Store with a single renewal. The client's
// streaming keep-alive is not used: the caller decides when to renew, and a
// failed renewal must reach it as an error.
func (s *Store) KeepAlive(ctx context.Context, lease int64) error {
	if err := s.check(ctx); err != nil {
		return fmt.Errorf("keepalive %d: %w", lease, err)
	}
	if _, err := s.cli.KeepAliveOnce(ctx, clientv3.LeaseID(lease)); err != nil {
		return fmt.Errorf("keepalive %d: %w", lease, s.mapErr(err))
	}
	return nil
}

// Revoke implements store.Store: etcd deletes the lease's keys in one
// revision.
func (s *Store) Revoke(ctx context.Context, lease int64) error {
	if err := s.check(ctx); err != nil {
		return fmt.Errorf("revoke %d: %w", lease, err)
	}
	if _, err := s.cli.Revoke(ctx, clientv3.LeaseID(lease)); err != nil {
		return fmt.Errorf("revoke %d: %w", lease, s.mapErr(err))
	}
	return nil
}
