package baremetal

import (
	"context"
	"net"
	"strings"

	"github.com/google/uuid"

	"github.com/corral/corral/internal/config"
	"github.com/corral/corral/internal/ecode"
	"github.com/corral/corral/internal/engine"
	"github.com/corral/corral/internal/locking"
	"github.com/corral/corral/internal/opcodes"
)

// portCreateUnit adds a port to a machine.
type portCreateUnit struct {
	d    *Deps
	Port *config.MachinePort `json:"port"`
}

func (u *portCreateUnit) Locks(op *opcodes.Op) []locking.Request {
	return machineLocks(u.d.Cfg, op.Str("machine"))
}

func (u *portCreateUnit) Prereq(ctx context.Context, op *opcodes.Op) error {
	m, err := u.d.Cfg.MustMachine(op.Str("machine"))
	if err != nil {
		return err
	}
	p := &config.MachinePort{Machine: m.UUID, PXEEnabled: op.Bool("pxe_enabled")}
	if id := stringParam(op, "uuid"); id != nil {
		if _, err := uuid.Parse(*id); err != nil {
			return ecode.Errorf(ecode.Inval, "Expected a UUID but received %s.", *id)
		}
		if _, ok := u.d.Cfg.Port(*id); ok {
			return ecode.Errorf(ecode.Exists, "A port with UUID %s already exists.", *id)
		}
		p.UUID = *id
	}
	changes := map[string]any{"address": op.Str("address")}
	for _, k := range []string{"physical_network", "local_link_connection", "extra"} {
		if v := op.Params[k]; v != nil {
			changes[k] = v
		}
	}
	if err := u.d.applyPort(p, changes); err != nil {
		return err
	}
	u.Port = p
	return nil
}

func (u *portCreateUnit) Steps() []engine.Step {
	return []engine.Step{{Name: "add the port", Run: func(ctx context.Context, s *engine.StepCtx) error {
		if u.Port.UUID == "" {
			u.Port.UUID = config.NewUUID()
		}
		s.Tx().PutPort(u.Port.Clone())
		return nil
	}}}
}

func (u *portCreateUnit) Result() any { return u.Port.UUID }

// portModifyUnit changes a port.
type portModifyUnit struct {
	d    *Deps
	UUID string `json:"uuid"`
}

func (u *portModifyUnit) Locks(op *opcodes.Op) []locking.Request {
	return portLocks(u.d, op.Str("port"), op.Dict("changes"))
}

// portLocks locks the port's machine, and the machine it moves to.
func portLocks(d *Deps, port string, changes map[string]any) []locking.Request {
	reqs := []locking.Request{{Level: locking.LevelCluster, Mode: locking.Shared, Names: []string{locking.BGL}}}
	names := []string{}
	if p, ok := d.Cfg.Port(port); ok {
		names = append(names, p.Machine)
	}
	if to, ok := changes["node_uuid"].(string); ok {
		if m, ok := d.Cfg.Machine(to); ok && (len(names) == 0 || m.UUID != names[0]) {
			names = append(names, m.UUID)
		}
	}
	if len(names) > 0 {
		reqs = append(reqs, locking.Request{Level: locking.LevelMachine, Mode: locking.Exclusive, Names: names})
	}
	return reqs
}

func (u *portModifyUnit) Prereq(ctx context.Context, op *opcodes.Op) error {
	p, err := u.d.mustPort(op.Str("port"))
	if err != nil {
		return err
	}
	u.UUID = p.UUID
	return u.d.applyPort(p, op.Dict("changes"))
}

func (u *portModifyUnit) Steps() []engine.Step {
	return []engine.Step{{Name: "change the port", Run: func(ctx context.Context, s *engine.StepCtx) error {
		p, err := u.d.mustPort(u.UUID)
		if err != nil {
			return err
		}
		if err := u.d.applyPort(p, s.Op().Dict("changes")); err != nil {
			return err
		}
		s.Tx().PutPort(p)
		return nil
	}}}
}

func (u *portModifyUnit) Result() any { return u.UUID }

// portRemoveUnit deletes a port.
type portRemoveUnit struct {
	d    *Deps
	UUID string `json:"uuid"`
}

func (u *portRemoveUnit) Locks(op *opcodes.Op) []locking.Request {
	return portLocks(u.d, op.Str("port"), nil)
}

func (u *portRemoveUnit) Prereq(ctx context.Context, op *opcodes.Op) error {
	p, err := u.d.mustPort(op.Str("port"))
	if err != nil {
		return err
	}
	if m, ok := u.d.Cfg.Machine(p.Machine); ok && m.Reservation != "" {
		return lockedError(m)
	}
	u.UUID = p.UUID
	return nil
}

func (u *portRemoveUnit) Steps() []engine.Step {
	return []engine.Step{{Name: "remove the port", Run: func(ctx context.Context, s *engine.StepCtx) error {
		if p, ok := s.Cfg().Port(u.UUID); ok {
			s.Tx().DeletePort(p)
		}
		return nil
	}}}
}

func (u *portRemoveUnit) Result() any { return nil }

func (d *Deps) mustPort(id string) (*config.MachinePort, error) {
	p, ok := d.Cfg.Port(id)
	if !ok {
		return nil, ecode.Errorf(ecode.NoEnt, "Port %s could not be found.", id)
	}
	return p, nil
}

// applyPort checks and applies changes to p: a valid MAC no other port
// has, and an existing machine.
func (d *Deps) applyPort(p *config.MachinePort, changes map[string]any) error {
	for k, v := range changes {
		var err error
		switch k {
		case "address":
			err = setPortAddress(d, p, v)
		case "node_uuid":
			var m *config.Machine
			s, _ := v.(string)
			if m, err = d.Cfg.MustMachine(s); err == nil {
				p.Machine = m.UUID
			}
		case "physical_network":
			s, ok := v.(string)
			if v != nil && !ok {
				err = ecode.Errorf(ecode.Inval, "physical_network must be a string or null")
			}
			p.PhysicalNetwork = s
		case "pxe_enabled":
			b, ok := v.(bool)
			if !ok {
				err = ecode.Errorf(ecode.Inval, "pxe_enabled must be a boolean")
			}
			p.PXEEnabled = b
		case "local_link_connection", "extra":
			d, ok := v.(map[string]any)
			if v != nil && !ok {
				err = ecode.Errorf(ecode.Inval, "%s must be a dictionary or null", k)
			}
			if k == "extra" {
				p.Extra = config.CloneDict(d)
			} else {
				p.LocalLinkConnection = config.CloneDict(d)
			}
		default:
			err = ecode.Errorf(ecode.Inval, "Field %s cannot be changed.", k)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func setPortAddress(d *Deps, p *config.MachinePort, v any) error {
	s, _ := v.(string)
	hw, err := net.ParseMAC(s)
	if err != nil || len(hw) != 6 {
		return ecode.Errorf(ecode.Inval, "Expected a MAC address but received %v.", v)
	}
	mac := strings.ToLower(hw.String())
	if other, ok := d.Cfg.PortByMAC(mac); ok && other.UUID != p.UUID {
		return ecode.Errorf(ecode.Exists, "A port with MAC address %s already exists.", mac)
	}
	p.Address = mac
	return nil
}
