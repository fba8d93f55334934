package confdb

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/corral/corral/internal/store"
)

// pfxDiskRemoval holds the disks a failed change could not remove because
// their node did not answer: /config/removal/disk/<node uuid>/<disk uuid>.
const pfxDiskRemoval = Prefix + "removal/disk/"

// DiskRemoval is a disk left on a node by a change that failed while the
// node was unreachable (a create whose node daemon died). It is recorded
// in the same transaction that removes the instance from the
// configuration, and the watcher removes the disk once the node answers,
// so the disk cannot be forgotten, and no instance holds it meanwhile.
type DiskRemoval struct {
	NodeUUID     string `json:"node_uuid"`
	InstanceUUID string `json:"instance_uuid"`
	InstanceName string `json:"instance_name"` // for the operator; the uuid decides
	Template     string `json:"disk_template"`
	DiskUUID     string `json:"disk_uuid"`
	Index        int    `json:"index"`
	SizeMiB      int64  `json:"size"`
	Mode         string `json:"mode"`
}

func (r DiskRemoval) key() string { return pfxDiskRemoval + r.NodeUUID + "/" + r.DiskUUID }

// AddDiskRemoval records a disk the watcher must remove from its node.
func (tx *Tx) AddDiskRemoval(r DiskRemoval) { tx.put(r.key(), r) }

// DropDiskRemoval forgets a recorded removal once the node removed the disk.
func (tx *Tx) DropDiskRemoval(r DiskRemoval) { tx.ops = append(tx.ops, store.Delete(r.key())) }

// DiskRemovals lists the recorded removals, read from the store (they are
// few and only the watcher reads them, so the cache does not hold them).
func (db *DB) DiskRemovals(ctx context.Context) ([]DiskRemoval, error) {
	kvs, _, err := db.st.Range(ctx, pfxDiskRemoval, store.RangeOptions{})
	if err != nil {
		return nil, fmt.Errorf("reading the pending disk removals: %w", err)
	}
	out := make([]DiskRemoval, 0, len(kvs))
	for _, kv := range kvs {
		var r DiskRemoval
		if err := json.Unmarshal(kv.Value, &r); err != nil {
			return nil, fmt.Errorf("decoding %s: %w", kv.Key, err)
		}
		out = append(out, r)
	}
	return out, nil
}
