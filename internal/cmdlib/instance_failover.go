package cmdlib

import (
	"context"
	"fmt"
	"strings"

	"github.com/corral/corral/internal/config"
	"github.com/corral/corral/internal/ecode"
	"github.com/corral/corral/internal/engine"
	"github.com/corral/corral/internal/hypervisor"
	"github.com/corral/corral/internal/locking"
	"github.com/corral/corral/internal/nodeapi"
	"github.com/corral/corral/internal/opcodes"
)

// ---- migrate --cleanup

// placement is where one node says it has the instance.
type placement struct {
	node  *config.Node
	state string
}

// cleanup asks every node of the instance's group whether it runs the
// instance (a crash mid-migration can leave it on the source, on the
// destination, or paused on both), keeps the copy that runs, records its
// node as primary and stops the others.
func (lu *instanceMigrateLU) cleanup(ctx context.Context, s *StepCtx) error {
	inst, src, err := lu.sourceOf(s)
	if err != nil {
		return err
	}
	spec := s.p.Spec(inst)
	args := nodeapi.InstanceArgs{Instance: spec}
	// A migration still running on the configured node is stopped first:
	// its source then runs on.
	if !src.Offline {
		var st hypervisor.MigrationStatus
		if err := s.RPC(ctx, src, nodeapi.MigrationStatus, args, &st); err == nil && !st.Finished() && st.Status != hypervisor.MigrationNone && st.Status != hypervisor.MigrationPostcopy {
			s.Logf(ctx, "A migration of %s is still running from %s: cancelling it", inst.Name, src.Name)
			if err := s.RPC(ctx, src, nodeapi.MigrationCancel, args, nil); err != nil {
				return err
			}
		}
	}
	found, err := lu.findCopies(ctx, s, inst, src)
	if err != nil {
		return err
	}
	var runs []placement
	for _, f := range found {
		if f.state == string(hypervisor.StateRunning) {
			runs = append(runs, f)
		}
	}
	if len(runs) > 1 {
		var names []string
		for _, r := range runs {
			names = append(names, r.node.Name)
		}
		return ecode.Errorf(ecode.State, "Instance %s runs on several nodes (%s): stop all but one by hand", inst.Name, strings.Join(names, ", "))
	}
	if len(runs) == 0 {
		if len(found) == 0 {
			s.Logf(ctx, "Instance %s runs nowhere; the configuration keeps it on %s", inst.Name, src.Name)
			return nil
		}
		return ecode.Errorf(ecode.State, "Instance %s is paused on %s and runs nowhere: resume or stop it by hand", inst.Name, describe(found))
	}
	keep := runs[0].node
	for _, f := range found {
		if f.node.UUID == keep.UUID {
			continue
		}
		s.Logf(ctx, "Stopping the leftover %s copy of %s on %s", f.state, inst.Name, f.node.Name)
		if err := s.RPC(ctx, f.node, nodeapi.MigrationDrop, args, nil); err != nil {
			return err
		}
	}
	if keep.UUID == inst.PrimaryNode {
		s.Logf(ctx, "Instance %s runs on %s, as configured", inst.Name, keep.Name)
		return nil
	}
	s.Logf(ctx, "Instance %s runs on %s: recording it there (the configuration said %s)", inst.Name, keep.Name, src.Name)
	inst.PrimaryNode = keep.UUID
	s.Tx().PutInstance(inst)
	return nil
}

func describe(ps []placement) string {
	var out []string
	for _, p := range ps {
		out = append(out, fmt.Sprintf("%s (%s)", p.node.Name, p.state))
	}
	return strings.Join(out, ", ")
}

// findCopies asks the online nodes of the group for the instance.
func (lu *instanceMigrateLU) findCopies(ctx context.Context, s *StepCtx, inst *config.Instance, src *config.Node) ([]placement, error) {
	var found []placement
	for _, n := range s.Cfg().Nodes() {
		if n.Offline || !n.VMCapable || n.Group != src.Group {
			continue
		}
		var list []nodeapi.RunningInstance
		err := s.RPC(ctx, n, nodeapi.InstanceList, nodeapi.InstanceListArgs{Hypervisors: []string{inst.Hypervisor}}, &list)
		if err != nil {
			if n.UUID == src.UUID || n.UUID == lu.Target {
				return nil, fmt.Errorf("cannot ask node %s where instance %s runs: %w", n.Name, inst.Name, err)
			}
			s.Logf(ctx, "Cannot ask node %s about instance %s: %v", n.Name, inst.Name, err)
			continue
		}
		for _, r := range list {
			if r.UUID == inst.UUID {
				found = append(found, placement{node: n, state: r.State})
			}
		}
	}
	return found, nil
}

// ---- failover

// instanceFailoverLU is OP_INSTANCE_FAILOVER: stop the instance on its node
// (when that node answers), record it on the target, start it there when it
// should run.
type instanceFailoverLU struct {
	instanceBase
	Source string `json:"source"`
	Target string `json:"target"`
	Up     bool   `json:"up"`
}

func (lu *instanceFailoverLU) Locks(p *Processor, op *opcodes.Op) []locking.Request {
	return migrationLocks(&lu.instanceBase, p, op)
}

func (lu *instanceFailoverLU) Prereq(ctx context.Context, p *Processor, op *opcodes.Op) error {
	inst, src, err := lu.load(p, op)
	if err != nil {
		return err
	}
	lu.Source = src.UUID
	if !isExternallyMirrored(inst.DiskTemplate) {
		return ecode.Errorf(ecode.State, "Instance's disk layout '%s' does not allow failover (its disks are on one node)", inst.DiskTemplate)
	}
	if err := refuseInRescue(p, inst, "fail it over"); err != nil {
		return err
	}
	if op.Bool("cleanup") {
		return ecode.Errorf(ecode.Inval, "cleanup is a migration's: use migrate with cleanup")
	}
	if inst.AdminState == config.AdminOffline {
		return ecode.Errorf(ecode.State, "Instance '%s' is marked offline", inst.Name)
	}
	lu.Up = inst.AdminState == config.AdminUp
	t, err := p.migrationTarget(ctx, inst, src, op)
	if err != nil {
		return err
	}
	lu.Target = t.UUID
	return nil
}

func (lu *instanceFailoverLU) Steps() []Step {
	return []Step{
		{"stop-source", func(ctx context.Context, s *StepCtx) error {
			inst, err := s.Cfg().MustInstance(lu.UUID)
			if err != nil {
				return err
			}
			src, err := s.Cfg().MustNode(lu.Source)
			if err != nil {
				return err
			}
			if inst.PrimaryNode != lu.Source {
				return nil // a repeated step
			}
			if src.Offline {
				s.Logf(ctx, "Node %s is offline: not shutting the instance down there", src.Name)
				return nil
			}
			s.Logf(ctx, "Shutting down instance %s on node %s", inst.Name, src.Name)
			args := nodeapi.ShutdownArgs{Instance: s.p.Spec(inst), Timeout: s.Op().Int("shutdown_timeout")}
			err = s.RPC(ctx, src, nodeapi.InstanceShutdown, args, nil)
			if err == nil {
				return nil
			}
			if !s.Op().Bool("ignore_consistency") {
				return ecode.Errorf(ecode.State, "Could not shut down instance %s on node %s: %w; use ignore_consistency to fail over anyway", inst.Name, src.Name, err)
			}
			s.Logf(ctx, "Could not shut down instance %s on node %s (%v); failing over anyway (ignore_consistency)", inst.Name, src.Name, err)
			return nil
		}},
		{"switch", func(ctx context.Context, s *StepCtx) error { return setPrimary(s, lu.UUID, lu.Target) }},
		{"start-target", func(ctx context.Context, s *StepCtx) error {
			if !lu.Up {
				return nil
			}
			return startOn(ctx, s, lu.UUID, lu.Target)
		}},
	}
}

func (lu *instanceFailoverLU) Result() any { return nil }

// setPrimary records node as the instance's primary (the switch of a
// failover or a move between nodes).
func setPrimary(s *StepCtx, instUUID, node string) error {
	inst, err := s.Cfg().MustInstance(instUUID)
	if err != nil {
		return err
	}
	inst.PrimaryNode = node
	s.Tx().PutInstance(inst)
	return nil
}

// startOn starts the instance on node, logging it.
func startOn(ctx context.Context, s *StepCtx, instUUID, node string) error {
	inst, err := s.Cfg().MustInstance(instUUID)
	if err != nil {
		return err
	}
	n, err := s.Cfg().MustNode(node)
	if err != nil {
		return err
	}
	s.Logf(ctx, "Starting instance %s on node %s", inst.Name, n.Name)
	return s.RPC(ctx, n, nodeapi.InstanceStart, nodeapi.InstanceArgs{Instance: s.p.Spec(inst)}, nil)
}

// migrateUnits are the moves of instances between nodes with shared disks.
func (p *Processor) migrateUnits() []engine.Op {
	return []engine.Op{
		p.unit("OP_INSTANCE_MIGRATE", func() LU { return &instanceMigrateLU{} }),
		p.unit("OP_INSTANCE_FAILOVER", func() LU { return &instanceFailoverLU{} }),
	}
}
