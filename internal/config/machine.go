package config

import "slices"

// A Machine is a bare-metal computer Corral provisions through its BMC, the
// object OpenStack's Bare Metal API calls a "node". Inside Corral a node is
// a hypervisor host running corral-node, so this one is a machine. Field
// names in JSON are the Bare Metal API's, so the API shows the stored
// object with no renaming beyond masking secrets.
//
// Provision and power states are part of the machine, changed only by
// jobs: each action is a job whose first step moves the machine into the
// action's transient state with its target, and whose last step reaches
// the stable state (package baremetal/states holds the table). What Corral
// observes without acting (power drift, the agent's heartbeats) goes in the
// machine's status conditions (confdb keeps a status apart from the object).
type Machine struct {
	Meta
	Driver      string `json:"driver"`
	Description string `json:"description,omitempty"`
	// DriverInfo holds how to reach the BMC (ipmi_address, ipmi_username,
	// ipmi_password, redfish_address, ...): the API masks the secret keys.
	DriverInfo map[string]any `json:"driver_info,omitempty"`
	// DriverInternalInfo is the conductor's own bookkeeping (agent URL,
	// last heartbeat, the agent token's digest); the API masks secrets.
	DriverInternalInfo map[string]any `json:"driver_internal_info,omitempty"`
	// InstanceInfo describes what is deployed: image_source,
	// image_checksum, root_gb, and while rescuing hashed_rescue_password.
	InstanceInfo map[string]any `json:"instance_info,omitempty"`
	Properties   map[string]any `json:"properties,omitempty"`
	Extra        map[string]any `json:"extra,omitempty"`
	InstanceUUID string         `json:"instance_uuid,omitempty"`

	PowerState           string  `json:"power_state,omitempty"`
	TargetPowerState     string  `json:"target_power_state,omitempty"`
	ProvisionState       string  `json:"provision_state"`
	TargetProvisionState string  `json:"target_provision_state,omitempty"`
	ProvisionUpdated     float64 `json:"provision_updated_at,omitempty"`
	LastError            string  `json:"last_error,omitempty"`

	Maintenance       bool   `json:"maintenance,omitempty"`
	MaintenanceReason string `json:"maintenance_reason,omitempty"`
	Fault             string `json:"fault,omitempty"`
	// Reservation is the id of the job acting on the machine, set by the
	// action's first step and cleared by its last: a second action is
	// refused with a conflict meanwhile, as Ironic refuses a locked node.
	// A job waiting for the machine to boot holds the reservation but no
	// lock.
	Reservation    string `json:"reservation,omitempty"`
	ConsoleEnabled bool   `json:"console_enabled,omitempty"`
	AutomatedClean *bool  `json:"automated_clean,omitempty"`

	// ConductorGroup picks which Corral nodes may act on the machine (run
	// its BMC calls, boot services and networks); "" is the default group.
	ConductorGroup string `json:"conductor_group,omitempty"`
	// Conductor is the Corral node (uuid) chosen to act on the machine.
	Conductor     string `json:"conductor,omitempty"`
	ResourceClass string `json:"resource_class,omitempty"`
	Owner         string `json:"owner,omitempty"`
	Lessee        string `json:"lessee,omitempty"`

	Interfaces MachineInterfaces `json:"interfaces"`
}

// MachineInterfaces names the implementation of each hardware interface of
// a machine, as the Bare Metal API's *_interface fields.
type MachineInterfaces struct {
	Bios       string `json:"bios_interface,omitempty"`
	Boot       string `json:"boot_interface,omitempty"`
	Console    string `json:"console_interface,omitempty"`
	Deploy     string `json:"deploy_interface,omitempty"`
	Inspect    string `json:"inspect_interface,omitempty"`
	Management string `json:"management_interface,omitempty"`
	Network    string `json:"network_interface,omitempty"`
	Power      string `json:"power_interface,omitempty"`
	Raid       string `json:"raid_interface,omitempty"`
	Rescue     string `json:"rescue_interface,omitempty"`
	Storage    string `json:"storage_interface,omitempty"`
	Vendor     string `json:"vendor_interface,omitempty"`
}

// A MachinePort is one network interface of a machine, found by its MAC
// address when the machine's agent looks itself up.
type MachinePort struct {
	Meta
	Address             string         `json:"address"` // MAC, lower case
	Machine             string         `json:"node_uuid"`
	PhysicalNetwork     string         `json:"physical_network,omitempty"`
	PXEEnabled          bool           `json:"pxe_enabled"`
	LocalLinkConnection map[string]any `json:"local_link_connection,omitempty"`
	Extra               map[string]any `json:"extra,omitempty"`
	// Network is the Corral network the port is plugged into now
	// (provisioning, rescue or tenant), set by the machine's jobs.
	Network string `json:"internal_network,omitempty"`
}

// Clone copies the machine deeply: its dicts may nest (driver_info,
// properties), and a job edits its copy.
func (m *Machine) Clone() *Machine {
	c := *m
	c.Tags = slices.Clone(m.Tags)
	c.DriverInfo = CloneDict(m.DriverInfo)
	c.DriverInternalInfo = CloneDict(m.DriverInternalInfo)
	c.InstanceInfo = CloneDict(m.InstanceInfo)
	c.Properties = CloneDict(m.Properties)
	c.Extra = CloneDict(m.Extra)
	if m.AutomatedClean != nil {
		v := *m.AutomatedClean
		c.AutomatedClean = &v
	}
	return &c
}

// Clone copies the port deeply.
func (p *MachinePort) Clone() *MachinePort {
	c := *p
	c.Tags = slices.Clone(p.Tags)
	c.LocalLinkConnection = CloneDict(p.LocalLinkConnection)
	c.Extra = CloneDict(p.Extra)
	return &c
}

// CloneDict copies a JSON dict with its nested dicts and lists.
func CloneDict(d map[string]any) map[string]any {
	if d == nil {
		return nil
	}
	out := make(map[string]any, len(d))
	for k, v := range d {
		out[k] = cloneJSON(v)
	}
	return out
}

func cloneJSON(v any) any {
	switch x := v.(type) {
	case map[string]any:
		return CloneDict(x)
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = cloneJSON(e)
		}
		return out
	}
	return v
}
