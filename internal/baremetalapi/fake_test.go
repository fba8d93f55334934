package baremetalapi

import (
	"context"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/corral/corral/internal/config"
	"github.com/corral/corral/internal/ecode"
)

// fakeBackend is an in-memory Backend whose provision actions end at once
// (as Ironic's fake-hardware with no delays), recording what it was given.
type fakeBackend struct {
	mu       sync.Mutex
	machines map[string]*config.Machine // by uuid
	ports    map[string]*config.MachinePort
	now      float64
	tokens   map[string]string // uuid → agent token handed out

	lastArgs   ProvisionArgs
	lastTarget string
	lastUpdate MachineUpdate
	lastPower  string
	lastHB     Heartbeat
}

func newFakeBackend() *fakeBackend {
	return &fakeBackend{machines: map[string]*config.Machine{}, ports: map[string]*config.MachinePort{},
		now: 1796000000, tokens: map[string]string{}}
}

func (f *fakeBackend) tick() float64 { f.now += 1.5; return f.now }

func (f *fakeBackend) find(ident string) (*config.Machine, error) {
	if m, ok := f.machines[ident]; ok {
		return m, nil
	}
	for _, m := range f.machines {
		if m.Name == ident {
			return m, nil
		}
	}
	return nil, ecode.Errorf(ecode.NoEnt, "machine %s: no such machine", ident)
}

func clone(m *config.Machine) *config.Machine {
	c := *m
	return &c
}

func (f *fakeBackend) ListMachines(_ context.Context, flt MachineFilter) ([]*config.Machine, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []*config.Machine
	for _, m := range f.machines {
		if flt.Match(m) {
			out = append(out, clone(m))
		}
	}
	return out, nil
}

func (f *fakeBackend) GetMachine(_ context.Context, ident string) (*config.Machine, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	m, err := f.find(ident)
	if err != nil {
		return nil, err
	}
	return clone(m), nil
}

func (f *fakeBackend) CreateMachine(_ context.Context, m *config.Machine) (*config.Machine, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.machines[m.UUID]; ok {
		return nil, ecode.Errorf(ecode.Exists, "A node with UUID %s already exists.", m.UUID)
	}
	if m.Name != "" {
		if _, err := f.find(m.Name); err == nil {
			return nil, ecode.Errorf(ecode.Exists, "A node with name %s already exists.", m.Name)
		}
	}
	m = clone(m)
	m.CTime = f.tick()
	m.MTime = m.CTime
	m.Serial = 1
	f.machines[m.UUID] = m
	return clone(m), nil
}

func (f *fakeBackend) UpdateMachine(_ context.Context, ident string, u MachineUpdate) (*config.Machine, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	m, err := f.find(ident)
	if err != nil {
		return nil, err
	}
	if u.Serial != 0 && u.Serial != m.Serial {
		return nil, ecode.Errorf(ecode.State, "Node %s was changed meanwhile", m.UUID)
	}
	f.lastUpdate = u
	for k, v := range u.Fields {
		s, _ := v.(string)
		d, _ := v.(map[string]any)
		switch k {
		case "name":
			m.Name = s
		case "description":
			m.Description = s
		case "driver_info":
			m.DriverInfo = d
		case "properties":
			m.Properties = d
		case "extra":
			m.Extra = d
		case "instance_info":
			m.InstanceInfo = d
		case "rescue_interface":
			m.Interfaces.Rescue = s
		default:
			return nil, ecode.Errorf(ecode.Inval, "fake backend: cannot set %s", k)
		}
	}
	m.Serial++
	m.MTime = f.tick()
	return clone(m), nil
}

func (f *fakeBackend) DeleteMachine(_ context.Context, ident string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	m, err := f.find(ident)
	if err != nil {
		return err
	}
	if !m.Maintenance && !slices.Contains([]string{"manageable", "enroll", "adopt failed", "available"}, m.ProvisionState) {
		return ErrDeleteState(m.UUID, m.ProvisionState)
	}
	delete(f.machines, m.UUID)
	return nil
}

// transitions of the fake: target → states it may start from → end state.
var fakeTransitions = map[string]struct {
	from []string
	to   string
}{
	"manage":   {[]string{"enroll", "available"}, "manageable"},
	"provide":  {[]string{"manageable"}, "available"},
	"active":   {[]string{"available"}, "active"},
	"deleted":  {[]string{"active", "rescue"}, "available"},
	"rescue":   {[]string{"active", "rescue", "rescue failed", "unrescue failed"}, "rescue"},
	"unrescue": {[]string{"rescue", "rescue failed"}, "active"},
}

func (f *fakeBackend) SetProvisionState(_ context.Context, ident, target string, args ProvisionArgs) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	m, err := f.find(ident)
	if err != nil {
		return err
	}
	if m.Reservation != "" {
		return ErrNodeLocked(m.UUID, "127.0.0.1")
	}
	t, ok := fakeTransitions[target]
	if !ok || !slices.Contains(t.from, m.ProvisionState) {
		return ErrInvalidTransition(target, m.UUID, m.ProvisionState)
	}
	f.lastArgs, f.lastTarget = args, target
	m.ProvisionState, m.TargetProvisionState = t.to, ""
	if target == "rescue" {
		if m.InstanceInfo == nil {
			m.InstanceInfo = map[string]any{}
		}
		m.InstanceInfo["hashed_rescue_password"] = args.RescuePasswordHash
	}
	m.ProvisionUpdated = f.tick()
	return nil
}

func (f *fakeBackend) SetPowerState(_ context.Context, ident, target string, _ time.Duration) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	m, err := f.find(ident)
	if err != nil {
		return err
	}
	f.lastPower = target
	m.PowerState = strings.TrimPrefix(strings.TrimPrefix(target, "soft "), "")
	return nil
}

func (f *fakeBackend) SetMaintenance(_ context.Context, ident string, on bool, reason string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	m, err := f.find(ident)
	if err != nil {
		return err
	}
	m.Maintenance, m.MaintenanceReason = on, reason
	return nil
}

func (f *fakeBackend) Validate(_ context.Context, ident string) (map[string]InterfaceValidation, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, err := f.find(ident); err != nil {
		return nil, err
	}
	return map[string]InterfaceValidation{"power": {Result: true}, "rescue": {Result: false, Reason: "no rescue network"}}, nil
}

func (f *fakeBackend) ListPorts(_ context.Context, flt PortFilter) ([]*config.MachinePort, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []*config.MachinePort
	for _, p := range f.ports {
		if (flt.Machine == "" || p.Machine == flt.Machine) && (flt.Address == "" || p.Address == flt.Address) {
			c := *p
			out = append(out, &c)
		}
	}
	return out, nil
}

func (f *fakeBackend) GetPort(_ context.Context, uuid string) (*config.MachinePort, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	p, ok := f.ports[uuid]
	if !ok {
		return nil, ecode.Errorf(ecode.NoEnt, "no port %s", uuid)
	}
	c := *p
	return &c, nil
}

func (f *fakeBackend) CreatePort(_ context.Context, p *config.MachinePort) (*config.MachinePort, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, q := range f.ports {
		if q.Address == p.Address {
			return nil, ecode.Errorf(ecode.Exists, "A port with MAC address %s already exists.", p.Address)
		}
	}
	c := *p
	c.CTime = f.tick()
	c.MTime = c.CTime
	c.Serial = 1
	f.ports[c.UUID] = &c
	out := c
	return &out, nil
}

func (f *fakeBackend) UpdatePort(_ context.Context, uuid string, u PortUpdate) (*config.MachinePort, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	p, ok := f.ports[uuid]
	if !ok {
		return nil, ecode.Errorf(ecode.NoEnt, "no port %s", uuid)
	}
	for k, v := range u.Fields {
		switch k {
		case "address":
			p.Address = v.(string)
		case "pxe_enabled":
			p.PXEEnabled = v.(bool)
		case "extra":
			p.Extra, _ = v.(map[string]any)
		default:
			return nil, ecode.Errorf(ecode.Inval, "fake backend: cannot set %s", k)
		}
	}
	p.Serial++
	c := *p
	return &c, nil
}

func (f *fakeBackend) DeletePort(_ context.Context, uuid string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.ports[uuid]; !ok {
		return ecode.Errorf(ecode.NoEnt, "no port %s", uuid)
	}
	delete(f.ports, uuid)
	return nil
}

func (f *fakeBackend) Drivers(context.Context) ([]Driver, error) {
	return []Driver{
		{Name: "ipmi", Hosts: []string{"node1"}, Enabled: map[string][]string{"power": {"ipmitool"}}, Default: map[string]string{"power": "ipmitool"},
			Properties: map[string]string{"ipmi_address": "IP address or hostname of the node. Required."}},
		{Name: "fake-hardware", Hosts: []string{"node1"}, Enabled: map[string][]string{"power": {"fake"}, "rescue": {"fake", "no-rescue"}},
			Default: map[string]string{"power": "fake", "rescue": "fake"}},
	}, nil
}

func (f *fakeBackend) AgentLookup(_ context.Context, addrs []string, uuid string) (*config.Machine, string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var m *config.Machine
	if uuid != "" {
		m = f.machines[uuid]
	}
	for _, p := range f.ports {
		if m == nil && slices.Contains(addrs, p.Address) {
			m = f.machines[p.Machine]
		}
	}
	if m == nil || !slices.Contains([]string{"rescue wait", "wait call-back", "clean wait"}, m.ProvisionState) {
		return nil, "", ecode.Errorf(ecode.NoEnt, "lookup failed")
	}
	if _, ok := f.tokens[m.UUID]; ok {
		return clone(m), "", nil
	}
	tok := "tok-" + m.UUID
	f.tokens[m.UUID] = tok
	if m.DriverInternalInfo == nil {
		m.DriverInternalInfo = map[string]any{}
	}
	m.DriverInternalInfo["agent_secret_token"] = tok
	return clone(m), tok, nil
}

func (f *fakeBackend) AgentHeartbeat(_ context.Context, ident string, hb Heartbeat) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	m, err := f.find(ident)
	if err != nil {
		return err
	}
	if f.tokens[m.UUID] != hb.AgentToken {
		return ErrAgentTokenInvalid()
	}
	f.lastHB = hb
	return nil
}
