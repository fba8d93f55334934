package master

import (
	"context"
	"fmt"

	"github.com/corral/corral/internal/cmdlib"
	"github.com/corral/corral/internal/nodeapi"
)

// planLeftDiskRemoval is the left-disk-removal reconciler's round. It
// reads the disks that changes which failed while their node did not
// answer left behind (confdb.DiskRemoval) and hands the removals that can
// be done now to one OP_CLUSTER_REMOVE_LEFT_DISKS job: those on online
// nodes that answer, and those of nodes that left the cluster. An offline
// or unreachable node keeps its disks for a later round; the round records
// that in the node's status (condition DisksLeft), as it clears the
// condition of a node with nothing left, without a job: a status is what
// was observed, not a change of the cluster.
func (d *Daemon) planLeftDiskRemoval(ctx context.Context) (map[string]any, error) {
	pending, err := d.cfg.DiskRemovals(ctx)
	if err != nil {
		d.log.Warn("watcher: cannot read the pending disk removals", "err", err)
		return nil, fmt.Errorf("reading the pending disk removals: %w", err)
	}
	left := map[string]int{} // node uuid -> disks recorded on it
	departed := false        // some are on nodes that left the cluster
	for _, r := range pending {
		if _, known := d.cfg.Node(r.NodeUUID); !known {
			departed = true
			continue
		}
		left[r.NodeUUID]++
	}
	nodes := []string{}
	for _, n := range d.cfg.Nodes() {
		count := left[n.UUID]
		switch {
		case count == 0:
			d.updateNodeStatus(ctx, n, cmdlib.DisksLeftStatus(n, 0, ""))
		case n.Offline:
			d.updateNodeStatus(ctx, n, cmdlib.DisksLeftStatus(n, count, fmt.Sprintf("node %s is offline", n.Name)))
		default:
			var version any
			if err := d.rpc.Call(ctx, n, nodeapi.Version, "", nil, &version); err != nil {
				d.log.Warn("watcher: a node holding disks left by failed changes does not answer", "node", n.Name, "disks", count, "err", err)
				d.updateNodeStatus(ctx, n, cmdlib.DisksLeftStatus(n, count, fmt.Sprintf("node %s does not answer: %v", n.Name, err)))
				continue
			}
			nodes = append(nodes, n.Name)
		}
	}
	if len(nodes) == 0 && !departed {
		return nil, nil
	}
	// With no node named the job looks at every node, which the forgotten
	// records of departed nodes need.
	return map[string]any{"OP_ID": "OP_CLUSTER_REMOVE_LEFT_DISKS", "nodes": nodes}, nil
}
