package election

import (
	"context"
	"fmt"

	"github.com/corral/corral/internal/store"
)

// Fenced returns a view of s whose writing transactions commit only while
// the election key still has the term's token: a master that has lost its
// term, even one that has not noticed yet, cannot change the store through
// it. A refused write returns an error matching ErrFenced and applies
// nothing, neither the then branch nor the else branch.
//
// Transactions that only read, and everything else (Get, Range, Watch,
// leases, Revision, Backup, Close), go to s unchanged; Close closes s.
// Once the term has ended (or missed its local deadline), writes fail with
// ErrFenced at once, without a round trip.
//
// Cost: one extra compare per writing transaction, plus one Get in its
// else branch when that branch only reads. A transaction whose else branch
// writes, and whose own compares fail, takes a second round trip. The store's per-list limit (store.MaxOpsPerTxn) still holds
// for the decorated transaction, so a fenced transaction may carry at most
// MaxOpsPerTxn-1 compares (and, for the two-round-trip case, compare at
// most MaxOpsPerTxn-1 distinct keys); beyond that it fails with
// store.ErrTooLarge. etcd itself is started with room to spare
// (etcdproc.MaxTxnOps), so the store's limit is what binds.
//
// A Term made by hand (Leader.Token and Key; Key "" means DefaultKey) fences
// with that token and never ends locally.
func Fenced(s store.Store, t *Term) store.Store {
	key := t.Key
	if key == "" {
		key = DefaultKey
	}
	return &fenced{Store: s, t: t, key: key,
		guard: store.Cmp{Key: key, Target: store.CmpCreateRevision, Op: store.Equal, Rev: t.Token}}
}

type fenced struct {
	store.Store
	t     *Term
	key   string
	guard store.Cmp
}

// Txn implements store.Store.
func (f *fenced) Txn(ctx context.Context, cmps []store.Cmp, then, els []store.Op) (store.TxnResult, error) {
	// The caller's transaction is judged by the limits callers know, so
	// that an oversized one fails the same way with or without a fence.
	if err := store.CheckTxn(cmps, then, els); err != nil {
		return store.TxnResult{}, fmt.Errorf("txn: %w", err)
	}
	if !store.HasWrites(then) && !store.HasWrites(els) {
		return f.Store.Txn(ctx, cmps, then, els)
	}
	if err := f.t.Err(); err != nil {
		return store.TxnResult{}, fmt.Errorf("%w (%w)", ErrFenced, err)
	}
	if len(cmps) >= store.MaxOpsPerTxn {
		return store.TxnResult{}, fmt.Errorf("txn: %d compares leave no room for the fencing compare (max %d): %w",
			len(cmps), store.MaxOpsPerTxn-1, store.ErrTooLarge)
	}
	guarded := make([]store.Cmp, 0, len(cmps)+1)
	guarded = append(append(guarded, cmps...), f.guard)
	if store.HasWrites(els) {
		return f.txnElse(ctx, cmps, guarded, then, els)
	}

	// The else branch only reads, so running it when the fence fails
	// changes nothing; a Get of the election key in it tells the two
	// failures apart, at the same revision.
	if len(els) >= store.MaxOpsPerTxn {
		return store.TxnResult{}, fmt.Errorf("txn: %d else ops leave no room for the fence check (max %d): %w",
			len(els), store.MaxOpsPerTxn-1, store.ErrTooLarge)
	}
	checked := make([]store.Op, 0, len(els)+1)
	checked = append(append(checked, els...), store.Get(f.key))
	res, err := f.Store.Txn(ctx, guarded, then, checked)
	if err != nil || res.Succeeded {
		return res, err
	}
	n := len(res.Results) - 1
	if n < 0 {
		return store.TxnResult{}, fmt.Errorf("txn: the store returned no results for the else branch")
	}
	if err := f.check(res.Results[n]); err != nil {
		return store.TxnResult{}, err
	}
	res.Results = res.Results[:n]
	if n == 0 {
		res.Results = nil
	}
	return res, nil
}

// txnElse runs a transaction whose else branch writes. A flat transaction
// cannot say "fence holds and a caller's compare fails" (the else branch
// runs when any compare fails), so it goes in two steps. First the then
// branch under caller compares plus fence, with an else branch that only
// reads the compared keys. If that fails with the fence holding, the
// caller's compares were false at that revision, and the else branch runs
// in a second transaction under the fence plus "no compared key has
// changed since" (equal mod revisions, 0 for a missing key): a key's mod
// revision pins everything a compare can look at, so the caller's compares
// are still false. If a compared key changed in between, it starts over.
func (f *fenced) txnElse(ctx context.Context, cmps, guarded []store.Cmp, then, els []store.Op) (store.TxnResult, error) {
	var keys []string
	seen := map[string]bool{}
	for i := range cmps {
		if k := cmps[i].Key; !seen[k] {
			seen[k] = true
			keys = append(keys, k)
		}
	}
	// Both steps carry the fence plus one entry per compared key.
	if len(keys) >= store.MaxOpsPerTxn {
		return store.TxnResult{}, fmt.Errorf("txn: %d compared keys leave no room for the fence (max %d): %w",
			len(keys), store.MaxOpsPerTxn-1, store.ErrTooLarge)
	}
	reads := make([]store.Op, 0, len(keys)+1)
	reads = append(reads, store.Get(f.key))
	for _, k := range keys {
		reads = append(reads, store.Get(k))
	}
	for {
		res, err := f.Store.Txn(ctx, guarded, then, reads)
		if err != nil || res.Succeeded {
			return res, err
		}
		if len(res.Results) != len(reads) {
			return store.TxnResult{}, fmt.Errorf("txn: the store returned %d results for %d reads", len(res.Results), len(reads))
		}
		if err := f.check(res.Results[0]); err != nil {
			return store.TxnResult{}, err
		}
		pinned := make([]store.Cmp, 0, len(keys)+1)
		pinned = append(pinned, f.guard)
		for i, k := range keys {
			var mod int64
			if kvs := res.Results[i+1]; len(kvs) > 0 {
				mod = kvs[0].ModRevision
			}
			pinned = append(pinned, store.ModRevisionIs(k, mod))
		}
		res, err = f.Store.Txn(ctx, pinned, els, []store.Op{store.Get(f.key)})
		if err != nil {
			return res, err
		}
		if res.Succeeded {
			// The caller's else branch ran: to the caller, its
			// compares failed.
			res.Succeeded = false
			return res, nil
		}
		if len(res.Results) != 1 {
			return store.TxnResult{}, fmt.Errorf("txn: the store returned %d results for 1 read", len(res.Results))
		}
		if err := f.check(res.Results[0]); err != nil {
			return store.TxnResult{}, err
		}
		// A compared key changed in between: its compare may hold now.
		if err := ctx.Err(); err != nil {
			return store.TxnResult{}, fmt.Errorf("txn: %w", err)
		}
	}
}

// check returns ErrFenced unless the election key as read (kvs holds it,
// or nothing when missing) has the term's token.
func (f *fenced) check(kvs []store.KV) error {
	if len(kvs) == 0 {
		return fmt.Errorf("%w: election key %s is gone (term %d of %s)", ErrFenced, f.key, f.t.Token, f.t.Name)
	}
	if kvs[0].CreateRevision != f.t.Token {
		return fmt.Errorf("%w: election key %s belongs to term %d, not %d of %s",
			ErrFenced, f.key, kvs[0].CreateRevision, f.t.Token, f.t.Name)
	}
	return nil
}
