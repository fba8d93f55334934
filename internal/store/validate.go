package store

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
)

// Errors shared by every backend beyond those of store.go. They live here so
// callers can test for them with errors.Is whichever backend runs.
var (
	// ErrInvalid marks a malformed request (empty key, unknown operation or
	// comparison). It never depends on the store's contents.
	ErrInvalid = errors.New("store: invalid request")
	// ErrDuplicateKey marks a transaction branch that writes one key twice,
	// or puts a key that a delete of the same branch also covers. etcd
	// rejects such transactions, so every backend does.
	ErrDuplicateKey = errors.New("store: key written twice in one transaction branch")
	// ErrWatchLagged ends a watch whose consumer fell so far behind that its
	// buffer overflowed. The caller re-watches from the revision after the
	// last event it processed.
	ErrWatchLagged = errors.New("store: watcher fell behind")
)

// CheckTxn validates a transaction before any backend runs it, so that the
// limits and the rejection rules are the same everywhere and a rejected
// transaction never depends on which branch would have run.
//
// Limits: cmps, then and els may each hold up to MaxOpsPerTxn entries (as
// etcd's --max-txn-ops applies to each list); the keys and values of all
// three lists together, i.e. the request size, may not exceed MaxTxnBytes.
func CheckTxn(cmps []Cmp, then, els []Op) error {
	if len(cmps) > MaxOpsPerTxn || len(then) > MaxOpsPerTxn || len(els) > MaxOpsPerTxn {
		return fmt.Errorf("%d compares, %d then ops, %d else ops (max %d each): %w",
			len(cmps), len(then), len(els), MaxOpsPerTxn, ErrTooLarge)
	}
	size := 0
	for i := range cmps {
		c := &cmps[i]
		if c.Key == "" {
			return fmt.Errorf("compare %d: empty key: %w", i, ErrInvalid)
		}
		if c.Target < CmpModRevision || c.Target > CmpValue {
			return fmt.Errorf("compare %d: unknown target %d: %w", i, c.Target, ErrInvalid)
		}
		if c.Op < Equal || c.Op > Greater {
			return fmt.Errorf("compare %d: unknown operator %d: %w", i, c.Op, ErrInvalid)
		}
		size += len(c.Key) + len(c.Value)
	}
	for _, ops := range [2][]Op{then, els} {
		n, err := checkOps(ops)
		if err != nil {
			return err
		}
		size += n
	}
	if size > MaxTxnBytes {
		return fmt.Errorf("%d bytes of keys and values (max %d): %w", size, MaxTxnBytes, ErrTooLarge)
	}
	return nil
}

// checkOps validates one branch and returns its size in bytes.
func checkOps(ops []Op) (int, error) {
	size := 0
	writes := 0
	for i := range ops {
		o := &ops[i]
		switch o.Type {
		case OpPut, OpDelete, OpGet:
			if o.Key == "" {
				return 0, fmt.Errorf("op %d: empty key: %w", i, ErrInvalid)
			}
		case OpDeletePrefix, OpGetPrefix:
			// An empty prefix means every key, as in etcd's "\x00" range.
		default:
			return 0, fmt.Errorf("op %d: unknown type %d: %w", i, o.Type, ErrInvalid)
		}
		if o.Type == OpPut || o.Type == OpDelete || o.Type == OpDeletePrefix {
			writes++
		}
		size += len(o.Key) + len(o.Value)
	}
	if writes < 2 {
		return size, nil
	}
	// Quadratic, but a branch has at most MaxOpsPerTxn ops and usually 1-3.
	for i := range ops {
		p := &ops[i]
		if p.Type != OpPut {
			continue
		}
		for j := range ops {
			if i == j {
				continue
			}
			q := &ops[j]
			clash := false
			switch q.Type {
			case OpPut, OpDelete:
				clash = q.Key == p.Key
			case OpDeletePrefix:
				clash = strings.HasPrefix(p.Key, q.Key)
			}
			if clash {
				return 0, fmt.Errorf("key %q: %w", p.Key, ErrDuplicateKey)
			}
		}
	}
	return size, nil
}

// HasWrites reports whether ops change anything when run.
func HasWrites(ops []Op) bool {
	for i := range ops {
		switch ops[i].Type {
		case OpPut, OpDelete, OpDeletePrefix:
			return true
		}
	}
	return false
}

// PrefixEnd returns the smallest key greater than every key that starts with
// prefix, or "" when there is none (prefix empty or all 0xff bytes), which
// etcd's range API reads as "to the end".
func PrefixEnd(prefix string) string {
	b := []byte(prefix)
	for i := len(b) - 1; i >= 0; i-- {
		if b[i] < 0xff {
			b[i]++
			return string(b[:i+1])
		}
	}
	return ""
}

// Matches reports whether cmp holds for kv (nil when the key is missing),
// with the semantics documented on Cmp. Backends that evaluate compares
// themselves use it so that they agree on corner cases.
func (c *Cmp) Matches(kv *KV) bool {
	if c.Target == CmpValue {
		if kv == nil {
			return c.Op == NotEqual
		}
		return opHolds(c.Op, bytes.Compare(kv.Value, c.Value))
	}
	var have int64
	if kv != nil {
		switch c.Target {
		case CmpModRevision:
			have = kv.ModRevision
		case CmpCreateRevision:
			have = kv.CreateRevision
		case CmpVersion:
			have = kv.Version
		}
	}
	switch {
	case have < c.Rev:
		return opHolds(c.Op, -1)
	case have > c.Rev:
		return opHolds(c.Op, 1)
	}
	return opHolds(c.Op, 0)
}

func opHolds(op CmpOp, cmp int) bool {
	switch op {
	case Equal:
		return cmp == 0
	case NotEqual:
		return cmp != 0
	case Less:
		return cmp < 0
	case Greater:
		return cmp > 0
	}
	return false
}
