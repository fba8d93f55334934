package baremetal

import (
	"context"
	"slices"

	"github.com/google/uuid"

	"github.com/corral/corral/internal/baremetal/states"
	"github.com/corral/corral/internal/config"
	"github.com/corral/corral/internal/ecode"
	"github.com/corral/corral/internal/engine"
	"github.com/corral/corral/internal/locking"
	"github.com/corral/corral/internal/opcodes"
)

// createUnit enrolls a machine: it starts in enroll, as Ironic's nodes do
// from API version 1.11.
type createUnit struct {
	d       *Deps
	Machine *config.Machine `json:"machine"`
}

func (u *createUnit) Locks(op *opcodes.Op) []locking.Request {
	return []locking.Request{{Level: locking.LevelCluster, Mode: locking.Shared, Names: []string{locking.BGL}}}
}

func (u *createUnit) Prereq(ctx context.Context, op *opcodes.Op) error {
	m := &config.Machine{Driver: op.Str("driver"), ProvisionState: string(states.Enroll)}
	switch st := op.Str("provision_state"); st {
	case "", string(states.Enroll):
	case string(states.Available):
		m.ProvisionState = st
	default:
		return ecode.Errorf(ecode.Inval, "A new node starts in enroll or available, not %q.", st)
	}
	if id := stringParam(op, "uuid"); id != nil {
		if _, err := uuid.Parse(*id); err != nil {
			return ecode.Errorf(ecode.Inval, "Expected a UUID but received %s.", *id)
		}
		if _, ok := u.d.Cfg.Machine(*id); ok {
			return ecode.Errorf(ecode.Exists, "A node with UUID %s already exists.", *id)
		}
		m.UUID = *id
	}
	changes := map[string]any{}
	for k, v := range op.Params {
		if _, ok := machineFields[k]; ok && v != nil {
			changes[k] = v
		}
	}
	if err := applyMachineChanges(m, changes); err != nil {
		return err
	}
	if err := checkMachineName(m.Name); err != nil {
		return err
	}
	if err := u.d.Cfg.CheckMachineNameFree(m.Name, ""); err != nil {
		return err
	}
	if err := fillInterfaces(m); err != nil {
		return err
	}
	u.Machine = m
	return nil
}

func (u *createUnit) Steps() []engine.Step {
	return []engine.Step{{Name: "add the machine", Run: func(ctx context.Context, s *engine.StepCtx) error {
		if u.Machine.UUID == "" {
			u.Machine.UUID = config.NewUUID() // kept in the plan: a resumed step reuses it
		}
		m := u.Machine.Clone()
		stampProvision(u.d, m)
		s.Tx().PutMachine(m)
		return nil
	}}}
}

func (u *createUnit) Result() any { return u.Machine.UUID }

// modifyUnit changes a machine's fields (the API's PATCH).
type modifyUnit struct {
	d    *Deps
	UUID string `json:"uuid"`
}

func (u *modifyUnit) Locks(op *opcodes.Op) []locking.Request {
	return machineLocks(u.d.Cfg, op.Str("machine"))
}

func (u *modifyUnit) Prereq(ctx context.Context, op *opcodes.Op) error {
	m, err := u.d.Cfg.MustMachine(op.Str("machine"))
	if err != nil {
		return err
	}
	u.UUID = m.UUID
	if want := int64(op.Int("serial")); want != 0 && want != m.Serial {
		return ecode.Errorf(ecode.State, "Node %s was changed by another request; retry.", m.UUID)
	}
	return u.apply(m, op.Dict("changes"))
}

// apply checks and applies the changes to m.
func (u *modifyUnit) apply(m *config.Machine, changes map[string]any) error {
	if len(changes) == 0 {
		return nil
	}
	if m.Reservation != "" && !onlyFreeFields(changes) {
		return lockedError(m)
	}
	oldDriver := m.Driver
	if err := applyMachineChanges(m, changes); err != nil {
		return err
	}
	if m.Driver != oldDriver {
		// A new hardware type: interfaces it does not enable fall back to
		// its defaults, as Ironic resets them.
		h, err := LookupHardwareType(m.Driver)
		if err != nil {
			return err
		}
		for _, iface := range Interfaces {
			if f := interfaceField(&m.Interfaces, iface); !slices.Contains(h.Enabled[iface], *f) {
				*f = ""
			}
		}
	}
	if err := checkMachineName(m.Name); err != nil {
		return err
	}
	if err := u.d.Cfg.CheckMachineNameFree(m.Name, m.UUID); err != nil {
		return err
	}
	return fillInterfaces(m)
}

func (u *modifyUnit) Steps() []engine.Step {
	return []engine.Step{{Name: "change the machine", Run: func(ctx context.Context, s *engine.StepCtx) error {
		m, err := s.Cfg().MustMachine(u.UUID)
		if err != nil {
			return err
		}
		if err := u.apply(m, s.Op().Dict("changes")); err != nil {
			return err
		}
		s.Tx().PutMachine(m)
		return nil
	}}}
}

func (u *modifyUnit) Result() any { return u.UUID }

// removeUnit deletes a machine and its ports, in the states Ironic allows
// (or any state in maintenance).
type removeUnit struct {
	d    *Deps
	UUID string `json:"uuid"`
}

func (u *removeUnit) Locks(op *opcodes.Op) []locking.Request {
	return machineLocks(u.d.Cfg, op.Str("machine"))
}

func (u *removeUnit) Prereq(ctx context.Context, op *opcodes.Op) error {
	m, err := u.d.Cfg.MustMachine(op.Str("machine"))
	if err != nil {
		return err
	}
	if err := checkFree(m); err != nil {
		return err
	}
	if err := states.CheckDelete(states.State(m.ProvisionState), m.Maintenance); err != nil {
		if de, ok := err.(*states.DeleteError); ok {
			return de.ECode(m.UUID)
		}
		return err
	}
	u.UUID = m.UUID
	return nil
}

func (u *removeUnit) Steps() []engine.Step {
	return []engine.Step{{Name: "remove the machine and its ports", Run: func(ctx context.Context, s *engine.StepCtx) error {
		m, ok := s.Cfg().Machine(u.UUID)
		if !ok {
			return nil // a resumed step that committed already
		}
		tx := s.Tx()
		for _, p := range s.Cfg().Ports(m.UUID) {
			tx.DeletePort(p)
		}
		tx.DeleteMachine(m)
		return nil
	}}}
}

func (u *removeUnit) Result() any { return nil }

// maintenanceUnit sets or clears maintenance. It needs no reservation:
// Ironic lets an operator flag a machine whatever it is waiting for.
type maintenanceUnit struct {
	d    *Deps
	UUID string `json:"uuid"`
}

func (u *maintenanceUnit) Locks(op *opcodes.Op) []locking.Request {
	return machineLocks(u.d.Cfg, op.Str("machine"))
}

func (u *maintenanceUnit) Prereq(ctx context.Context, op *opcodes.Op) error {
	m, err := u.d.Cfg.MustMachine(op.Str("machine"))
	if err != nil {
		return err
	}
	u.UUID = m.UUID
	return nil
}

func (u *maintenanceUnit) Steps() []engine.Step {
	return []engine.Step{{Name: "set maintenance", Run: func(ctx context.Context, s *engine.StepCtx) error {
		m, err := s.Cfg().MustMachine(u.UUID)
		if err != nil {
			return err
		}
		op := s.Op()
		m.Maintenance = op.Bool("maintenance")
		m.MaintenanceReason = ""
		m.Fault = ""
		if m.Maintenance {
			m.MaintenanceReason = op.Str("maintenance_reason")
		}
		s.Tx().PutMachine(m)
		return nil
	}}}
}

func (u *maintenanceUnit) Result() any { return nil }
