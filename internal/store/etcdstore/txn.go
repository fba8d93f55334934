package etcdstore

import (
	"context"
	"fmt"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/corral/corral/internal/store"
)

// Txn implements store.Store. The request is checked with store.CheckTxn
// first, so the limits and rejection rules are the store's everywhere; etcd
// is started with limits at least as wide (see etcdproc).
//
// When Txn fails for any reason but a refusal (e.g. ctx ends, or the member
// dies while the request is in flight), the transaction may or may not have
// been applied, as with any networked store: callers that must know compare
// on revisions when they retry.
func (s *Store) Txn(ctx context.Context, cmps []store.Cmp, then, els []store.Op) (store.TxnResult, error) {
	if err := store.CheckTxn(cmps, then, els); err != nil {
		return store.TxnResult{}, fmt.Errorf("txn: %w", err)
	}
	if err := s.check(ctx); err != nil {
		return store.TxnResult{}, fmt.Errorf("txn: %w", err)
	}
	for i := range cmps {
		if guarded(&cmps[i]) {
			return s.txnGuarded(ctx, cmps, then, els)
		}
	}
	ecmps := make([]clientv3.Cmp, len(cmps))
	for i := range cmps {
		ecmps[i] = s.cmp(&cmps[i])
	}
	resp, err := s.cli.Txn(ctx).If(ecmps...).Then(s.ops(then)...).Else(s.ops(els)...).Commit()
	if err != nil {
		return store.TxnResult{}, fmt.Errorf("txn: %w", s.mapErr(err))
	}
	return s.result(resp.Succeeded, resp.Header.Revision, resp.Responses), nil
}

// guarded reports whether etcd cannot evaluate c as the store defines it.
// The store says a value "not equal" compare holds for a missing key; etcd
// fails every value compare on a missing key.
func guarded(c *store.Cmp) bool {
	return c.Target == store.CmpValue && c.Op == store.NotEqual
}

// txnGuarded runs a transaction with compares etcd cannot evaluate itself.
// It reads the keys of those compares, evaluates them with the store's own
// Cmp.Matches, and sends the rest of the transaction nested inside an outer
// one whose compares check that the keys have not changed since the read
// (same mod revision; 0 for a key still missing). If one changed, the outer
// transaction does nothing and the whole thing starts over. Corral's own
// code does not use such compares; the cost is one extra read.
func (s *Store) txnGuarded(ctx context.Context, cmps []store.Cmp, then, els []store.Op) (store.TxnResult, error) {
	var keys []string
	seen := map[string]bool{}
	for i := range cmps {
		if k := cmps[i].Key; guarded(&cmps[i]) && !seen[k] {
			seen[k] = true
			keys = append(keys, k)
		}
	}
	gets := make([]clientv3.Op, len(keys))
	for i, k := range keys {
		gets[i] = clientv3.OpGet(s.prefix + k)
	}
	for {
		if err := ctx.Err(); err != nil {
			return store.TxnResult{}, fmt.Errorf("txn: %w", err)
		}
		read, err := s.cli.Txn(ctx).Then(gets...).Commit()
		if err != nil {
			return store.TxnResult{}, fmt.Errorf("txn: reading compared keys: %w", s.mapErr(err))
		}
		current := make(map[string]*store.KV, len(keys))
		guards := make([]clientv3.Cmp, len(keys))
		for i, k := range keys {
			var mod int64
			if kvs := read.Responses[i].GetResponseRange().GetKvs(); len(kvs) > 0 {
				kv := s.fromKV(kvs[0])
				current[k] = &kv
				mod = kv.ModRevision
			}
			guards[i] = clientv3.Compare(clientv3.ModRevision(s.prefix+k), "=", mod)
		}
		holds := true
		var rest []clientv3.Cmp
		for i := range cmps {
			c := &cmps[i]
			if !guarded(c) {
				rest = append(rest, s.cmp(c))
			} else if !c.Matches(current[c.Key]) {
				holds = false
			}
		}
		// With a compare known false, the else branch runs unconditionally.
		inner := clientv3.OpTxn(rest, s.ops(then), s.ops(els))
		if !holds {
			inner = clientv3.OpTxn(nil, s.ops(els), nil)
		}
		if s.testHookGuarded != nil {
			s.testHookGuarded()
		}
		resp, err := s.cli.Txn(ctx).If(guards...).Then(inner).Commit()
		if err != nil {
			return store.TxnResult{}, fmt.Errorf("txn: %w", s.mapErr(err))
		}
		if !resp.Succeeded {
			continue // a compared key changed since the read
		}
		in := resp.Responses[0].GetResponseTxn()
		return s.result(holds && in.Succeeded, resp.Header.Revision, in.Responses), nil
	}
}

// result builds the store's result from etcd's responses.
func (s *Store) result(succeeded bool, rev int64, resps []*pb.ResponseOp) store.TxnResult {
	res := store.TxnResult{Succeeded: succeeded, Revision: rev}
	if len(resps) > 0 {
		res.Results = make([][]store.KV, len(resps))
		for i, r := range resps {
			if rr := r.GetResponseRange(); rr != nil {
				res.Results[i] = s.fromKVs(rr.Kvs)
			}
		}
	}
	return res
}

var cmpOps = [...]string{store.Equal: "=", store.NotEqual: "!=", store.Less: "<", store.Greater: ">"}

// cmp converts a compare that CheckTxn has validated.
func (s *Store) cmp(c *store.Cmp) clientv3.Cmp {
	key, op := s.prefix+c.Key, cmpOps[c.Op]
	switch c.Target {
	case store.CmpCreateRevision:
		return clientv3.Compare(clientv3.CreateRevision(key), op, c.Rev)
	case store.CmpVersion:
		return clientv3.Compare(clientv3.Version(key), op, c.Rev)
	case store.CmpValue:
		return clientv3.Compare(clientv3.Value(key), op, string(c.Value))
	default:
		return clientv3.Compare(clientv3.ModRevision(key), op, c.Rev)
	}
}

// ops converts a branch that CheckTxn has validated.
func (s *Store) ops(ops []store.Op) []clientv3.Op {
	out := make([]clientv3.Op, len(ops))
	for i := range ops {
		o := &ops[i]
		switch o.Type {
		case store.OpPut:
			var opts []clientv3.OpOption
			if o.Lease != 0 {
				opts = append(opts, clientv3.WithLease(clientv3.LeaseID(o.Lease)))
			}
			out[i] = clientv3.OpPut(s.prefix+o.Key, string(o.Value), opts...)
		case store.OpDelete:
			out[i] = clientv3.OpDelete(s.prefix + o.Key)
		case store.OpDeletePrefix:
			key, end := s.span(o.Key)
			out[i] = clientv3.OpDelete(key, clientv3.WithRange(end))
		case store.OpGet:
			out[i] = clientv3.OpGet(s.prefix + o.Key)
		case store.OpGetPrefix:
			key, end := s.span(o.Key)
			out[i] = clientv3.OpGet(key, clientv3.WithRange(end))
		}
	}
	return out
}
