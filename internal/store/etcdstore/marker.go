package etcdstore

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/corral/corral/internal/store"
)

// Marker values: the branch a transaction ran, or none when the store gave
// up on it and fenced it off.
const (
	markerThen = "then"
	markerElse = "else"
	markerNone = "none"
)

const (
	defaultRetryBound     = 30 * time.Second
	defaultAttemptTimeout = 5 * time.Second
	defaultMarkerTTL      = 3 * time.Minute
	// defaultMarkersPerLease caps the markers put on one lease. etcd
	// deletes the keys of an expired lease in one apply, and etcd 3.4 (the
	// Debian member) then keeps a backend read buffer the size of that
	// apply's writes and copies all of it on every later transaction, for
	// as long as writes go on: one lease holding a minute of markers (tens
	// of thousands at a busy job queue's rate) made every transaction after
	// its expiry several times slower. A cap near the writes of one backend
	// commit (100 ms) under load costs a lease grant every few hundred
	// writes.
	defaultMarkersPerLease = 500
	// fenceTries bounds the tries to fence off a transaction given up on.
	fenceTries = 3
	backoffMin = 50 * time.Millisecond
	backoffMax = time.Second
)

// markerSpace returns the etcd key prefix of the markers of a store whose
// keys live under prefix (which ends with "/"): the prefix with its last
// "/" replaced by "\x00txn/". "\x00" sorts before "/", so the markers lie
// outside [prefix, PrefixEnd(prefix)), the range every key, Range, Watch
// and DeletePrefix of the store falls in. A store on the whole keyspace
// has no such place and gets no markers ("").
func markerSpace(prefix string) string {
	if prefix == "" {
		return ""
	}
	return strings.TrimSuffix(prefix, "/") + "\x00txn/"
}

// markerLease is the lease the store attaches its markers to.
type markerLease struct {
	id int64
	// granted is when the grant was sent: the lease lives at least the
	// marker TTL from then.
	granted time.Time
	// taken counts the tries that took the lease for a marker (an upper
	// bound of its markers: a retry takes it again for the same one).
	taken atomic.Int64
}

// txn runs t until its outcome is known, retrying through failures that
// leave it unknown. See the package doc for the scheme.
func (s *Store) txn(ctx context.Context, t *txnSpec) (store.TxnResult, error) {
	deadline := time.Now().Add(s.retryBound)
	writes := t.thenWrites || t.elseWrites
	var (
		uncertain    bool // a write went out whose fate is unknown
		leaseChecked bool
		wait         = backoffMin
	)
	for {
		if uncertain {
			// Cheaper than sending the whole transaction again, and
			// the usual answer after a lost reply.
			if kv, err := s.getMarker(ctx, t.marker); err == nil && kv != nil {
				return s.settle(ctx, t, kv, deadline)
			}
		}
		res, found, sent, err := s.attempt(ctx, t, uncertain)
		if found != nil {
			return s.settle(ctx, t, found, deadline)
		}
		if err == nil {
			return res, nil
		}
		refusal := refused(err)
		if sent && writes && !refusal {
			uncertain = true
		}
		switch {
		case s.closed.Load():
			return store.TxnResult{}, unknownIf(uncertain, s.mapErr(err))
		case ctx.Err() != nil:
			// The caller has gone: nothing more may be sent.
			if !errors.Is(err, ctx.Err()) {
				err = fmt.Errorf("%w (%w)", ctx.Err(), err)
			}
			return store.TxnResult{}, unknownIf(uncertain, err)
		case refusal:
			if t.marker != "" && !leaseChecked && errors.Is(err, rpctypes.ErrLeaseNotFound) {
				// The marker's lease may be the one gone (revoked by
				// hand, lost with a restored backup): then a new one
				// makes the try succeed.
				leaseChecked = true
				if s.markerLeaseGone(ctx, t.lease) {
					continue
				}
			}
			if !uncertain {
				return store.TxnResult{}, s.mapErr(err)
			}
			// An earlier try may still apply: rule that out first.
			return s.fence(ctx, t, s.mapErr(err), deadline)
		case uncertain && t.marker == "":
			// Without a marker a retry could apply the write twice.
			return store.TxnResult{}, unknownIf(true, s.mapErr(err))
		}
		if uncertain {
			s.retries.Add(1)
			s.log.Warn("etcd transaction outcome unknown, retrying", "sends", t.sends, "err", err)
		}
		if time.Now().After(deadline) {
			err = fmt.Errorf("no answer within %v: %w", s.retryBound, s.mapErr(err))
			if !uncertain {
				return store.TxnResult{}, err
			}
			return s.fence(ctx, t, err, deadline)
		}
		if !sleep(ctx, min(jitter(wait), time.Until(deadline))) {
			return store.TxnResult{}, unknownIf(uncertain, fmt.Errorf("%w (%w)", ctx.Err(), s.mapErr(err)))
		}
		wait = min(2*wait, backoffMax)
	}
}

// unknownIf marks err as leaving the outcome unknown when uncertain.
func unknownIf(uncertain bool, err error) error {
	if !uncertain {
		return err
	}
	return fmt.Errorf("%w: %w", store.ErrUncertain, err)
}

// settle builds the result of a transaction that applied, from its marker:
// the branch it ran and its revision. Reads of that branch are read again
// at that revision when that is the same as reading them in the
// transaction, i.e. when no later write of the branch touches their keys
// (a read at the transaction's revision sees all of its writes); otherwise
// they are lost and the result is store.ErrUncertain.
func (s *Store) settle(ctx context.Context, t *txnSpec, kv *mvccpb.KeyValue, deadline time.Time) (store.TxnResult, error) {
	s.settled.Add(1)
	res := store.TxnResult{Revision: kv.ModRevision}
	var branch []store.Op
	switch v := string(kv.Value); v {
	case markerThen:
		res.Succeeded, branch = true, t.then
	case markerElse:
		branch = t.els
	default:
		return store.TxnResult{}, fmt.Errorf("%w: marker %q holds %q", store.ErrUncertain, kv.Key, v)
	}
	if len(branch) == 0 {
		return res, nil
	}
	res.Results = make([][]store.KV, len(branch))
	var gets []clientv3.Op
	var at []int
	for i := range branch {
		o := &branch[i]
		switch o.Type {
		case store.OpGet:
			gets = append(gets, clientv3.OpGet(s.prefix+o.Key, clientv3.WithRev(res.Revision)))
		case store.OpGetPrefix:
			key, end := s.span(o.Key)
			gets = append(gets, clientv3.OpGet(key, clientv3.WithRange(end), clientv3.WithRev(res.Revision)))
		default:
			continue
		}
		at = append(at, i)
	}
	if len(gets) == 0 {
		return res, nil
	}
	lost := func(why error) (store.TxnResult, error) {
		return store.TxnResult{}, fmt.Errorf("%w: the %s branch applied at revision %d, but its reads are lost: %w",
			store.ErrUncertain, kv.Value, res.Revision, why)
	}
	if !readsRecoverable(branch) {
		return lost(errors.New("a read precedes a write to its keys"))
	}
	wait := backoffMin
	for {
		actx, cancel := context.WithTimeout(ctx, s.attemptTimeout)
		resp, err := s.cli.Txn(actx).Then(gets...).Commit()
		cancel()
		if err == nil {
			for j, i := range at {
				res.Results[i] = s.fromKVs(resp.Responses[j].GetResponseRange().GetKvs())
			}
			return res, nil
		}
		if refused(err) || s.closed.Load() || time.Now().After(deadline) || !sleep(ctx, jitter(wait)) {
			return lost(s.mapErr(err))
		}
		wait = min(2*wait, backoffMax)
	}
}

// readsRecoverable reports whether every read of branch sees the same keys
// as a read at the transaction's revision: no write after it in the branch
// touches its range.
func readsRecoverable(branch []store.Op) bool {
	for i := range branch {
		r := &branch[i]
		if r.Type != store.OpGet && r.Type != store.OpGetPrefix {
			continue
		}
		for j := i + 1; j < len(branch); j++ {
			w := &branch[j]
			if w.Type == store.OpGet || w.Type == store.OpGetPrefix {
				continue
			}
			if overlap(r, w) {
				return false
			}
		}
	}
	return true
}

// overlap reports whether the key ranges of two operations intersect.
func overlap(a, b *store.Op) bool {
	aFrom, aTo := opRange(a)
	bFrom, bTo := opRange(b)
	return (aTo == "" || bFrom < aTo) && (bTo == "" || aFrom < bTo)
}

// opRange is the range [from, to) of keys an operation touches; to is ""
// when the range runs to the end of the keyspace.
func opRange(o *store.Op) (from, to string) {
	if o.Type == store.OpGetPrefix || o.Type == store.OpDeletePrefix {
		return o.Key, store.PrefixEnd(o.Key)
	}
	return o.Key, o.Key + "\x00"
}

// fence makes sure no try of t applies after the store gives up on it: it
// puts the marker as "none" if it is still missing, which fails every try's
// outer compare. If the marker is there, a try did apply and its result is
// returned instead of cause. If the fence cannot be put, the outcome stays
// unknown.
func (s *Store) fence(ctx context.Context, t *txnSpec, cause error, deadline time.Time) (store.TxnResult, error) {
	wait := backoffMin
	for try := range fenceTries {
		if try > 0 && !sleep(ctx, jitter(wait)) {
			break
		}
		wait = min(2*wait, backoffMax)
		kv, err := s.fenceOnce(ctx, t)
		if err == nil {
			if kv == nil || string(kv.Value) == markerNone {
				return store.TxnResult{}, fmt.Errorf("not applied: %w", cause)
			}
			return s.settle(ctx, t, kv, deadline)
		}
		s.log.Warn("etcd transaction could not be fenced off", "try", try+1, "err", err)
		if s.closed.Load() || ctx.Err() != nil {
			break
		}
	}
	return store.TxnResult{}, unknownIf(true, cause)
}

// fenceOnce puts t's marker as "none" unless it exists, and returns the
// marker found, or nil when the fence was put.
func (s *Store) fenceOnce(ctx context.Context, t *txnSpec) (*mvccpb.KeyValue, error) {
	ctx, cancel := context.WithTimeout(ctx, s.attemptTimeout)
	defer cancel()
	lease, err := s.markerLease(ctx)
	if err != nil {
		return nil, err
	}
	resp, err := s.cli.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(t.marker), "=", 0)).
		Then(clientv3.OpPut(t.marker, markerNone, clientv3.WithLease(clientv3.LeaseID(lease)))).
		Else(clientv3.OpGet(t.marker)).Commit()
	if err != nil {
		if errors.Is(err, rpctypes.ErrLeaseNotFound) {
			s.dropMarkerLease(lease)
		}
		return nil, err
	}
	if resp.Succeeded {
		return nil, nil
	}
	kvs := resp.Responses[0].GetResponseRange().GetKvs()
	if len(kvs) == 0 {
		return nil, fmt.Errorf("marker %q vanished", t.marker)
	}
	return kvs[0], nil
}

// getMarker reads a marker; nil when it is missing.
func (s *Store) getMarker(ctx context.Context, key string) (*mvccpb.KeyValue, error) {
	ctx, cancel := context.WithTimeout(ctx, s.attemptTimeout)
	defer cancel()
	resp, err := s.cli.Get(ctx, key)
	if err != nil || len(resp.Kvs) == 0 {
		return nil, err
	}
	return resp.Kvs[0], nil
}

// markerLease returns the lease for new markers: the current one while it
// is younger than a third of the marker TTL, so that every marker outlives
// the tries of its transaction (see Options.MarkerTTL), and has taken fewer
// than markersPerLease markers, so that its expiry deletes few keys at once
// (see defaultMarkersPerLease); else a new one. Leases are never kept
// alive; each expires with its markers.
func (s *Store) markerLease(ctx context.Context) (int64, error) {
	if id, ok := s.takeMarkerLease(); ok {
		return id, nil
	}
	select {
	case s.leaseSem <- struct{}{}:
	case <-ctx.Done():
		return 0, ctx.Err()
	}
	defer func() { <-s.leaseSem }()
	// Another transaction may have granted one while this one waited.
	if id, ok := s.takeMarkerLease(); ok {
		return id, nil
	}
	start := s.now()
	resp, err := s.cli.Grant(ctx, int64((s.markerTTL+time.Second-1)/time.Second))
	if err != nil {
		return 0, err
	}
	l := &markerLease{id: int64(resp.ID), granted: start}
	l.taken.Store(1)
	s.lease.Store(l)
	return l.id, nil
}

// takeMarkerLease counts one more marker on the current lease and returns
// it, unless there is none or it is too old or too full for another.
func (s *Store) takeMarkerLease() (int64, bool) {
	l := s.lease.Load()
	if l == nil || s.now().Sub(l.granted) >= s.markerTTL/3 || l.taken.Add(1) > s.markersPerLease {
		return 0, false
	}
	return l.id, true
}

// dropMarkerLease forgets the marker lease id if it is the current one.
func (s *Store) dropMarkerLease(id int64) {
	if l := s.lease.Load(); l != nil && l.id == id {
		s.lease.CompareAndSwap(l, nil)
	}
}

// markerLeaseGone reports whether the marker lease id no longer exists,
// and then forgets it. An error asking counts as gone: a new lease costs
// little.
func (s *Store) markerLeaseGone(ctx context.Context, id int64) bool {
	ctx, cancel := context.WithTimeout(ctx, s.attemptTimeout)
	defer cancel()
	resp, err := s.cli.TimeToLive(ctx, clientv3.LeaseID(id))
	if err == nil && resp.TTL > 0 {
		return false
	}
	s.dropMarkerLease(id)
	return true
}

// refused reports whether err says etcd refused the request: it was not
// applied, and sending it again gets the same answer. Every other failure
// (a connection reset, a timeout, a leader change, a member stopping, an
// error this code does not know) may come after the request was applied.
func refused(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	if storeError(err) != nil {
		return true
	}
	var code codes.Code
	var ee rpctypes.EtcdError
	if errors.As(err, &ee) {
		code = ee.Code()
	} else if st, ok := status.FromError(err); ok {
		code = st.Code()
	} else {
		return false
	}
	switch code {
	case codes.InvalidArgument, codes.NotFound, codes.AlreadyExists, codes.PermissionDenied,
		codes.ResourceExhausted, codes.FailedPrecondition, codes.OutOfRange, codes.Unimplemented,
		codes.Unauthenticated:
		// etcd checks these before proposing a request, or when
		// applying it and then applies none of it (leases, quota).
		return true
	}
	return false
}

// jitter spreads retries of many clients: d/2 to d.
func jitter(d time.Duration) time.Duration {
	return d/2 + rand.N(d/2+1)
}

// sleep waits d, or less if ctx ends first; it reports whether ctx is
// still alive.
func sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
