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
