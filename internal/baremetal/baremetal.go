// Package baremetal is the conductor of bare-metal machines: the units of
// the OP_MACHINE_* opcodes, which corrald runs as jobs. Every provision or
// power action is one job. Its first step moves the machine into the
// action's transient state with its target and reserves the machine for
// the job; later steps act through the machine's conductor node (BMC
// calls, boot set-up, agent commands) and park, holding no lock, while the
// machine boots; the last step reaches the stable state and frees the
// machine. A failure moves the machine to the state the table gives for
// "fail", with last_error set, and undoes what the action set up.
//
// The state table is package states; what runs on the conductor node is
// in corral-node (node RPCs of nodeapi); the Bare Metal API in
// corral-rapi reaches these units over LUXI.
package baremetal

import (
	"fmt"
	"time"

	"github.com/corral/corral/internal/confdb"
	"github.com/corral/corral/internal/config"
	"github.com/corral/corral/internal/ecode"
	"github.com/corral/corral/internal/engine"
	"github.com/corral/corral/internal/locking"
	"github.com/corral/corral/internal/opcodes"
)

// Deps is what the units work with, shared by every unit of the package.
type Deps struct {
	Cfg *confdb.DB
	// RPC calls the conductor nodes.
	RPC engine.NodeRPC
	// Now is the clock (time.Now when nil).
	Now func() time.Time
	// Timeouts bound the waits for a machine's agent.
	Timeouts Timeouts
	// Notify delivers an event to the jobs parked on it (the engine's
	// Processor.Notify).
	Notify func(event string) error
	// AgentAPIURL is the Bare Metal API as machines' agents reach it
	// (ipa-api-url), and AgentAPICert the PEM file of its certificate (or
	// of a CA in its chain), which agents pin; read at each boot, so a
	// renewed certificate is pinned from the next boot on.
	AgentAPIURL  string
	AgentAPICert string
	// Networks name the conductor nodes' bare-metal networks machines
	// with the bridged network interface move between.
	Networks Networks
}

// Networks are the names of the networks a machine's ports are moved to,
// as Ironic's provisioning, rescuing and tenant networks.
type Networks struct {
	Provisioning string
	Rescue       string
	Tenant       string
}

// DefaultNetworks are the networks' default names.
var DefaultNetworks = Networks{Provisioning: "provisioning", Rescue: "rescue", Tenant: "tenant"}

// Timeouts are how long a job waits for a machine's agent to call back
// before the action fails, as Ironic's [conductor] options of the same
// names.
type Timeouts struct {
	DeployCallback time.Duration // deploy_callback_timeout
	RescueCallback time.Duration // rescue_callback_timeout
	CleanCallback  time.Duration // clean_callback_timeout
}

// DefaultTimeouts are Ironic's defaults.
var DefaultTimeouts = Timeouts{DeployCallback: 1800 * time.Second, RescueCallback: 1800 * time.Second, CleanCallback: 1800 * time.Second}

func (d *Deps) now() time.Time {
	if d.Now != nil {
		return d.Now()
	}
	return time.Now()
}

// Register adds the units of every OP_MACHINE_* opcode.
func Register(r *engine.Registry, d *Deps) {
	if d.Timeouts == (Timeouts{}) {
		d.Timeouts = DefaultTimeouts
	}
	if d.Networks == (Networks{}) {
		d.Networks = DefaultNetworks
	}
	r.Register(
		engine.Op{ID: "OP_MACHINE_CREATE", New: func() engine.Unit { return &createUnit{d: d} }},
		engine.Op{ID: "OP_MACHINE_MODIFY", New: func() engine.Unit { return &modifyUnit{d: d} }},
		engine.Op{ID: "OP_MACHINE_REMOVE", New: func() engine.Unit { return &removeUnit{d: d} }},
		engine.Op{ID: "OP_MACHINE_MAINTENANCE", New: func() engine.Unit { return &maintenanceUnit{d: d} }},
		engine.Op{ID: "OP_MACHINE_PROVISION", New: func() engine.Unit { return &provisionUnit{d: d} }},
		engine.Op{ID: "OP_MACHINE_POWER", New: func() engine.Unit { return &powerUnit{d: d} }},
		engine.Op{ID: "OP_MACHINE_PORT_CREATE", New: func() engine.Unit { return &portCreateUnit{d: d} }},
		engine.Op{ID: "OP_MACHINE_PORT_MODIFY", New: func() engine.Unit { return &portModifyUnit{d: d} }},
		engine.Op{ID: "OP_MACHINE_PORT_REMOVE", New: func() engine.Unit { return &portRemoveUnit{d: d} }},
		engine.Op{ID: "OP_MACHINE_POWER_SYNC", New: func() engine.Unit { return &powerSyncUnit{d: d} }},
	)
}

// AgentEvent is the event a machine's agent heartbeat delivers: a job
// waiting for the machine's ramdisk parks on it.
func AgentEvent(machineUUID string) string { return "machine/" + machineUUID + "/agent" }

// Reservation is how a job's reservation of a machine reads.
func Reservation(jobID int64) string { return engine.Reservation(jobID) }

// ReservationJob is the job id of a reservation, 0 if it names none.
func ReservationJob(r string) int64 { return engine.ReservationJob(r) }

// machineLocks are the locks of a unit acting on the machine named by the
// op's "machine" parameter: the cluster lock shared and the machine's own
// exclusively. An unknown machine is locked by its given name; Prereq then
// reports it missing.
func machineLocks(cfg *confdb.DB, ident string) []locking.Request {
	name := ident
	if m, ok := cfg.Machine(ident); ok {
		name = m.UUID
	}
	return []locking.Request{
		{Level: locking.LevelCluster, Mode: locking.Shared, Names: []string{locking.BGL}},
		{Level: locking.LevelMachine, Mode: locking.Exclusive, Names: []string{name}},
	}
}

// lockedError is Ironic's conflict for a machine another action holds.
func lockedError(m *config.Machine) error {
	return ecode.Errorf(ecode.State, "Node %s is locked by %s, please retry after the current operation is completed.", m.UUID, m.Reservation)
}

// checkFree refuses a machine another job has reserved.
func checkFree(m *config.Machine) error {
	if m.Reservation != "" {
		return lockedError(m)
	}
	return nil
}

// stampProvision records a provision state change.
func stampProvision(d *Deps, m *config.Machine) {
	m.ProvisionUpdated = float64(d.now().UnixMicro()) / 1e6
}

// opError is an op-level failure with the cause wrapped.
func opError(format string, args ...any) error {
	return ecode.ExecErrorf(format, args...)
}

// stringParam reads an optional string parameter: nil when absent or null.
func stringParam(op *opcodes.Op, name string) *string {
	v, ok := op.Params[name].(string)
	if !ok {
		return nil
	}
	return &v
}

// dictParam reads an optional dict parameter, refusing another type.
func dictParam(op *opcodes.Op, name string) (map[string]any, error) {
	v := op.Params[name]
	if v == nil {
		return nil, nil
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, ecode.Errorf(ecode.Inval, "%s must be a dictionary, not %s", name, fmt.Sprintf("%T", v))
	}
	return m, nil
}
