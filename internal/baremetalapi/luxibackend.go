package baremetalapi

import (
	"context"
	"encoding/json"
	"time"

	"github.com/corral/corral/internal/apifront"
	"github.com/corral/corral/internal/baremetal/driver"
	"github.com/corral/corral/internal/config"
	"github.com/corral/corral/internal/ecode"
	"github.com/corral/corral/internal/luxi"
	"github.com/corral/corral/internal/machinewire"
)

func init() { NewLuxiBackend = func(p *apifront.LuxiPool) Backend { return &luxiBackend{pool: p} } }

// luxiBackend asks corrald: queries through the machinewire methods, every
// change as an OP_MACHINE_* job through MachineSubmit, which answers once
// the action is accepted or with the op's error.
type luxiBackend struct{ pool *apifront.LuxiPool }

func (b *luxiBackend) call(ctx context.Context, method string, args []any, out any) error {
	return b.pool.Do(ctx, func(c *luxi.Client) error { return c.Call(ctx, method, args, out) })
}

// submit runs one op and waits for its acceptance.
func (b *luxiBackend) submit(ctx context.Context, op map[string]any) error {
	var r machinewire.SubmitReply
	return b.call(ctx, machinewire.MethodSubmit, []any{op}, &r)
}

func (b *luxiBackend) machines(ctx context.Context, names []string) ([]*config.Machine, error) {
	var recs []machinewire.Record
	if err := b.call(ctx, machinewire.MethodQuery, []any{names}, &recs); err != nil {
		return nil, err
	}
	out := make([]*config.Machine, 0, len(recs))
	for _, r := range recs {
		out = append(out, r.Machine)
	}
	return out, nil
}

func (b *luxiBackend) ListMachines(ctx context.Context, f MachineFilter) ([]*config.Machine, error) {
	all, err := b.machines(ctx, nil)
	if err != nil {
		return nil, err
	}
	out := all[:0]
	for _, m := range all {
		if f.Match(m) {
			out = append(out, m)
		}
	}
	return out, nil
}

func (b *luxiBackend) GetMachine(ctx context.Context, ident string) (*config.Machine, error) {
	ms, err := b.machines(ctx, []string{ident})
	if err != nil {
		return nil, err
	}
	if len(ms) != 1 {
		return nil, ecode.Errorf(ecode.NoEnt, "Node %s could not be found.", ident)
	}
	return ms[0], nil
}

func (b *luxiBackend) CreateMachine(ctx context.Context, m *config.Machine) (*config.Machine, error) {
	op := map[string]any{"OP_ID": "OP_MACHINE_CREATE", "driver": m.Driver, "uuid": m.UUID,
		"provision_state": m.ProvisionState}
	var fields map[string]any
	if err := roundTrip(m, &fields); err != nil {
		return nil, err
	}
	for _, k := range machineCreateParams {
		if v, ok := fields[k]; ok && v != nil {
			op[k] = v
		}
	}
	var ifaces map[string]any
	if err := roundTrip(m.Interfaces, &ifaces); err != nil {
		return nil, err
	}
	for k, v := range ifaces {
		op[k] = v
	}
	if m.AutomatedClean != nil {
		op["automated_clean"] = *m.AutomatedClean
	}
	if err := b.submit(ctx, op); err != nil {
		return nil, err
	}
	return b.GetMachine(ctx, m.UUID)
}

// machineCreateParams are the OP_MACHINE_CREATE parameters taken from the
// stored machine's JSON by the same names.
var machineCreateParams = []string{"name", "description", "driver_info", "properties", "instance_info",
	"extra", "instance_uuid", "conductor_group", "resource_class", "owner", "lessee"}

func (b *luxiBackend) UpdateMachine(ctx context.Context, ident string, u MachineUpdate) (*config.Machine, error) {
	op := map[string]any{"OP_ID": "OP_MACHINE_MODIFY", "machine": ident, "changes": u.Fields, "serial": u.Serial}
	if err := b.submit(ctx, op); err != nil {
		return nil, err
	}
	return b.GetMachine(ctx, ident)
}

func (b *luxiBackend) DeleteMachine(ctx context.Context, ident string) error {
	return b.submit(ctx, map[string]any{"OP_ID": "OP_MACHINE_REMOVE", "machine": ident})
}

func (b *luxiBackend) SetProvisionState(ctx context.Context, ident, target string, a ProvisionArgs) error {
	op := map[string]any{"OP_ID": "OP_MACHINE_PROVISION", "machine": ident, "target": target,
		"rescue_password_hash": a.RescuePasswordHash, "disable_ramdisk": a.DisableRamdisk}
	if a.ConfigDrive != nil {
		op["configdrive"] = a.ConfigDrive
	}
	if a.CleanSteps != nil {
		op["clean_steps"] = a.CleanSteps
	}
	if a.DeploySteps != nil {
		op["deploy_steps"] = a.DeploySteps
	}
	if len(a.SSHPublicKeys) > 0 {
		op["ssh_public_keys"] = a.SSHPublicKeys
	}
	return b.submit(ctx, op)
}

func (b *luxiBackend) SetPowerState(ctx context.Context, ident, target string, timeout time.Duration) error {
	return b.submit(ctx, map[string]any{"OP_ID": "OP_MACHINE_POWER", "machine": ident, "target": target,
		"timeout": int(timeout / time.Second)})
}

func (b *luxiBackend) SetMaintenance(ctx context.Context, ident string, on bool, reason string) error {
	return b.submit(ctx, map[string]any{"OP_ID": "OP_MACHINE_MAINTENANCE", "machine": ident,
		"maintenance": on, "maintenance_reason": reason})
}

// Validate checks what can be checked without touching the hardware: the
// driver_info the power and management drivers need, and that an
// interface is not a no-op one.
func (b *luxiBackend) Validate(ctx context.Context, ident string) (map[string]InterfaceValidation, error) {
	m, err := b.GetMachine(ctx, ident)
	if err != nil {
		return nil, err
	}
	return ValidateMachine(m)
}

func (b *luxiBackend) ListPorts(ctx context.Context, f PortFilter) ([]*config.MachinePort, error) {
	var out []*config.MachinePort
	err := b.call(ctx, machinewire.MethodPorts, []any{machinewire.PortFilter{Machine: f.Machine, Address: f.Address}}, &out)
	return out, err
}

func (b *luxiBackend) GetPort(ctx context.Context, uuid string) (*config.MachinePort, error) {
	var out []*config.MachinePort
	if err := b.call(ctx, machinewire.MethodPorts, []any{machinewire.PortFilter{UUIDs: []string{uuid}}}, &out); err != nil {
		return nil, err
	}
	if len(out) != 1 {
		return nil, ecode.Errorf(ecode.NoEnt, "Port %s could not be found.", uuid)
	}
	return out[0], nil
}

func (b *luxiBackend) CreatePort(ctx context.Context, p *config.MachinePort) (*config.MachinePort, error) {
	op := map[string]any{"OP_ID": "OP_MACHINE_PORT_CREATE", "machine": p.Machine, "address": p.Address,
		"uuid": p.UUID, "pxe_enabled": p.PXEEnabled}
	if p.PhysicalNetwork != "" {
		op["physical_network"] = p.PhysicalNetwork
	}
	if p.LocalLinkConnection != nil {
		op["local_link_connection"] = p.LocalLinkConnection
	}
	if p.Extra != nil {
		op["extra"] = p.Extra
	}
	if err := b.submit(ctx, op); err != nil {
		return nil, err
	}
	return b.GetPort(ctx, p.UUID)
}

func (b *luxiBackend) UpdatePort(ctx context.Context, uuid string, u PortUpdate) (*config.MachinePort, error) {
	if err := b.submit(ctx, map[string]any{"OP_ID": "OP_MACHINE_PORT_MODIFY", "port": uuid, "changes": u.Fields}); err != nil {
		return nil, err
	}
	return b.GetPort(ctx, uuid)
}

func (b *luxiBackend) DeletePort(ctx context.Context, uuid string) error {
	return b.submit(ctx, map[string]any{"OP_ID": "OP_MACHINE_PORT_REMOVE", "port": uuid})
}

func (b *luxiBackend) Drivers(ctx context.Context) ([]Driver, error) {
	var hts []machinewire.HardwareType
	if err := b.call(ctx, machinewire.MethodDrivers, nil, &hts); err != nil {
		return nil, err
	}
	out := make([]Driver, 0, len(hts))
	for _, h := range hts {
		d := Driver{Name: h.Name, Hosts: h.Hosts, Enabled: h.Enabled, Default: map[string]string{}, Properties: map[string]string{}}
		for iface, impls := range h.Enabled {
			if len(impls) > 0 {
				d.Default[iface] = impls[0]
			}
		}
		props, _ := driver.Properties(h.Name)
		for _, p := range props {
			d.Properties[p.Name] = p.Description
		}
		out = append(out, d)
	}
	return out, nil
}

func (b *luxiBackend) AgentLookup(ctx context.Context, addresses []string, machineUUID string) (*config.Machine, string, error) {
	var r machinewire.LookupReply
	if err := b.call(ctx, machinewire.MethodLookup, []any{machinewire.LookupArgs{Addresses: addresses, UUID: machineUUID}}, &r); err != nil {
		return nil, "", err
	}
	token := r.Token
	if token == "******" {
		token = ""
	}
	return r.Machine, token, nil
}

func (b *luxiBackend) AgentHeartbeat(ctx context.Context, ident string, hb Heartbeat) error {
	return b.call(ctx, machinewire.MethodHeartbeat, []any{machinewire.HeartbeatArgs{Machine: ident,
		CallbackURL: hb.CallbackURL, Token: hb.AgentToken, AgentVersion: hb.AgentVersion,
		AgentStatus: hb.AgentStatus, StatusMessage: hb.AgentStatusMessage, VerifyCA: hb.AgentVerifyCA}}, nil)
}

func roundTrip(v any, out any) error {
	raw, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return json.Unmarshal(raw, out)
}
