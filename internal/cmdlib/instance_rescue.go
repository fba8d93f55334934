package cmdlib

import (
	"context"
	"time"

	"github.com/corral/corral/internal/config"
	"github.com/corral/corral/internal/cryptpw"
	"github.com/corral/corral/internal/ecode"
	"github.com/corral/corral/internal/engine"
	"github.com/corral/corral/internal/hypervisor"
	"github.com/corral/corral/internal/locking"
	"github.com/corral/corral/internal/nodeapi"
	"github.com/corral/corral/internal/opcodes"
)

// A VM instance's rescue (Corral only): the instance is stopped and started
// on the bare-metal agent's ramdisk (kernel and initrd from its node), with
// its own disks and NICs, where the user rescue logs in on the console or
// with SSH; unrescue starts it on its own system again. Its status says
// where it is: State rescuing, rescue or unrescuing, and condition Rescue
// (Unknown while it changes, True in rescue, gone after unrescue). The
// instance-restart reconciler leaves an instance with that condition alone
// (InRescue): restarting it would quietly end the rescue.
const (
	CondRescue = "Rescue"

	reasonRescuing   = "Rescuing"
	reasonRescued    = "Rescued"
	reasonUnrescuing = "Unrescuing"

	StateRescuing   = "rescuing"
	StateRescue     = "rescue"
	StateUnrescuing = "unrescuing"

	// rescueKernelArgs makes the agent rescue without an API; the kvm
	// driver adds console=ttyS0 with the serial console.
	rescueKernelArgs = "corral.rescue=offline"
)

// InRescue reports whether an instance's status says it is rescued or
// on its way in or out of rescue.
func InRescue(s *config.Status) bool {
	_, ok := s.Condition(CondRescue)
	return ok
}

func (p *Processor) rescueUnits() []engine.Op {
	return []engine.Op{
		p.unit("OP_INSTANCE_RESCUE", func() LU { return &instanceRescueLU{} }),
		p.unit("OP_INSTANCE_UNRESCUE", func() LU { return &instanceUnrescueLU{} }),
	}
}

// rescueStatus sets the rescue's state and condition.
func rescueStatus(state, cond, reason, msg string) func(*config.Status, time.Time) {
	return func(s *config.Status, now time.Time) {
		s.State, s.Target, s.LastError = state, StateRescue, ""
		s.SetCondition(config.Condition{Type: CondRescue, Status: cond, Reason: reason, Message: msg}, now)
	}
}

// putInstanceStatus writes inst's status changed by change in the step's
// transaction, when it changes.
func (s *StepCtx) putInstanceStatus(inst *config.Instance, change func(*config.Status, time.Time)) {
	if next, changed := config.ChangeStatus(s.Cfg().InstanceStatus(inst.UUID), change, time.Now()); changed {
		s.Tx().PutInstanceStatus(inst.UUID, next)
	}
}

// stopForRescue stops the instance if it runs.
func (s *StepCtx) stopForRescue(ctx context.Context, inst *config.Instance, node *config.Node) error {
	running, err := s.p.running(ctx, inst, node)
	if err != nil || !running {
		return err
	}
	args := nodeapi.ShutdownArgs{Instance: s.p.Spec(inst), Timeout: s.Op().Int("shutdown_timeout")}
	return s.RPC(ctx, node, nodeapi.InstanceShutdown, args, nil)
}

// refuseInRescue refuses what would start or boot an instance that is in
// rescue, or on its way in or out: a start or reboot would run its own
// system and quietly end the rescue (the watcher's restart included), a
// reinstall would write the disks the rescue user is working on, new
// hypervisor parameters would take effect at a start unrescue does, and
// an export would start it again on its own system. Shutting it down is
// allowed: unrescue then starts its own system.
func refuseInRescue(p *Processor, inst *config.Instance, what string) error {
	st := p.Cfg.InstanceStatus(inst.UUID)
	if !InRescue(st) {
		return nil
	}
	return ecode.Errorf(ecode.State, "Instance '%s' is in rescue (state %s), cannot %s: unrescue it first", inst.Name, st.State, what)
}

func checkRescuable(inst *config.Instance, node *config.Node) error {
	if inst.Hypervisor != hypervisor.KVM && inst.Hypervisor != hypervisor.Fake {
		return ecode.Errorf(ecode.Inval, "Instance '%s' runs on hypervisor %s; only kvm instances can be rescued", inst.Name, inst.Hypervisor)
	}
	if inst.AdminState == config.AdminOffline {
		return ecode.Errorf(ecode.State, "Instance '%s' is marked offline", inst.Name)
	}
	return checkNodeOnline(node)
}

// ---- rescue

type instanceRescueLU struct{ instanceBase }

func (lu *instanceRescueLU) Locks(p *Processor, op *opcodes.Op) []locking.Request {
	return lu.locks(p, op, locking.Exclusive)
}

func (lu *instanceRescueLU) Prereq(ctx context.Context, p *Processor, op *opcodes.Op) error {
	inst, node, err := lu.load(p, op)
	if err != nil {
		return err
	}
	if err := checkRescuable(inst, node); err != nil {
		return err
	}
	if st := p.Cfg.InstanceStatus(inst.UUID); InRescue(st) && st.State != StateRescuing {
		return ecode.Errorf(ecode.State, "Instance '%s' is in state %s; unrescue it first", inst.Name, st.State)
	}
	if _, ok := cryptpw.AlgorithmOf(op.Str("rescue_password_hash")); !ok {
		return ecode.Errorf(ecode.Inval, "rescue_password_hash must be a SHA-256 ($5$) or SHA-512 ($6$) crypt string")
	}
	return nil
}

func (lu *instanceRescueLU) Steps() []Step {
	return []Step{
		// The status first: the reconciler must leave the instance alone
		// from the moment it is stopped.
		{"mark-rescuing", func(ctx context.Context, s *StepCtx) error {
			inst, _, err := lu.load(s.p, s.Op())
			if err != nil {
				return err
			}
			if inst.AdminState != config.AdminUp {
				inst.AdminState = config.AdminUp
				s.Tx().PutInstance(inst)
			}
			s.putInstanceStatus(inst, rescueStatus(StateRescuing, config.ConditionUnknown, reasonRescuing, "stopping the instance to start the rescue ramdisk"))
			return nil
		}},
		{"stop", func(ctx context.Context, s *StepCtx) error {
			inst, node, err := lu.load(s.p, s.Op())
			if err != nil {
				return err
			}
			return s.stopForRescue(ctx, inst, node)
		}},
		// Prepare and start in one step: a repeat writes the initrd again
		// and finds the instance running.
		{"start-rescue", func(ctx context.Context, s *StepCtx) error {
			inst, node, err := lu.load(s.p, s.Op())
			if err != nil {
				return err
			}
			var files nodeapi.InstanceRescuePrepareReply
			args := nodeapi.InstanceRescuePrepareArgs{InstanceUUID: inst.UUID,
				RescuePasswordHash: s.Op().Str("rescue_password_hash"), SSHPublicKeys: s.Op().Strings("ssh_public_keys")}
			if err := s.RPC(ctx, node, nodeapi.InstanceRescuePrepare, args, &files); err != nil {
				return err
			}
			spec := s.p.Spec(inst)
			// This start only: the instance's own parameters stay.
			spec.HVParams[hypervisor.ParamKernelPath] = files.KernelPath
			spec.HVParams[hypervisor.ParamInitrdPath] = files.InitrdPath
			spec.HVParams[hypervisor.ParamKernelArgs] = rescueKernelArgs
			spec.HVParams[hypervisor.ParamRootPath] = ""
			return s.RPC(ctx, node, nodeapi.InstanceStart, nodeapi.InstanceArgs{Instance: spec}, nil)
		}},
		{"mark-rescue", func(ctx context.Context, s *StepCtx) error {
			inst, _, err := lu.load(s.p, s.Op())
			if err != nil {
				return err
			}
			s.putInstanceStatus(inst, rescueStatus(StateRescue, config.ConditionTrue, reasonRescued,
				"runs the rescue ramdisk: log in as rescue on the console or with ssh"))
			return nil
		}},
	}
}

func (lu *instanceRescueLU) Result() any { return nil }

// ---- unrescue

type instanceUnrescueLU struct{ instanceBase }

func (lu *instanceUnrescueLU) Locks(p *Processor, op *opcodes.Op) []locking.Request {
	return lu.locks(p, op, locking.Exclusive)
}

func (lu *instanceUnrescueLU) Prereq(ctx context.Context, p *Processor, op *opcodes.Op) error {
	inst, node, err := lu.load(p, op)
	if err != nil {
		return err
	}
	if err := checkRescuable(inst, node); err != nil {
		return err
	}
	if !InRescue(p.Cfg.InstanceStatus(inst.UUID)) {
		return ecode.Errorf(ecode.State, "Instance '%s' is not in rescue", inst.Name)
	}
	return nil
}

func (lu *instanceUnrescueLU) Steps() []Step {
	return []Step{
		{"mark-unrescuing", func(ctx context.Context, s *StepCtx) error {
			inst, _, err := lu.load(s.p, s.Op())
			if err != nil {
				return err
			}
			s.putInstanceStatus(inst, func(st *config.Status, now time.Time) {
				rescueStatus(StateUnrescuing, config.ConditionUnknown, reasonUnrescuing, "stopping the rescue ramdisk to start the instance's own system")(st, now)
				st.Target = config.AdminUp
			})
			return nil
		}},
		{"stop", func(ctx context.Context, s *StepCtx) error {
			inst, node, err := lu.load(s.p, s.Op())
			if err != nil {
				return err
			}
			if err := s.stopForRescue(ctx, inst, node); err != nil {
				return err
			}
			return s.RPC(ctx, node, nodeapi.InstanceRescueCleanup, nodeapi.InstanceRescueCleanupArgs{InstanceUUID: inst.UUID}, nil)
		}},
		{"start", func(ctx context.Context, s *StepCtx) error {
			inst, node, err := lu.load(s.p, s.Op())
			if err != nil {
				return err
			}
			if inst.AdminState != config.AdminUp {
				inst.AdminState = config.AdminUp
				s.Tx().PutInstance(inst)
			}
			return s.RPC(ctx, node, nodeapi.InstanceStart, nodeapi.InstanceArgs{Instance: s.p.Spec(inst)}, nil)
		}},
		// The rescue is over: the condition goes, and the status with it
		// when nothing else is in it.
		{"mark-unrescued", func(ctx context.Context, s *StepCtx) error {
			inst, _, err := lu.load(s.p, s.Op())
			if err != nil {
				return err
			}
			s.putInstanceStatus(inst, func(st *config.Status, _ time.Time) {
				st.RemoveCondition(CondRescue)
				st.State, st.Target, st.LastError = "", "", ""
				if len(st.Conditions) > 0 {
					st.State, st.Target = "running", config.AdminUp
				}
			})
			return nil
		}},
	}
}

func (lu *instanceUnrescueLU) Result() any { return nil }
