package confdb

import (
	"context"
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

// diskRemovals are kept in the store only (see records).
var diskRemovals = records[DiskRemoval]{
	prefix: pfxDiskRemoval,
	key:    func(r DiskRemoval) string { return r.NodeUUID + "/" + r.DiskUUID },
	what:   "the pending disk removals",
}

// AddDiskRemoval records a disk the watcher must remove from its node.
func (tx *Tx) AddDiskRemoval(r DiskRemoval) { diskRemovals.put(tx, r) }

// DropDiskRemoval forgets a recorded removal once the node removed the disk.
func (tx *Tx) DropDiskRemoval(r DiskRemoval) { diskRemovals.drop(tx, r) }

// DiskRemovals lists the recorded removals, read from the store (they are
// few and only the watcher reads them, so the cache does not hold them).
func (db *DB) DiskRemovals(ctx context.Context) ([]DiskRemoval, error) {
	return diskRemovals.list(ctx, db.st)
}
