package master

import (
	"context"
	"slices"
	"time"

	"github.com/corral/corral/internal/cmdlib"
	"github.com/corral/corral/internal/nodeapi"
)

// DefaultPendingImportTimeout is how long the watcher lets an import wait
// for its first byte before it removes it (Options.PendingImportTimeout).
// The import of a move between clusters gives up by itself after Ganeti's
// 180 s plus the source's shutdown timeout; this catches the rest, such as
// an import whose job was lost with its master.
const DefaultPendingImportTimeout = 10 * time.Minute

// planImportSweep is the pending-import-sweep reconciler's round: it asks
// every online node for its transfers and, when some import has waited
// longer than the limit without receiving anything, returns one
// OP_CLUSTER_ABORT_PENDING_IMPORTS for the nodes holding such imports. The
// job asks again before it aborts them; the job waiting for such an import
// then fails, and its revert removes the half-created instance and its
// disks. A node it cannot ask is tried again next round.
func (d *Daemon) planImportSweep(ctx context.Context) (map[string]any, error) {
	limit := d.opts.PendingImportTimeout
	if limit < 0 {
		return nil, nil
	}
	if limit == 0 {
		limit = DefaultPendingImportTimeout
	}
	var nodes []string
	for _, n := range d.cfg.Nodes() {
		if n.Offline {
			continue
		}
		var r nodeapi.ImpExpStatusReply
		if err := d.rpc.Call(ctx, n, nodeapi.ImpExpStatus, "", nodeapi.ImpExpNames{}, &r); err != nil {
			d.log.Debug("watcher: cannot list transfers", "node", n.Name, "err", err)
			continue
		}
		if slices.ContainsFunc(r.Status, func(st nodeapi.TransferStatus) bool { return cmdlib.PendingTooLong(st, limit.Seconds()) }) {
			nodes = append(nodes, n.Name)
		}
	}
	if len(nodes) == 0 {
		return nil, nil
	}
	return map[string]any{"OP_ID": "OP_CLUSTER_ABORT_PENDING_IMPORTS", "nodes": nodes, "pending_timeout": limit.Seconds()}, nil
}
