package confdb

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/corral/corral/internal/store"
)

// records is a kind of entry kept in the store only, not in the cache:
// few, read by one party, and without names (the disks the watcher must
// still remove). Each is under prefix + key(entry).
type records[T any] struct {
	prefix string
	key    func(T) string
	what   string // for errors: "the pending disk removals"
}

func (r records[T]) put(tx *Tx, v T) { tx.put(r.prefix+r.key(v), v) }

func (r records[T]) drop(tx *Tx, v T) {
	tx.ops = append(tx.ops, store.Delete(r.prefix+r.key(v)))
}

// list reads every entry from the store, in key order.
func (r records[T]) list(ctx context.Context, st store.Store) ([]T, error) {
	kvs, _, err := st.Range(ctx, r.prefix, store.RangeOptions{})
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", r.what, err)
	}
	out := make([]T, 0, len(kvs))
	for _, kv := range kvs {
		var v T
		if err := json.Unmarshal(kv.Value, &v); err != nil {
			return nil, fmt.Errorf("decoding %s: %w", kv.Key, err)
		}
		out = append(out, v)
	}
	return out, nil
}
