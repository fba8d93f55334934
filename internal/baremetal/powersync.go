package baremetal

import (
	"context"
	"fmt"
	"time"

	"github.com/corral/corral/internal/config"
	"github.com/corral/corral/internal/engine"
	"github.com/corral/corral/internal/locking"
	"github.com/corral/corral/internal/nodeapi"
	"github.com/corral/corral/internal/opcodes"
)

// Conditions the power-state sync records on a machine's status.
const (
	// CondPowerInSync is True while the BMC reports the power state Corral
	// has; False with reason PowerStateDrifted once it reported another.
	CondPowerInSync = "PowerInSync"
	// CondBMCReachable is False while the BMC does not answer.
	CondBMCReachable = "BMCReachable"
)

// SyncCandidates are the machines whose power state the sync reads: a
// real power interface, no action holding them, not in maintenance (as
// Ironic skips them).
func SyncCandidates(machines []*config.Machine) []string {
	var out []string
	for _, m := range machines {
		if m.Interfaces.Power != "fake" && m.Reservation == "" && !m.Maintenance {
			out = append(out, m.UUID)
		}
	}
	return out
}

// powerSyncUnit reads the power state of machines from their BMCs and
// records what it finds: a state that changed outside Corral becomes the
// machine's power_state, with a PowerInSync condition saying it drifted
// (Ironic's power-state sync with force_power_state_during_sync off).
type powerSyncUnit struct {
	d        *Deps
	Machines []string `json:"machines"`
}

func (u *powerSyncUnit) Locks(op *opcodes.Op) []locking.Request {
	return []locking.Request{
		{Level: locking.LevelCluster, Mode: locking.Shared, Names: []string{locking.BGL}},
		{Level: locking.LevelMachine, Mode: locking.Exclusive, Names: op.Strings("machines")},
	}
}

func (u *powerSyncUnit) Prereq(ctx context.Context, op *opcodes.Op) error {
	var ms []*config.Machine
	for _, id := range op.Strings("machines") {
		if m, ok := u.d.Cfg.Machine(id); ok {
			ms = append(ms, m)
		}
	}
	u.Machines = SyncCandidates(ms)
	return nil
}

func (u *powerSyncUnit) Steps() []engine.Step {
	return []engine.Step{{Name: "read the BMCs' power states", Run: func(ctx context.Context, s *engine.StepCtx) error {
		for _, id := range u.Machines {
			m, ok := s.Cfg().Machine(id)
			if !ok || m.Reservation != "" || m.Maintenance {
				continue // changed since Prereq
			}
			u.syncOne(ctx, s, m)
		}
		return nil
	}}}
}

// syncOne reads one machine's power state and records it.
func (u *powerSyncUnit) syncOne(ctx context.Context, s *engine.StepCtx, m *config.Machine) {
	now := u.d.now()
	var reply nodeapi.MachinePowerReply
	var err error
	n, cerr := u.d.conductor(m)
	if err = cerr; err == nil {
		err = s.RPC(ctx, n, nodeapi.MachinePower, nodeapi.MachinePowerArgs{MachineBMC: bmcOf(m)}, &reply)
	}
	was := m.PowerState
	st, changed := config.ChangeStatus(s.Cfg().MachineStatus(m.UUID), func(st *config.Status, now time.Time) {
		if err != nil {
			st.SetCondition(config.Condition{Type: CondBMCReachable, Status: config.ConditionFalse, Reason: "PowerStateUnknown", Message: err.Error()}, now)
			return
		}
		st.SetCondition(config.Condition{Type: CondBMCReachable, Status: config.ConditionTrue, Reason: "Answered"}, now)
		if was != "" && reply.PowerState != was {
			st.SetCondition(config.Condition{Type: CondPowerInSync, Status: config.ConditionFalse, Reason: "PowerStateDrifted",
				Message: fmt.Sprintf("the BMC reported %q while Corral had %q", reply.PowerState, was)}, now)
		} else if c, ok := st.Condition(CondPowerInSync); !ok || c.Status != config.ConditionFalse {
			st.SetCondition(config.Condition{Type: CondPowerInSync, Status: config.ConditionTrue, Reason: "Matches"}, now)
		}
	}, now)
	tx := s.Tx()
	if changed {
		tx.PutMachineStatus(m.UUID, st)
	}
	if err == nil && reply.PowerState != "" && reply.PowerState != was {
		m.PowerState = reply.PowerState
		tx.PutMachine(m)
	}
}

func (u *powerSyncUnit) Result() any { return u.Machines }
