package baremetal

import (
	"context"
	"fmt"

	"github.com/corral/corral/internal/baremetal/states"
	"github.com/corral/corral/internal/config"
	"github.com/corral/corral/internal/ecode"
	"github.com/corral/corral/internal/engine"
	"github.com/corral/corral/internal/locking"
	"github.com/corral/corral/internal/nodeapi"
	"github.com/corral/corral/internal/opcodes"
)

// powerUnit runs a power action (the API's PUT .../states/power): the
// first step shows target_power_state and reserves the machine, the
// second acts through the power interface and records the new state.
type powerUnit struct {
	d        *Deps
	UUID     string       `json:"uuid"`
	Target   states.Power `json:"target"`
	Reserved string       `json:"reserved,omitempty"`
}

func (u *powerUnit) Locks(op *opcodes.Op) []locking.Request {
	return machineLocks(u.d.Cfg, op.Str("machine"))
}

func (u *powerUnit) Prereq(ctx context.Context, op *opcodes.Op) error {
	m, err := u.d.Cfg.MustMachine(op.Str("machine"))
	if err != nil {
		return err
	}
	t, ok := states.PowerTarget(op.Str("target"))
	if !ok {
		return ecode.Errorf(ecode.Inval, "Invalid state provided for power state: %s", op.Str("target"))
	}
	if err := checkFree(m); err != nil {
		return err
	}
	u.UUID, u.Target = m.UUID, t
	return nil
}

func (u *powerUnit) Steps() []engine.Step {
	return []engine.Step{
		{Name: "accept " + string(u.Target), Run: u.accept},
		{Name: string(u.Target), Run: u.act},
	}
}

func (u *powerUnit) accept(ctx context.Context, s *engine.StepCtx) error {
	m, err := s.Cfg().MustMachine(u.UUID)
	if err != nil {
		return err
	}
	mine := Reservation(s.JobID())
	if m.Reservation == mine {
		return nil
	}
	if err := checkFree(m); err != nil {
		return err
	}
	m.Reservation, u.Reserved = mine, mine
	m.TargetPowerState = string(u.Target.EndsIn())
	m.LastError = ""
	s.Tx().PutMachine(m)
	return nil
}

func (u *powerUnit) act(ctx context.Context, s *engine.StepCtx) error {
	m, err := s.Cfg().MustMachine(u.UUID)
	if err != nil {
		return err
	}
	if m.Reservation != u.Reserved {
		return errTakenOver(m)
	}
	if err := u.d.setPower(ctx, s, m, u.Target, s.Op().Int("timeout")); err != nil {
		return err
	}
	m.PowerState = string(u.Target.EndsIn())
	m.TargetPowerState = ""
	m.Reservation = ""
	s.Tx().PutMachine(m)
	return nil
}

func (u *powerUnit) Result() any { return nil }

// Revert records why the power action failed and frees the machine.
func (u *powerUnit) Revert(ctx context.Context, s *engine.StepCtx, failed error) {
	m, ok := s.Cfg().Machine(u.UUID)
	if !ok || u.Reserved == "" || m.Reservation != u.Reserved {
		return
	}
	m.TargetPowerState = ""
	m.Reservation = ""
	m.LastError = failed.Error()
	s.Tx().PutMachine(m)
}

// setPower acts through m's power interface. The fake one keeps the state
// in the machine only, as Ironic's.
func (d *Deps) setPower(ctx context.Context, s *engine.StepCtx, m *config.Machine, target states.Power, timeout int) error {
	if m.Interfaces.Power == "fake" {
		return nil
	}
	n, err := d.conductor(m)
	if err != nil {
		return err
	}
	args := nodeapi.MachinePowerArgs{MachineBMC: bmcOf(m), Action: string(target), Timeout: float64(timeout)}
	var r nodeapi.MachinePowerReply
	if err := s.RPC(ctx, n, nodeapi.MachinePower, args, &r); err != nil {
		return fmt.Errorf("%s: %w", target, err)
	}
	return nil
}
