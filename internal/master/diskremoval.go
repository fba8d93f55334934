package master

import (
	"context"
	"fmt"
	"time"

	"github.com/corral/corral/internal/confdb"
	"github.com/corral/corral/internal/config"
	"github.com/corral/corral/internal/nodeapi"
)

// removeLeftDisks removes the disks a failed change recorded because
// their node did not answer (confdb.DiskRemoval), now that it may. A
// removal is dropped once the node removed the disk (or had none), or
// when its node left the cluster; an offline or still unreachable node
// keeps it for the next round. Their instances are gone from the
// configuration and their uuids are never reused, so no lock is needed.
// It is the left-disk-removal reconciler; a disk still left is reported in
// its node's status, not as the round's error.
func (d *Daemon) removeLeftDisks(ctx context.Context) error {
	pending, err := d.cfg.DiskRemovals(ctx)
	if err != nil {
		d.log.Warn("watcher: cannot read the pending disk removals", "err", err)
		return fmt.Errorf("reading the pending disk removals: %w", err)
	}
	left := map[string]int{}       // node uuid -> disks still on it
	lastErr := map[string]string{} // node uuid -> why the last one is
	for _, r := range pending {
		if err := d.removeLeftDisk(ctx, r); err != nil {
			d.log.Warn("watcher: a disk left by a failed change is still on its node", "instance", r.InstanceName,
				"instance_uuid", r.InstanceUUID, "disk", r.Index, "err", err)
			left[r.NodeUUID]++
			lastErr[r.NodeUUID] = err.Error()
		}
	}
	for _, n := range d.cfg.Nodes() {
		d.updateNodeStatus(ctx, n, disksLeftStatus(n, left[n.UUID], lastErr[n.UUID]))
	}
	return nil
}

// Condition DisksLeft of a node's status: disks of instances removed from
// the configuration that the node still holds, because a change failed
// while it was unreachable (confdb.DiskRemoval).
const (
	condDisksLeft       = "DisksLeft"
	reasonNodeOffline   = "NodeOffline"
	reasonRemovalFailed = "RemovalFailed"
	reasonAllRemoved    = "AllRemoved"
)

// disksLeftStatus sets DisksLeft from this round: count disks could not be
// removed from n, the last for reason lastErr. A node that never had
// any keeps no status.
func disksLeftStatus(n *config.Node, count int, lastErr string) func(*config.Status, time.Time) {
	return func(s *config.Status, now time.Time) {
		if count == 0 {
			if s.IsTrue(condDisksLeft) {
				s.LastError = ""
				s.SetCondition(config.Condition{Type: condDisksLeft, Status: config.ConditionFalse, Reason: reasonAllRemoved,
					Message: "the disks left by failed changes were removed"}, now)
			}
			return
		}
		reason := reasonRemovalFailed
		if n.Offline {
			reason = reasonNodeOffline
		}
		s.LastError = lastErr
		s.SetCondition(config.Condition{Type: condDisksLeft, Status: config.ConditionTrue, Reason: reason,
			Message: fmt.Sprintf("%d disk(s) of instances no longer in the configuration wait for removal", count)}, now)
	}
}

func (d *Daemon) removeLeftDisk(ctx context.Context, r confdb.DiskRemoval) error {
	node, known := d.cfg.Node(r.NodeUUID)
	if known && node.Offline {
		return fmt.Errorf("node %s is offline", node.Name)
	}
	if known {
		args := nodeapi.DiskArgs{InstanceUUID: r.InstanceUUID, Template: r.Template,
			Disk: nodeapi.DiskSpec{UUID: r.DiskUUID, Index: r.Index, SizeMiB: r.SizeMiB, Mode: r.Mode}}
		if err := d.rpc.Call(ctx, node, nodeapi.DiskRemove, "", args, nil); err != nil {
			return fmt.Errorf("removing it from node %s: %w", node.Name, err)
		}
		d.log.Info("watcher: removed a disk left by a failed change", "node", node.Name, "instance", r.InstanceName,
			"instance_uuid", r.InstanceUUID, "disk", r.Index)
	}
	tx := d.cfg.Begin()
	tx.DropDiskRemoval(r)
	if err := d.cfg.Commit(ctx, tx); err != nil {
		return fmt.Errorf("forgetting its removal: %w", err)
	}
	return nil
}
