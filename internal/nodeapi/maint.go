package nodeapi

// Node RPCs of the cluster maintenance opcodes.
const (
	// HasIPAddress reports whether the node owns an address (Ganeti's
	// node_has_ip_address): whether it can bind to it.
	HasIPAddress = "node_has_ip_address"
)

// HasIPAddressArgs names the address.
type HasIPAddressArgs struct {
	Address string `json:"address"`
}

// Node RPCs of `corral cluster command` and `cluster copyfile`, taken
// from the master only (the RPC server accepts the master's certificate
// alone) and refused when the node daemon runs with
// --cluster-commands=false.
const (
	// RunCommand runs a shell command as root.
	RunCommand = "node_run_command"
	// WriteFile writes a file owned by root.
	WriteFile = "node_write_file"
)

// MaxCommandOutput bounds the output RunCommand returns; the rest is cut.
const MaxCommandOutput = 64 << 10

// RunCommandArgs is the command and how long it may run.
type RunCommandArgs struct {
	Command string  `json:"command"`
	Timeout float64 `json:"timeout"` // seconds
}

// RunCommandReply is its exit code (-1: killed by a signal or at the
// timeout) and combined output.
type RunCommandReply struct {
	ExitCode  int    `json:"exit_code"`
	Output    string `json:"output"`
	Truncated bool   `json:"truncated,omitempty"`
	TimedOut  bool   `json:"timed_out,omitempty"`
}

// WriteFileArgs is the file to write; Data travels as base64.
type WriteFileArgs struct {
	Path string `json:"path"`
	Data []byte `json:"data"`
	Mode uint32 `json:"mode"`
}

// Node RPCs of the cluster's floating master address (Ganeti's
// node_activate_master_ip and node_deactivate_master_ip, and a query of
// their effect for cluster verify). Each is idempotent.
const (
	// ActivateMasterIP adds the address to the master network device.
	ActivateMasterIP = "node_activate_master_ip"
	// DeactivateMasterIP removes it.
	DeactivateMasterIP = "node_deactivate_master_ip"
	// MasterIPStatus reports whether the address is on the device.
	MasterIPStatus = "node_master_ip_status"
)

// MasterIPArgs are the master network parameters (Ganeti's
// MasterNetworkParameters less the node and the IP family).
type MasterIPArgs struct {
	Address string `json:"ip"`
	Netmask int    `json:"netmask"` // prefix length
	Netdev  string `json:"netdev"`
}

// MasterIPReply says whether the address is on the device after the call
// and whether the call changed anything.
type MasterIPReply struct {
	Present bool `json:"present"`
	Changed bool `json:"changed,omitempty"`
}
