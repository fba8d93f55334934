package cmdlib

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/corral/corral/internal/confdb"
	"github.com/corral/corral/internal/config"
	"github.com/corral/corral/internal/engine"
	"github.com/corral/corral/internal/locking"
	"github.com/corral/corral/internal/nodeapi"
	"github.com/corral/corral/internal/opcodes"
	"github.com/corral/corral/internal/seconds"
)

// Corral-only units that clear up what failed or abandoned work left on
// the nodes. corrald's reconcilers submit them when they find such
// leftovers (internal/master/reconcilers.go), so that every change they
// make is a job an operator can see, with its log and result.

// housekeepingUnits are the units of the housekeeping opcodes.
func (p *Processor) housekeepingUnits() []engine.Op {
	return []engine.Op{
		p.unit("OP_CLUSTER_REMOVE_LEFT_DISKS", func() LU { return &removeLeftDisksLU{} }),
		p.unit("OP_CLUSTER_ABORT_PENDING_IMPORTS", func() LU { return &abortPendingImportsLU{} }),
	}
}

// Condition DisksLeft of a node's status: disks of instances removed from
// the configuration that the node still holds, because a change failed
// while it was unreachable (confdb.DiskRemoval).
const (
	CondDisksLeft       = "DisksLeft"
	ReasonNodeOffline   = "NodeOffline"
	ReasonRemovalFailed = "RemovalFailed"
	ReasonAllRemoved    = "AllRemoved"
)

// DisksLeftStatus sets DisksLeft from what was found: count disks are
// still on n, the last for reason lastErr. A node that never had any keeps
// no status.
func DisksLeftStatus(n *config.Node, count int, lastErr string) func(*config.Status, time.Time) {
	return func(s *config.Status, now time.Time) {
		if count == 0 {
			if s.IsTrue(CondDisksLeft) {
				s.LastError = ""
				s.SetCondition(config.Condition{Type: CondDisksLeft, Status: config.ConditionFalse, Reason: ReasonAllRemoved,
					Message: "the disks left by failed changes were removed"}, now)
			}
			return
		}
		reason := ReasonRemovalFailed
		if n.Offline {
			reason = ReasonNodeOffline
		}
		s.LastError = lastErr
		s.SetCondition(config.Condition{Type: CondDisksLeft, Status: config.ConditionTrue, Reason: reason,
			Message: fmt.Sprintf("%d disk(s) of instances no longer in the configuration wait for removal", count)}, now)
	}
}

// housekeepingNodes resolves the nodes an op names (none: every node) to
// uuids; lockNodes is the same for Locks, which cannot fail.
func (p *Processor) housekeepingNodes(op *opcodes.Op) ([]*config.Node, error) {
	return p.namedNodes(op.Strings("nodes"))
}

func lockNodes(p *Processor, op *opcodes.Op) []string {
	names := op.Strings("nodes")
	if len(names) == 0 {
		return []string{locking.All}
	}
	var uuids []string
	for _, name := range names {
		if n, ok := p.Cfg.Node(name); ok {
			uuids = append(uuids, n.UUID)
		}
	}
	return uuids
}

// LeftDisk is one disk in OP_CLUSTER_REMOVE_LEFT_DISKS's result.
type LeftDisk struct {
	Node     string `json:"node"` // name, or uuid of a node no longer in the cluster
	Instance string `json:"instance"`
	Disk     int    `json:"disk"`
	Error    string `json:"error,omitempty"` // why it is still there
}

// ---- OP_CLUSTER_REMOVE_LEFT_DISKS

// removeLeftDisksLU removes the disks recorded by changes that failed
// while their node did not answer (confdb.DiskRemoval) from the named
// nodes, and records in each node's status what is still left. A record
// whose node is offline or does not answer stays for a later try; one
// whose node left the cluster is dropped, whatever nodes are named. The
// disks' instances are gone from the configuration and their uuids are
// never reused, so it needs the nodes only shared: it waits for a removal
// or a change of flags of the node, nothing else.
type removeLeftDisksLU struct {
	Nodes   []string             `json:"nodes"` // uuids
	Pending []confdb.DiskRemoval `json:"pending"`
	Removed []LeftDisk           `json:"removed"`
	Left    []LeftDisk           `json:"left"`
}

func (lu *removeLeftDisksLU) Locks(p *Processor, op *opcodes.Op) []locking.Request {
	return []locking.Request{bgl(locking.Shared), nodeLock(locking.Shared, lockNodes(p, op)...)}
}

func (lu *removeLeftDisksLU) Prereq(ctx context.Context, p *Processor, op *opcodes.Op) error {
	nodes, err := p.housekeepingNodes(op)
	if err != nil {
		return err
	}
	lu.Nodes = nil
	for _, n := range nodes {
		lu.Nodes = append(lu.Nodes, n.UUID)
	}
	all, err := p.Cfg.DiskRemovals(ctx)
	if err != nil {
		return fmt.Errorf("reading the disks left by failed changes: %w", err)
	}
	lu.Pending = nil
	for _, r := range all {
		if _, known := p.Cfg.Node(r.NodeUUID); !known || slices.Contains(lu.Nodes, r.NodeUUID) {
			lu.Pending = append(lu.Pending, r)
		}
	}
	return nil
}

func (lu *removeLeftDisksLU) Steps() []Step {
	return []Step{{"remove the disks", lu.remove}}
}

// remove removes each pending disk and forgets its record, in the step's
// commit; a disk it cannot remove is reported in its node's status, not as
// the op's failure, and stays recorded.
func (lu *removeLeftDisksLU) remove(ctx context.Context, s *StepCtx) error {
	p := s.p
	lu.Removed, lu.Left = nil, nil
	left := map[string]int{}       // node uuid -> disks still on it
	lastErr := map[string]string{} // node uuid -> why the last one is
	for _, r := range lu.Pending {
		node, known := s.Cfg().Node(r.NodeUUID)
		d := LeftDisk{Node: r.NodeUUID, Instance: r.InstanceName, Disk: r.Index}
		if known {
			d.Node = node.Name
		}
		if err := removeLeftDisk(ctx, s, node, r); err != nil {
			p.Log.Warn("watcher: a disk left by a failed change is still on its node", "instance", r.InstanceName,
				"instance_uuid", r.InstanceUUID, "disk", r.Index, "err", err)
			d.Error = err.Error()
			lu.Left = append(lu.Left, d)
			left[r.NodeUUID]++
			lastErr[r.NodeUUID] = d.Error
			s.Logf(ctx, "Disk %d of removed instance %s is still on node %s: %v", r.Index, r.InstanceName, d.Node, err)
			continue
		}
		s.Tx().DropDiskRemoval(r)
		lu.Removed = append(lu.Removed, d)
		if known {
			p.Log.Info("watcher: removed a disk left by a failed change", "node", node.Name, "instance", r.InstanceName,
				"instance_uuid", r.InstanceUUID, "disk", r.Index)
			s.Logf(ctx, "Removed disk %d of removed instance %s from node %s", r.Index, r.InstanceName, node.Name)
		} else {
			s.Logf(ctx, "Forgot disk %d of removed instance %s: its node %s left the cluster", r.Index, r.InstanceName, r.NodeUUID)
		}
	}
	now := time.Now()
	for _, uuid := range lu.Nodes {
		n, ok := s.Cfg().Node(uuid)
		if !ok {
			continue
		}
		if next, changed := config.ChangeStatus(s.Cfg().NodeStatus(uuid), DisksLeftStatus(n, left[uuid], lastErr[uuid]), now); changed {
			s.Tx().PutNodeStatus(uuid, next)
		}
	}
	return nil
}

// removeLeftDisk removes one recorded disk from its node (nil node: the
// node left the cluster, nothing to remove).
func removeLeftDisk(ctx context.Context, s *StepCtx, node *config.Node, r confdb.DiskRemoval) error {
	if node == nil {
		return nil
	}
	if node.Offline {
		return fmt.Errorf("node %s is offline", node.Name)
	}
	args := nodeapi.DiskArgs{InstanceUUID: r.InstanceUUID, Template: r.Template, SharedFileDir: s.Cfg().Cluster().SharedFileStorageDir,
		Disk: nodeapi.DiskSpec{UUID: r.DiskUUID, Index: r.Index, SizeMiB: r.SizeMiB, Mode: r.Mode, Params: s.p.nodeDiskParams(r.Template, node.UUID)}}
	if err := s.RPC(ctx, node, nodeapi.DiskRemove, args, nil); err != nil {
		return fmt.Errorf("removing it from node %s: %w", node.Name, err)
	}
	return nil
}

func (lu *removeLeftDisksLU) Result() any {
	return map[string]any{"removed": nonNilDisks(lu.Removed), "left": nonNilDisks(lu.Left)}
}

func nonNilDisks(l []LeftDisk) []LeftDisk {
	if l == nil {
		return []LeftDisk{}
	}
	return l
}

// ---- OP_CLUSTER_ABORT_PENDING_IMPORTS

// PendingTooLong reports whether st is an import that has waited at least
// limit seconds without a connection or a byte: one
// OP_CLUSTER_ABORT_PENDING_IMPORTS aborts.
func PendingTooLong(st nodeapi.TransferStatus, limit float64) bool {
	return st.Kind == "import" && !st.Done && !st.Connected && st.Bytes == 0 && st.Age >= limit
}

// PendingImport is one import OP_CLUSTER_ABORT_PENDING_IMPORTS aborts.
type PendingImport struct {
	Node   string  `json:"node"`
	Name   string  `json:"name"`
	Waited float64 `json:"waited"` // seconds
	Error  string  `json:"error,omitempty"`
}

// abortPendingImportsLU aborts on the named online nodes the imports that
// received nothing for pending_timeout seconds. The job waiting for such
// an import then fails, and its revert removes the half-created instance
// and its disks. It takes no lock: the import belongs to a job that holds
// its instance and nodes, and aborting it is what lets that job end.
type abortPendingImportsLU struct {
	Found   []PendingImport `json:"found"`
	Aborted []PendingImport `json:"aborted"`
	Failed  []PendingImport `json:"failed"`
}

func (lu *abortPendingImportsLU) Locks(p *Processor, op *opcodes.Op) []locking.Request { return nil }

// Prereq asks each node which of its imports still wait: a node it
// cannot ask is left for a later try.
func (lu *abortPendingImportsLU) Prereq(ctx context.Context, p *Processor, op *opcodes.Op) error {
	nodes, err := p.housekeepingNodes(op)
	if err != nil {
		return err
	}
	limit := op.Float("pending_timeout")
	lu.Found = nil
	for _, n := range nodes {
		if n.Offline {
			continue
		}
		var r nodeapi.ImpExpStatusReply
		if err := p.RPC.Call(ctx, n, nodeapi.ImpExpStatus, "", nodeapi.ImpExpNames{}, &r); err != nil {
			p.Log.Debug("watcher: cannot list transfers", "node", n.Name, "err", err)
			continue
		}
		for _, st := range r.Status {
			if PendingTooLong(st, limit) {
				lu.Found = append(lu.Found, PendingImport{Node: n.Name, Name: st.Name, Waited: st.Age})
			}
		}
	}
	return nil
}

func (lu *abortPendingImportsLU) Steps() []Step {
	return []Step{{"abort the imports", lu.abort}}
}

func (lu *abortPendingImportsLU) abort(ctx context.Context, s *StepCtx) error {
	p := s.p
	lu.Aborted, lu.Failed = nil, nil
	limit := s.Op().Float("pending_timeout")
	for _, imp := range lu.Found {
		n, ok := s.Cfg().Node(imp.Node)
		if !ok {
			continue
		}
		if err := s.RPC(ctx, n, nodeapi.ImpExpAbort, nodeapi.ImpExpNames{Names: []string{imp.Name}}, nil); err != nil {
			p.Log.Warn("watcher: cannot abort a pending import", "node", n.Name, "import", imp.Name, "err", err)
			imp.Error = err.Error()
			lu.Failed = append(lu.Failed, imp)
			s.Logf(ctx, "Cannot abort import %s on node %s: %v", imp.Name, n.Name, err)
			continue
		}
		waited := seconds.Duration(imp.Waited).Round(time.Second)
		p.Log.Warn("watcher: removed an import that received nothing", "node", n.Name, "import", imp.Name,
			"waited", waited, "limit", seconds.Duration(limit))
		s.Logf(ctx, "Aborted import %s on node %s: it received nothing in %v", imp.Name, n.Name, waited)
		lu.Aborted = append(lu.Aborted, imp)
	}
	return nil
}

func (lu *abortPendingImportsLU) Result() any {
	return map[string]any{"aborted": nonNilImports(lu.Aborted), "failed": nonNilImports(lu.Failed)}
}

func nonNilImports(l []PendingImport) []PendingImport {
	if l == nil {
		return []PendingImport{}
	}
	return l
}
