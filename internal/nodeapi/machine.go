package nodeapi

// Node RPCs of the bare-metal conductor: corral-node acts on a machine for
// corrald (its BMC, its boot media, its agent). Every call names the
// machine and carries what the node needs to act (the node keeps no
// machine configuration), so any node of the machine's conductor group can
// serve it.
const (
	MachinePower        = "machine_power"
	MachineBootDevice   = "machine_boot_device"
	MachineBootPrepare  = "machine_boot_prepare"
	MachineBootCleanUp  = "machine_boot_clean_up"
	MachineAgentCommand = "machine_agent_command"
	MachineNetwork      = "machine_network"
	// MachineConsole is a stream: the machine's serial console through
	// its BMC (Serial-over-LAN), both ways, until the client closes.
	MachineConsole = "machine_console"
)

// MachineConsoleArgs opens a machine's serial console with its console
// interface ("ipmitool-sol").
type MachineConsoleArgs struct {
	MachineBMC
	ConsoleInterface string `json:"console_interface"`
}

// MachinePortRef is one of a machine's ports as the conductor's node
// sees it: its MAC and the switch port it is wired to (Ironic's
// local_link_connection port_id), an interface in the node's bare-metal
// network namespace.
type MachinePortRef struct {
	MAC    string `json:"mac"`
	PortID string `json:"port_id,omitempty"`
}

// MachineNetworkArgs moves a machine's ports onto one of the node's
// bare-metal networks (provisioning, rescue, tenant ...). Ports with no
// PortID are not wired to the node and are left alone.
type MachineNetworkArgs struct {
	Machine string           `json:"machine"`
	Ports   []MachinePortRef `json:"ports"`
	Network string           `json:"network"`
}

// MachineBMC says how to reach a machine's BMC.
type MachineBMC struct {
	Machine    string         `json:"machine"` // uuid
	Driver     string         `json:"driver"`  // fake-hardware, ipmi, redfish
	DriverInfo map[string]any `json:"driver_info"`
}

// MachinePowerArgs asks for a power action, or only the power state when
// Action is "".
type MachinePowerArgs struct {
	MachineBMC
	// Action: "", "power on", "power off", "rebooting", "soft power off",
	// "soft rebooting".
	Action  string  `json:"action,omitempty"`
	Timeout float64 `json:"timeout,omitempty"` // seconds; 0: the driver's default
}

// MachinePowerReply is the power state after the action: "power on" or
// "power off".
type MachinePowerReply struct {
	PowerState string `json:"power_state"`
}

// MachineBootDeviceArgs sets the device the machine boots from next
// ("pxe", "cdrom", "disk", "bios").
type MachineBootDeviceArgs struct {
	MachineBMC
	Device     string `json:"device"`
	Persistent bool   `json:"persistent"`
}

// MachineBootPrepareArgs sets up the machine's next boot into the agent's
// ramdisk through its boot interface: for redfish-virtual-media the node
// builds an ISO of the ramdisk with the kernel command line below, serves
// it and inserts it through the BMC, then sets the boot device to cdrom
// once; for fake, nothing.
type MachineBootPrepareArgs struct {
	MachineBMC
	BootInterface string `json:"boot_interface"`
	// APIURL is the Bare Metal API the agent looks itself up at
	// (ipa-api-url); APICASHA256 pins its certificate.
	APIURL      string `json:"api_url"`
	APICASHA256 string `json:"api_ca_sha256,omitempty"`
	// KernelParams are added to the ramdisk's command line.
	KernelParams string `json:"kernel_params,omitempty"`
	// Ports and Network, for the PXE boot interfaces (ipxe, pxe): the
	// MACs the node's DHCP answers and the network the machine boots on;
	// the agent then reaches the API through the node's forwarder on that
	// network, so the node sets ipa-api-url itself (same scheme as
	// APIURL).
	Ports   []MachinePortRef `json:"ports,omitempty"`
	Network string           `json:"network,omitempty"`
}

// MachineBootCleanUpArgs removes what MachineBootPrepare set up (ejects
// the ISO, deletes it) and sets the machine to boot from its disk.
type MachineBootCleanUpArgs struct {
	MachineBMC
	BootInterface string           `json:"boot_interface"`
	Ports         []MachinePortRef `json:"ports,omitempty"`
}

// MachineAgentCommandArgs runs a command of the machine's agent from the
// node, which reaches the machine's network: POST <URL>/v1/commands/ with
// the token, waiting for the result when Wait is set.
type MachineAgentCommandArgs struct {
	Machine string         `json:"machine"`
	URL     string         `json:"callback_url"`
	Token   string         `json:"agent_token"`
	Name    string         `json:"name"` // e.g. rescue.finalize_rescue
	Params  map[string]any `json:"params"`
	Wait    bool           `json:"wait"`
	// Timeout bounds the call, in seconds (0: the client's default).
	Timeout float64 `json:"timeout,omitempty"`
}

// MachineAgentCommandReply is the command's result as the agent reports
// it (command_status RUNNING, SUCCEEDED or FAILED).
type MachineAgentCommandReply struct {
	ID     string         `json:"id"`
	Status string         `json:"command_status"`
	Error  any            `json:"command_error,omitempty"`
	Result map[string]any `json:"command_result,omitempty"`
}
