package boltstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/corral/corral/internal/store"
)

// leaseState is a live lease as the store tracks it in memory. Expiry is
// kept only here: renewals are not persisted, because Open grants every
// lease a fresh TTL anyway and a write per heartbeat would buy nothing.
type leaseState struct {
	ttl      int64
	expiry   time.Time
	revoking bool // a revoke or expiry is being committed; renewals fail
}

// maxLeaseTTL is etcd's limit, in seconds.
const maxLeaseTTL = 9_000_000_000

// Grant implements store.Store. The lease (id, TTL, expiry) is durable when
// Grant returns. Ids are never reused.
func (s *Store) Grant(ctx context.Context, ttlSeconds int64) (int64, error) {
	if ttlSeconds <= 0 || ttlSeconds > maxLeaseTTL {
		return 0, fmt.Errorf("grant: ttl %d (want 1 to %d): %w", ttlSeconds, maxLeaseTTL, store.ErrInvalid)
	}
	r := &request{kind: reqGrant, ttl: ttlSeconds}
	if err := s.submit(ctx, r); err != nil {
		return 0, fmt.Errorf("grant: %w", err)
	}
	if r.err != nil {
		return 0, fmt.Errorf("grant: %w", r.err)
	}
	return r.lease, nil
}

// KeepAlive implements store.Store: the lease expires one TTL from now.
func (s *Store) KeepAlive(ctx context.Context, lease int64) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if s.closed() {
		return store.ErrClosed
	}
	now := s.now()
	s.leaseMu.Lock()
	defer s.leaseMu.Unlock()
	l := s.leases[lease]
	if l == nil || l.revoking || !l.expiry.After(now) {
		return fmt.Errorf("keepalive %d: %w", lease, store.ErrNoLease)
	}
	l.expiry = now.Add(time.Duration(l.ttl) * time.Second)
	return nil
}

// Revoke implements store.Store: the lease's keys are deleted in one
// revision.
func (s *Store) Revoke(ctx context.Context, lease int64) error {
	r := &request{kind: reqRevoke, leases: []int64{lease}}
	if err := s.submit(ctx, r); err != nil {
		return fmt.Errorf("revoke %d: %w", lease, err)
	}
	if r.err != nil {
		return fmt.Errorf("revoke %d: %w", lease, r.err)
	}
	return nil
}

func (s *Store) applyGrant(st *batchState, r *request) error {
	id := st.leaseID + 1
	expiry := st.now.Add(time.Duration(r.ttl) * time.Second)
	if err := st.lease.Put(be64(id), encodeLease(leaseRecord{ttl: r.ttl, expiry: expiry.Unix()})); err != nil {
		return err
	}
	st.leaseID = id
	r.lease = id
	r.expiry = expiry
	return nil
}

// applyRevoke deletes each lease of r with its keys, one revision per lease
// that had keys. For reqExpire it skips leases renewed since they were found
// expired.
func (s *Store) applyRevoke(st *batchState, r *request) error {
	for _, id := range r.leases {
		s.leaseMu.Lock()
		l := s.leases[id]
		due := l != nil && (l.revoking || !l.expiry.After(st.now))
		if l != nil && (r.kind == reqRevoke || due) {
			l.revoking = true
		}
		s.leaseMu.Unlock()
		if r.kind == reqExpire && !due {
			continue
		}
		idb := be64(id)
		if st.lease.Get(idb) == nil {
			if r.kind == reqRevoke {
				r.err = store.ErrNoLease
				return nil
			}
			continue
		}
		var keys []string
		c := st.leaseKeys.Cursor()
		for k, _ := c.Seek(idb); k != nil && hasPrefix(k, string(idb)); k, _ = c.Next() {
			keys = append(keys, string(k[8:]))
		}
		rev := st.rev + 1
		n := len(r.events)
		for _, key := range keys {
			rec := st.kv.Get([]byte(key))
			if rec != nil {
				h, _, err := decodeKV(rec)
				if err != nil {
					return fmt.Errorf("key %q: %w", key, err)
				}
				if h.lease == id {
					if err := s.deleteKey(st, rev, []byte(key), r); err != nil {
						return err
					}
				}
			}
			if err := st.leaseKeys.Delete(leaseKey(id, key)); err != nil {
				return err
			}
		}
		if err := st.lease.Delete(idb); err != nil {
			return err
		}
		r.revoked = append(r.revoked, id)
		if len(r.events) > n {
			st.rev = rev
		}
	}
	r.res.Revision = st.rev
	return nil
}

// afterCommit brings the in-memory leases in line with the outcome of r.
func (s *Store) afterCommit(r *request, committed bool) {
	if r.kind == reqTxn {
		return
	}
	s.leaseMu.Lock()
	defer s.leaseMu.Unlock()
	switch {
	case r.kind == reqGrant && committed:
		s.leases[r.lease] = &leaseState{ttl: r.ttl, expiry: r.expiry}
	case r.kind == reqRevoke || r.kind == reqExpire:
		if committed {
			for _, id := range r.revoked {
				delete(s.leases, id)
			}
		}
		// Leases marked but not deleted stay alive.
		for _, id := range r.leases {
			if l := s.leases[id]; l != nil {
				l.revoking = false
			}
		}
	}
}

// leaseLoop reaps expired leases until the store closes.
func (s *Store) leaseLoop() {
	defer s.wg.Done()
	t := time.NewTicker(leaseTick)
	defer t.Stop()
	for {
		select {
		case <-s.closing:
			return
		case <-t.C:
			s.expireLeases()
		}
	}
}

// expireLeases revokes every lease past its expiry.
func (s *Store) expireLeases() {
	now := s.now()
	var ids []int64
	s.leaseMu.Lock()
	for id, l := range s.leases {
		if !l.revoking && !l.expiry.After(now) {
			ids = append(ids, id)
		}
	}
	s.leaseMu.Unlock()
	if len(ids) == 0 {
		return
	}
	slices.Sort(ids)
	r := &request{kind: reqExpire, leases: ids}
	if err := s.submit(context.Background(), r); err != nil {
		if !errors.Is(err, store.ErrClosed) {
			s.log.Warn("lease expiry failed", "leases", ids, "err", err)
		}
		return
	}
	if r.err != nil {
		s.log.Warn("lease expiry failed", "leases", ids, "err", r.err)
		return
	}
	s.log.Debug("leases expired", "leases", r.revoked, "revision", r.res.Revision)
}
