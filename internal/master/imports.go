package master

import (
	"context"
	"time"

	"github.com/corral/corral/internal/nodeapi"
	"github.com/corral/corral/internal/seconds"
)

// DefaultPendingImportTimeout is how long the watcher lets an import wait
// for its first byte before it removes it (Options.PendingImportTimeout).
// The import of a move between clusters gives up by itself after Ganeti's
// 180 s plus the source's shutdown timeout; this catches the rest, such as
// an import whose job was lost with its master.
const DefaultPendingImportTimeout = 10 * time.Minute

// sweepImports aborts, on every online node, the imports that have waited
// longer than the limit without receiving anything. The job that follows
// such an import then fails, and its revert removes the half-created
// instance and its disks. It is the pending-import-sweep reconciler; a
// node it cannot ask is tried again next round.
func (d *Daemon) sweepImports(ctx context.Context) error {
	limit := d.opts.PendingImportTimeout
	if limit < 0 {
		return nil
	}
	if limit == 0 {
		limit = DefaultPendingImportTimeout
	}
	for _, n := range d.cfg.Nodes() {
		if n.Offline {
			continue
		}
		var r nodeapi.ImpExpStatusReply
		if err := d.rpc.Call(ctx, n, nodeapi.ImpExpStatus, "", nodeapi.ImpExpNames{}, &r); err != nil {
			d.log.Debug("watcher: cannot list transfers", "node", n.Name, "err", err)
			continue
		}
		for _, st := range r.Status {
			if st.Kind != "import" || st.Done || st.Connected || st.Bytes > 0 || st.Age < limit.Seconds() {
				continue
			}
			if err := d.rpc.Call(ctx, n, nodeapi.ImpExpAbort, "", nodeapi.ImpExpNames{Names: []string{st.Name}}, nil); err != nil {
				d.log.Warn("watcher: cannot abort a pending import", "node", n.Name, "import", st.Name, "err", err)
				continue
			}
			d.log.Warn("watcher: removed an import that received nothing", "node", n.Name, "import", st.Name,
				"waited", seconds.Duration(st.Age).Round(time.Second), "limit", limit)
		}
	}
	return nil
}
