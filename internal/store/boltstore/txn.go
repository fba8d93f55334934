package boltstore

import (
	"context"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/corral/corral/internal/store"
)

// maxBatch caps how many requests share one bbolt transaction, so that one
// commit stays short even under a flood of writers.
const maxBatch = 1000

type reqKind int

const (
	reqTxn reqKind = iota
	reqGrant
	reqRevoke
	reqExpire
)

// request is one write handed to the commit loop. Its outputs are reset by
// every apply, because a batch whose bbolt transaction fails is re-run one
// request at a time and only the final run counts.
type request struct {
	kind      reqKind
	cmps      []store.Cmp
	then, els []store.Op
	ttl       int64   // reqGrant
	leases    []int64 // reqRevoke (one id), reqExpire

	res     store.TxnResult
	lease   int64         // reqGrant: the new id
	expiry  time.Time     // reqGrant: its first expiry
	revoked []int64       // reqRevoke, reqExpire: leases deleted
	events  []store.Event // in revision order
	err     error         // this request's own failure; nothing of it was written
	done    chan struct{}
}

func (r *request) reset() {
	r.res = store.TxnResult{}
	r.lease = 0
	r.revoked = r.revoked[:0]
	r.events = r.events[:0]
	r.err = nil
}

// batchState is what one bbolt write transaction has allocated so far.
type batchState struct {
	rev, leaseID int64
	now          time.Time
	kv, lease    *bolt.Bucket
	leaseKeys    *bolt.Bucket
}

// Txn implements store.Store. The request is checked with store.CheckTxn
// (limits per list, request size over both branches). A transaction that
// cannot write in either branch runs in a read transaction without waiting
// for the commit loop.
//
// Once a writing transaction has been handed to the commit loop, Txn waits
// for its outcome even if ctx ends, so that the caller never has to guess
// whether it was applied.
func (s *Store) Txn(ctx context.Context, cmps []store.Cmp, then, els []store.Op) (store.TxnResult, error) {
	if err := store.CheckTxn(cmps, then, els); err != nil {
		return store.TxnResult{}, fmt.Errorf("txn: %w", err)
	}
	if err := checkKeyLens(then, els); err != nil {
		return store.TxnResult{}, fmt.Errorf("txn: %w", err)
	}
	r := &request{kind: reqTxn, cmps: cmps, then: then, els: els}
	if !store.HasWrites(then) && !store.HasWrites(els) {
		err := s.view(ctx, func(tx *bolt.Tx) error {
			rev, err := readInt(tx.Bucket(bucketMeta), metaRev)
			if err != nil {
				return err
			}
			st := batchState{rev: rev, kv: tx.Bucket(bucketKV)}
			return s.applyTxn(&st, r)
		})
		if err == nil {
			err = r.err
		}
		if err != nil {
			return store.TxnResult{}, fmt.Errorf("txn: %w", err)
		}
		return r.res, nil
	}
	if err := s.submit(ctx, r); err != nil {
		return store.TxnResult{}, fmt.Errorf("txn: %w", err)
	}
	if r.err != nil {
		return store.TxnResult{}, fmt.Errorf("txn: %w", r.err)
	}
	return r.res, nil
}

// checkKeyLens rejects keys that bbolt cannot hold; etcd would take them, but
// no key of Corral's comes near.
func checkKeyLens(branches ...[]store.Op) error {
	for _, ops := range branches {
		for i := range ops {
			if len(ops[i].Key) > maxKeyLen {
				return fmt.Errorf("key of %d bytes (max %d): %w", len(ops[i].Key), maxKeyLen, store.ErrTooLarge)
			}
		}
	}
	return nil
}

// submit hands r to the commit loop and waits until it is durable (or
// failed).
func (s *Store) submit(ctx context.Context, r *request) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	r.done = make(chan struct{})
	select {
	case s.reqs <- r:
	case <-s.closing:
		return store.ErrClosed
	case <-ctx.Done():
		return ctx.Err()
	}
	<-r.done
	return nil
}

// commitLoop gathers the requests waiting at the moment into one bbolt
// transaction. While it commits, new writers queue on the channel and form
// the next batch: that is the group commit.
func (s *Store) commitLoop() {
	defer s.wg.Done()
	batch := make([]*request, 0, 64)
	for {
		select {
		case r := <-s.reqs:
			batch = append(batch, r)
		case <-s.closing:
			return
		}
	gather:
		for len(batch) < maxBatch {
			select {
			case r := <-s.reqs:
				batch = append(batch, r)
			default:
				break gather
			}
		}
		s.commit(batch)
		clear(batch)
		batch = batch[:0]
	}
}

// commit runs batch in one bbolt transaction, then publishes the events in
// revision order and releases the callers. If the transaction fails, each
// request is retried alone so that one bad request cannot fail the others.
func (s *Store) commit(batch []*request) {
	var st batchState
	err := s.db.Update(func(tx *bolt.Tx) error {
		st = batchState{
			rev:       s.rev,
			leaseID:   s.leaseID,
			now:       s.now(),
			kv:        tx.Bucket(bucketKV),
			lease:     tx.Bucket(bucketLease),
			leaseKeys: tx.Bucket(bucketLeaseKeys),
		}
		for _, r := range batch {
			if err := s.apply(&st, r); err != nil {
				return err
			}
		}
		meta := tx.Bucket(bucketMeta)
		if st.rev != s.rev {
			if err := meta.Put(metaRev, be64(st.rev)); err != nil {
				return err
			}
		}
		if st.leaseID != s.leaseID {
			if err := meta.Put(metaLeaseID, be64(st.leaseID)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		if len(batch) > 1 {
			s.log.Warn("store batch commit failed; retrying requests one by one", "requests", len(batch), "err", err)
			for _, r := range batch {
				s.commit([]*request{r})
			}
			return
		}
		r := batch[0]
		r.reset()
		r.err = fmt.Errorf("commit: %w", err)
		s.log.Error("store commit failed", "err", err)
		s.afterCommit(r, false)
		close(r.done)
		return
	}
	s.rev, s.leaseID = st.rev, st.leaseID
	s.commits.Add(1)
	s.batched.Add(int64(len(batch)))
	s.revision.Store(st.rev)
	evs := make([][]store.Event, 0, len(batch))
	for _, r := range batch {
		s.afterCommit(r, r.err == nil)
		if len(r.events) > 0 {
			evs = append(evs, r.events)
		}
	}
	s.hub.publish(evs, st.rev)
	for _, r := range batch {
		close(r.done)
	}
}

// apply runs one request inside the batch's bbolt transaction. A failure
// of the request itself (an unknown lease) is found before it writes
// anything and goes to r.err; a returned error (I/O, corrupt record) aborts
// the whole bbolt transaction.
func (s *Store) apply(st *batchState, r *request) error {
	r.reset()
	switch r.kind {
	case reqTxn:
		return s.applyTxn(st, r)
	case reqGrant:
		return s.applyGrant(st, r)
	case reqRevoke, reqExpire:
		return s.applyRevoke(st, r)
	}
	return fmt.Errorf("unknown request kind %d", r.kind)
}

// applyTxn evaluates the compares and runs a branch. With a read-only bbolt
// transaction it must only be given branches without writes.
func (s *Store) applyTxn(st *batchState, r *request) error {
	r.reset()
	ok := true
	for i := range r.cmps {
		c := &r.cmps[i]
		var cur *store.KV
		if rec := st.kv.Get([]byte(c.Key)); rec != nil {
			h, v, err := decodeKV(rec)
			if err != nil {
				return fmt.Errorf("key %q: %w", c.Key, err)
			}
			cur = &store.KV{Key: c.Key, Value: v, CreateRevision: h.create, ModRevision: h.mod, Version: h.version, Lease: h.lease}
		}
		if !c.Matches(cur) {
			ok = false
			break
		}
	}
	ops := r.then
	if !ok {
		ops = r.els
	}
	// Check leases before writing anything, so the request fails whole.
	for i := range ops {
		if ops[i].Type == store.OpPut && ops[i].Lease != 0 && st.lease.Get(be64(ops[i].Lease)) == nil {
			r.err = fmt.Errorf("put %q with lease %d: %w", ops[i].Key, ops[i].Lease, store.ErrNoLease)
			return nil
		}
	}
	rev := st.rev + 1
	var results [][]store.KV
	if len(ops) > 0 {
		results = make([][]store.KV, len(ops))
	}
	for i := range ops {
		op := &ops[i]
		switch op.Type {
		case store.OpPut:
			if err := s.put(st, rev, op, r); err != nil {
				return err
			}
		case store.OpDelete:
			if err := s.deleteKey(st, rev, []byte(op.Key), r); err != nil {
				return err
			}
		case store.OpDeletePrefix:
			if err := s.deletePrefix(st, rev, op.Key, r); err != nil {
				return err
			}
		case store.OpGet:
			if rec := st.kv.Get([]byte(op.Key)); rec != nil {
				kv, err := toKV(op.Key, rec, false)
				if err != nil {
					return err
				}
				results[i] = []store.KV{kv}
			}
		case store.OpGetPrefix:
			kvs, err := scanPrefix(st.kv, op.Key, store.RangeOptions{})
			if err != nil {
				return err
			}
			results[i] = kvs
		}
	}
	if len(r.events) > 0 {
		st.rev = rev
	}
	r.res = store.TxnResult{Succeeded: ok, Revision: st.rev, Results: results}
	return nil
}

func (s *Store) put(st *batchState, rev int64, op *store.Op, r *request) error {
	key := []byte(op.Key)
	h := kvHeader{create: rev, mod: rev, version: 1, lease: op.Lease}
	if rec := st.kv.Get(key); rec != nil {
		old, _, err := decodeKV(rec)
		if err != nil {
			return fmt.Errorf("key %q: %w", op.Key, err)
		}
		h.create, h.version = old.create, old.version+1
		if old.lease != 0 && old.lease != op.Lease {
			if err := st.leaseKeys.Delete(leaseKey(old.lease, op.Key)); err != nil {
				return err
			}
		}
	}
	if op.Lease != 0 {
		if err := st.leaseKeys.Put(leaseKey(op.Lease, op.Key), []byte{}); err != nil {
			return err
		}
	}
	enc := encodeKV(h, op.Value)
	if err := st.kv.Put(key, enc); err != nil {
		return fmt.Errorf("put %q: %w", op.Key, err)
	}
	// The event's value aliases the encoded record, which bbolt only reads.
	r.events = append(r.events, store.Event{Type: store.EventPut, KV: store.KV{
		Key: op.Key, Value: enc[len(enc)-len(op.Value):], CreateRevision: h.create,
		ModRevision: rev, Version: h.version, Lease: h.lease,
	}})
	return nil
}

// deleteKey removes key if present.
func (s *Store) deleteKey(st *batchState, rev int64, key []byte, r *request) error {
	rec := st.kv.Get(key)
	if rec == nil {
		return nil
	}
	h, _, err := decodeKV(rec)
	if err != nil {
		return fmt.Errorf("key %q: %w", key, err)
	}
	if h.lease != 0 {
		if err := st.leaseKeys.Delete(leaseKey(h.lease, string(key))); err != nil {
			return err
		}
	}
	if err := st.kv.Delete(key); err != nil {
		return err
	}
	r.events = append(r.events, store.Event{Type: store.EventDelete, KV: store.KV{Key: string(key), ModRevision: rev}})
	return nil
}

func (s *Store) deletePrefix(st *batchState, rev int64, prefix string, r *request) error {
	// Collect first: deleting under a bbolt cursor skips keys.
	var keys [][]byte
	c := st.kv.Cursor()
	for k, _ := c.Seek([]byte(prefix)); k != nil && hasPrefix(k, prefix); k, _ = c.Next() {
		keys = append(keys, append([]byte(nil), k...))
	}
	for _, k := range keys {
		if err := s.deleteKey(st, rev, k, r); err != nil {
			return err
		}
	}
	return nil
}

func hasPrefix(k []byte, prefix string) bool {
	return len(k) >= len(prefix) && string(k[:len(prefix)]) == prefix
}
