package etcdstore

import (
	"context"
	"crypto/rand"
	"fmt"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/corral/corral/internal/store"
)

// Txn implements store.Store. The request is checked with store.CheckTxn
// first, so the limits and rejection rules are the store's everywhere; etcd
// is started with limits at least as wide (see etcdproc).
//
// A transaction that writes carries a marker (see the package doc), so when
// the member serving it dies or the cluster changes leader while it is in
// flight, Txn learns whether it applied and retries it if not, within
// Options.RetryBound. It returns an error wrapping store.ErrUncertain only
// when it could not learn the outcome: the caller's context ended with a
// write in flight, the store was closed, the bound passed and the
// transaction could not be fenced off, or it applied but its reads cannot
// be recovered. Any other error means the transaction did not apply and
// never will.
func (s *Store) Txn(ctx context.Context, cmps []store.Cmp, then, els []store.Op) (store.TxnResult, error) {
	if err := store.CheckTxn(cmps, then, els); err != nil {
		return store.TxnResult{}, fmt.Errorf("txn: %w", err)
	}
	if err := s.check(ctx); err != nil {
		return store.TxnResult{}, fmt.Errorf("txn: %w", err)
	}
	t := &txnSpec{cmps: cmps, then: then, els: els,
		thenWrites: store.HasWrites(then), elseWrites: store.HasWrites(els)}
	var seen map[string]bool
	for i := range cmps {
		if k := cmps[i].Key; guarded(&cmps[i]) && !seen[k] {
			if seen == nil {
				seen = map[string]bool{}
			}
			seen[k] = true
			t.guarded = append(t.guarded, k)
		}
	}
	if (t.thenWrites || t.elseWrites) && s.markers != "" {
		t.marker = s.markers + rand.Text()
	}
	res, err := s.txn(ctx, t)
	if err != nil {
		return store.TxnResult{}, fmt.Errorf("txn: %w", err)
	}
	return res, nil
}

// txnSpec is one call of Txn: the caller's request and what every try of
// it shares.
type txnSpec struct {
	cmps                   []store.Cmp
	then, els              []store.Op
	thenWrites, elseWrites bool
	// guarded lists the keys of the compares etcd cannot evaluate.
	guarded []string
	// marker is the etcd key of the transaction's marker; "" when it has
	// none (it only reads, or the store has no room for markers).
	marker string
	// lease is the marker lease of the latest try.
	lease int64
	// sends counts the transactions sent to etcd so far.
	sends int
}

// etcdTxn is one transaction as sent to etcd.
type etcdTxn struct {
	If   []clientv3.Cmp
	Then []clientv3.Op
	Else []clientv3.Op
}

func (s *Store) send(ctx context.Context, req etcdTxn) (*clientv3.TxnResponse, error) {
	return s.cli.Txn(ctx).If(req.If...).Then(req.Then...).Else(req.Else...).Commit()
}

// try is one try of a transaction as built for etcd.
type try struct {
	req etcdTxn
	// nested is set when the caller's transaction is nested inside an
	// outer one (guards, marker); else req is the caller's transaction.
	nested bool
	// holds is false when a guarded compare is known false: the inner
	// transaction then runs the else branch unconditionally.
	holds bool
	// markThen and markElse tell how each branch puts the marker.
	markThen, markElse branchMark
}

// branchMark is how a branch of a try puts the transaction's marker.
type branchMark int

const (
	// unmarked: the branch does not put the marker; on a first try, a
	// branch that only reads, so running it changes nothing.
	unmarked branchMark = iota
	// marked: the marker's put ends the branch.
	marked
	// markedIfChanged: on a first try, a branch that only deletes (and
	// reads) is nested in a transaction that puts the marker only if a
	// delete finds something, so that deleting nothing keeps the
	// revision, as the store promises.
	markedIfChanged
)

// maxEmptinessBytes bounds the keys a markedIfChanged branch repeats in its
// compares; past it the branch is marked and deleting nothing moves the
// revision, rather than the request outgrowing etcd's limit.
const maxEmptinessBytes = 128 << 10

// build makes one try of t. Without a marker and guards it is the
// caller's transaction as is. Otherwise the caller's transaction is nested
// in an outer one:
//
//	if   guards... && marker missing
//	then txn(caller's compares, then + marker "then", else + marker "else")
//	else get marker
//
// so that no try can apply once another has (or once the transaction was
// fenced off), and a try that finds the marker learns the outcome from it.
// The first try marks only where a branch changes something: a branch that
// changes nothing keeps the revision, as the store promises, and running
// it is the same as not running it. Retries (markBoth) mark both branches
// whatever they do, because their answer must also rule out an earlier try
// applying later.
func (s *Store) build(ctx context.Context, t *txnSpec, markBoth bool) (try, error) {
	tr := try{holds: true, nested: t.marker != "" || len(t.guarded) > 0}
	var guards []clientv3.Cmp
	var current map[string]*store.KV
	if len(t.guarded) > 0 {
		current = make(map[string]*store.KV, len(t.guarded))
		gets := make([]clientv3.Op, len(t.guarded))
		for i, k := range t.guarded {
			gets[i] = clientv3.OpGet(s.prefix + k)
		}
		read, err := s.cli.Txn(ctx).Then(gets...).Commit()
		if err != nil {
			return try{}, fmt.Errorf("reading compared keys: %w", err)
		}
		guards = make([]clientv3.Cmp, len(t.guarded), len(t.guarded)+1)
		for i, k := range t.guarded {
			var mod int64
			if kvs := read.Responses[i].GetResponseRange().GetKvs(); len(kvs) > 0 {
				kv := s.fromKV(kvs[0])
				current[k] = &kv
				mod = kv.ModRevision
			}
			guards[i] = clientv3.Compare(clientv3.ModRevision(s.prefix+k), "=", mod)
		}
	}
	rest := make([]clientv3.Cmp, 0, len(t.cmps))
	for i := range t.cmps {
		c := &t.cmps[i]
		if !guarded(c) {
			rest = append(rest, s.cmp(c))
		} else if !c.Matches(current[c.Key]) {
			tr.holds = false
		}
	}
	then, els := s.ops(t.then), s.ops(t.els)
	if t.marker != "" {
		lease := clientv3.WithLease(clientv3.LeaseID(t.lease))
		tr.markThen = s.branchMark(t.then, t.thenWrites, markBoth)
		then = s.markOps(t.then, then, tr.markThen, clientv3.OpPut(t.marker, markerThen, lease))
		tr.markElse = s.branchMark(t.els, t.elseWrites, markBoth)
		els = s.markOps(t.els, els, tr.markElse, clientv3.OpPut(t.marker, markerElse, lease))
	}
	if !tr.nested {
		tr.req = etcdTxn{If: rest, Then: then, Else: els}
		return tr, nil
	}
	// With a compare known false, the else branch runs unconditionally.
	inner := clientv3.OpTxn(rest, then, els)
	if !tr.holds {
		inner = clientv3.OpTxn(nil, els, nil)
	}
	tr.req = etcdTxn{If: guards, Then: []clientv3.Op{inner}}
	if t.marker != "" {
		tr.req.If = append(tr.req.If, clientv3.Compare(clientv3.CreateRevision(t.marker), "=", 0))
		tr.req.Else = []clientv3.Op{clientv3.OpGet(t.marker)}
	}
	return tr, nil
}

// attempt runs one try of t, within the attempt timeout. It returns the
// result, or the marker when the outer compare found it (an earlier try
// applied), or an error; sent reports whether the failing call was a write
// sent to etcd, whose fate is then unknown. A guarded transaction whose
// compared keys changed between its read and its write is tried again at
// once.
func (s *Store) attempt(ctx context.Context, t *txnSpec, markBoth bool) (res store.TxnResult, found *mvccpb.KeyValue, sent bool, err error) {
	ctx, cancel := context.WithTimeout(ctx, s.attemptTimeout)
	defer cancel()
	if t.marker != "" {
		if t.lease, err = s.markerLease(ctx); err != nil {
			return store.TxnResult{}, nil, false, fmt.Errorf("granting the marker lease: %w", err)
		}
	}
	for {
		tr, err := s.build(ctx, t, markBoth)
		if err != nil {
			return store.TxnResult{}, nil, false, err
		}
		if s.testHookGuarded != nil && len(t.guarded) > 0 {
			s.testHookGuarded()
		}
		t.sends++
		var resp *clientv3.TxnResponse
		if s.testHookSend != nil {
			resp, err = s.testHookSend(ctx, t.sends, tr.req, s.send)
		} else {
			resp, err = s.send(ctx, tr.req)
		}
		if err != nil {
			return store.TxnResult{}, nil, true, err
		}
		if !tr.nested {
			return s.result(resp.Succeeded, resp.Header.Revision, resp.Responses), nil, false, nil
		}
		if !resp.Succeeded {
			if t.marker != "" {
				if kvs := resp.Responses[0].GetResponseRange().GetKvs(); len(kvs) > 0 {
					return store.TxnResult{}, kvs[0], false, nil
				}
			}
			continue // a compared key changed since the read
		}
		in := resp.Responses[0].GetResponseTxn()
		ranThen := tr.holds && in.Succeeded
		var resps []*pb.ResponseOp
		if ranThen {
			resps = unmark(in.Responses, t.then, tr.markThen)
		} else {
			resps = unmark(in.Responses, t.els, tr.markElse)
		}
		return s.result(ranThen, resp.Header.Revision, resps), nil, false, nil
	}
}

// branchMark chooses how a branch puts the marker.
func (s *Store) branchMark(ops []store.Op, writes, markBoth bool) branchMark {
	switch {
	case markBoth:
		return marked
	case !writes:
		return unmarked
	}
	size := 0
	for i := range ops {
		switch ops[i].Type {
		case store.OpPut:
			return marked // a put always changes the store
		case store.OpDelete:
			size += len(s.prefix) + len(ops[i].Key)
		case store.OpDeletePrefix:
			size += 2 * (len(s.prefix) + len(ops[i].Key)) // key and range end
		}
	}
	if size > maxEmptinessBytes {
		return marked
	}
	return markedIfChanged
}

// markOps adds the marker's put to a converted branch as m says. A
// markedIfChanged branch becomes one nested transaction: if every range
// it deletes is empty, it runs only its reads; else all of it and the put.
func (s *Store) markOps(ops []store.Op, conv []clientv3.Op, m branchMark, put clientv3.Op) []clientv3.Op {
	switch m {
	case marked:
		return append(conv, put)
	case markedIfChanged:
		var empty []clientv3.Cmp
		var reads []clientv3.Op
		for i := range ops {
			switch o := &ops[i]; o.Type {
			case store.OpDelete:
				empty = append(empty, clientv3.Compare(clientv3.CreateRevision(s.prefix+o.Key), "=", 0))
			case store.OpDeletePrefix:
				// A range compare holds when it holds for every key
				// in the range, or for a missing key if there is none.
				key, end := s.span(o.Key)
				empty = append(empty, clientv3.Compare(clientv3.CreateRevision(key), "=", 0).WithRange(end))
			default:
				reads = append(reads, conv[i])
			}
		}
		return []clientv3.Op{clientv3.OpTxn(empty, reads, append(conv, put))}
	}
	return conv
}

// unmark returns the responses of a branch's own operations, without the
// marker's.
func unmark(resps []*pb.ResponseOp, ops []store.Op, m branchMark) []*pb.ResponseOp {
	switch m {
	case marked:
		return resps[:len(resps)-1]
	case markedIfChanged:
		in := resps[0].GetResponseTxn()
		if !in.Succeeded {
			return in.Responses[:len(in.Responses)-1]
		}
		// Nothing to delete: only the reads ran; the deletes' results
		// are nil as ever.
		out := make([]*pb.ResponseOp, len(ops))
		j := 0
		for i := range ops {
			if ops[i].Type == store.OpGet || ops[i].Type == store.OpGetPrefix {
				out[i] = in.Responses[j]
				j++
			}
		}
		return out
	}
	return resps
}

// guarded reports whether etcd cannot evaluate c as the store defines it.
// The store says a value "not equal" compare holds for a missing key; etcd
// fails every value compare on a missing key. Such compares are evaluated
// by the store on a read of their keys, and the transaction is sent under
// guards that the keys have not changed since the read (same mod revision;
// 0 for a key still missing); if one changed, the try starts over. Corral's
// own code does not use such compares; the cost is one extra read.
func guarded(c *store.Cmp) bool {
	return c.Target == store.CmpValue && c.Op == store.NotEqual
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

// ops converts a branch that CheckTxn has validated, with room for the
// marker's put.
func (s *Store) ops(ops []store.Op) []clientv3.Op {
	out := make([]clientv3.Op, len(ops), len(ops)+1)
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
