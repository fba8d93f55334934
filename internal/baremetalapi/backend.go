// Package baremetalapi serves OpenStack's Bare Metal API v1 (Ironic's
// HTTP API) on the API front, so the unchanged `openstack baremetal`
// client drives Corral's machines. The HTTP layer here parses requests,
// negotiates microversions, applies JSON patches, hashes the rescue
// password and renders machines as Ironic's node objects with secrets
// masked; every decision about a machine is the Backend's (corrald, over
// LUXI).
package baremetalapi

import (
	"context"
	"strings"
	"time"

	"github.com/corral/corral/internal/config"
)

// Backend is what the HTTP layer asks of the cluster. Every method takes
// the request's context. Errors are ecode-typed and their class picks the
// HTTP status (ecode.HTTPStatus: Inval 400, NoEnt 404, State/Exists 409);
// their message is shown to the client as Ironic's faultstring, so it must
// be the text Ironic uses (see the constructors in errors.go) and never
// carry a secret. An ident is a machine's name or uuid.
type Backend interface {
	// ListMachines returns every machine f matches, in any order: the
	// API sorts and pages (MachineFilter.Match is the reference).
	ListMachines(ctx context.Context, f MachineFilter) ([]*config.Machine, error)
	GetMachine(ctx context.Context, ident string) (*config.Machine, error)
	// CreateMachine stores m (the API has filled what the POST body gave,
	// the provision state the request's version starts machines in, and
	// a uuid when the body had none) and returns the stored machine.
	CreateMachine(ctx context.Context, m *config.Machine) (*config.Machine, error)
	// UpdateMachine sets the fields u names to their new values.
	UpdateMachine(ctx context.Context, ident string, u MachineUpdate) (*config.Machine, error)
	// DeleteMachine removes the machine and its ports; State (409) when
	// its provision state does not allow it (ErrDeleteState).
	DeleteMachine(ctx context.Context, ident string) error
	// SetProvisionState starts the action target (an API verb: manage,
	// provide, active, deleted, rescue, unrescue, abort, ...). Before it
	// returns the machine shows the action's transient state and target,
	// so a client polling right after sees it under way.
	SetProvisionState(ctx context.Context, ident, target string, args ProvisionArgs) error
	// SetPowerState starts a power action (power on, power off,
	// rebooting, soft power off, soft rebooting); timeout 0: the default.
	SetPowerState(ctx context.Context, ident, target string, timeout time.Duration) error
	SetMaintenance(ctx context.Context, ident string, on bool, reason string) error
	// Validate checks each hardware interface of the machine.
	Validate(ctx context.Context, ident string) (map[string]InterfaceValidation, error)

	ListPorts(ctx context.Context, f PortFilter) ([]*config.MachinePort, error)
	GetPort(ctx context.Context, uuid string) (*config.MachinePort, error)
	// CreatePort stores p (Machine holds the machine's uuid).
	CreatePort(ctx context.Context, p *config.MachinePort) (*config.MachinePort, error)
	// UpdatePort sets the fields u names to their new values.
	UpdatePort(ctx context.Context, uuid string, u PortUpdate) (*config.MachinePort, error)
	DeletePort(ctx context.Context, uuid string) error

	Drivers(ctx context.Context) ([]Driver, error)

	// AgentLookup finds the machine whose agent asks, by any of its MAC
	// addresses (lower case) or its uuid, when its state allows a lookup
	// (else NoEnt, as for an unknown machine). token is the agent token,
	// in clear, the first time it is handed out; "" afterwards.
	AgentLookup(ctx context.Context, addresses []string, machineUUID string) (m *config.Machine, token string, err error)
	// AgentHeartbeat records a heartbeat after checking its token; Inval
	// (400) for a missing or wrong token (ErrAgentTokenRequired,
	// ErrAgentTokenInvalid) or a changed callback URL.
	AgentHeartbeat(ctx context.Context, ident string, hb Heartbeat) error
}

// MachineFilter is a node list's query. Empty fields match everything.
type MachineFilter struct {
	ProvisionState string
	Maintenance    *bool
	Associated     *bool // has an instance_uuid
	Driver         string
	Fault          string
	ConductorGroup string // matched case-insensitively, as Ironic stores it lower case
	ResourceClass  string
	Owner          string
}

// Match reports whether m passes the filter.
func (f MachineFilter) Match(m *config.Machine) bool {
	switch {
	case f.ProvisionState != "" && m.ProvisionState != f.ProvisionState,
		f.Maintenance != nil && m.Maintenance != *f.Maintenance,
		f.Associated != nil && (m.InstanceUUID != "") != *f.Associated,
		f.Driver != "" && m.Driver != f.Driver,
		f.Fault != "" && m.Fault != f.Fault,
		f.ConductorGroup != "" && !strings.EqualFold(m.ConductorGroup, f.ConductorGroup),
		f.ResourceClass != "" && m.ResourceClass != f.ResourceClass,
		f.Owner != "" && m.Owner != f.Owner:
		return false
	}
	return true
}

// MachineUpdate is a PATCH's result: the Bare Metal API name of every
// top-level field the patch changed, with its new value as JSON decodes it
// (nil: the field is cleared). Serial is the machine's serial the patch
// was applied to: the backend refuses (State) when the machine changed
// since, so a concurrent update is not overwritten.
type MachineUpdate struct {
	Serial int64
	Fields map[string]any
}

// PortUpdate is MachineUpdate for a port.
type PortUpdate struct {
	Serial int64
	Fields map[string]any
}

// ProvisionArgs are the optional parts of a provision request.
type ProvisionArgs struct {
	// ConfigDrive is a base64 gzipped ISO or a JSON object of
	// meta_data/user_data/network_data (deploy and rebuild only).
	ConfigDrive any
	CleanSteps  []map[string]any
	DeploySteps []map[string]any
	// RescuePasswordHash is the crypt hash of the rescue password: the
	// clear password never goes past the API.
	RescuePasswordHash string
	// SSHPublicKeys are keys for the rescue user (Corral's extension).
	SSHPublicKeys []string
	// DisableRamdisk runs manual clean steps without booting the agent.
	DisableRamdisk bool
}

// InterfaceValidation is one interface's result of a validate call.
type InterfaceValidation struct {
	Result bool
	Reason string // why it failed, or that the interface is not supported
}

// PortFilter is a port list's query.
type PortFilter struct {
	Machine string // uuid of the machine
	Address string // MAC, lower case
}

// Driver is a hardware type with the interfaces it may use.
type Driver struct {
	Name  string
	Hosts []string // Corral nodes that can act for machines of this driver
	// Enabled lists, per interface (boot, power, rescue, ...), the
	// implementations enabled; Default names the one used when a machine
	// names none.
	Enabled map[string][]string
	Default map[string]string
	// Properties describes the driver_info keys the driver reads.
	Properties map[string]string
}

// Heartbeat is an agent's heartbeat.
type Heartbeat struct {
	CallbackURL        string
	AgentToken         string
	AgentVersion       string
	AgentStatus        string // start, end, error, or ""
	AgentStatusMessage string
	AgentVerifyCA      string
}
