// Package machinewire is what corrald and the Bare Metal API (in
// corral-rapi) exchange over LUXI about bare-metal machines: the method
// names, their arguments and replies. It links neither side, so the API
// carries none of the master.
package machinewire

import "github.com/corral/corral/internal/config"

// LUXI methods (Corral only).
const (
	// MethodQuery answers machines by name or uuid, all when none is
	// named; an unknown one is an unknown-entity error.
	MethodQuery = "MachineQuery"
	// MethodPorts answers ports matching a PortFilter.
	MethodPorts = "MachinePortQuery"
	// MethodDrivers lists the hardware types.
	MethodDrivers = "MachineDrivers"
	// MethodSubmit submits a job of one OP_MACHINE_* op and answers once
	// the machine shows the action accepted (its transient state and
	// target, or the end of a short action), or with the op's error, so
	// that the API can answer 202 or the error in the same request.
	MethodSubmit = "MachineSubmit"
	// MethodLookup and MethodHeartbeat serve the agent endpoints.
	MethodLookup    = "MachineAgentLookup"
	MethodHeartbeat = "MachineAgentHeartbeat"
)

// Record is a machine with what Corral observed about it.
type Record struct {
	Machine *config.Machine `json:"machine"`
	Status  *config.Status  `json:"status,omitempty"`
	// ConductorNode is the name of the node that acts on the machine
	// now ("" when none is online), for streams the CLI opens to it.
	ConductorNode string `json:"conductor_node,omitempty"`
}

// PortFilter selects ports: by machine (name or uuid), MAC address or
// uuids; empty fields do not filter.
type PortFilter struct {
	Machine string   `json:"machine,omitempty"`
	Address string   `json:"address,omitempty"`
	UUIDs   []string `json:"uuids,omitempty"`
}

// HardwareType is a driver: for each interface, the implementations it
// enables, its default first.
type HardwareType struct {
	Name    string              `json:"name"`
	Enabled map[string][]string `json:"enabled"`
	Hosts   []string            `json:"hosts"` // the nodes that may conduct
}

// SubmitReply is the job of an accepted action.
type SubmitReply struct {
	JobID int64 `json:"job_id"`
}

// LookupArgs is the agent's lookup: its MAC addresses and, if it knows
// it, its machine's uuid.
type LookupArgs struct {
	Addresses []string `json:"addresses,omitempty"`
	UUID      string   `json:"node_uuid,omitempty"`
}

// LookupReply is the machine the agent runs on and its token, in clear
// only on the first lookup of a boot.
type LookupReply struct {
	Machine          *config.Machine `json:"machine"`
	Token            string          `json:"agent_token"`
	HeartbeatTimeout int             `json:"heartbeat_timeout"`
}

// HeartbeatArgs is an agent's heartbeat.
type HeartbeatArgs struct {
	Machine       string `json:"node_ident"`
	CallbackURL   string `json:"callback_url"`
	Token         string `json:"agent_token"`
	AgentVersion  string `json:"agent_version,omitempty"`
	AgentStatus   string `json:"agent_status,omitempty"`
	StatusMessage string `json:"agent_status_message,omitempty"`
	VerifyCA      string `json:"agent_verify_ca,omitempty"`
}
