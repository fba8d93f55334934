// Package agentapi holds the protocol spoken between Corral's bare-metal
// conductor, the Bare Metal API and the agent running in a machine's
// ramdisk. The shapes are those of OpenStack Ironic and its Python agent,
// so either side can talk to the other project's implementation:
//
//   - the agent looks itself up (GET /v1/lookup) and heartbeats
//     (POST /v1/heartbeat/<uuid>) against the Bare Metal API;
//   - the conductor calls the agent back on its callback URL
//     (POST /v1/commands/, GET /v1/commands/, GET /v1/commands/<id>).
package agentapi

import "encoding/json"

// DefaultListenPort is the port the agent serves its commands on, as
// Ironic's agent.
const DefaultListenPort = 9999

// AgentVersion is what the agent reports in its heartbeats.
const AgentVersion = "corral-agent 1"

// LookupReply is the Bare Metal API's answer to GET /v1/lookup.
type LookupReply struct {
	Node   LookupNode   `json:"node"`
	Config LookupConfig `json:"config"`
}

// LookupNode is the part of the machine the lookup shows its agent.
type LookupNode struct {
	UUID               string         `json:"uuid"`
	Properties         map[string]any `json:"properties,omitempty"`
	InstanceInfo       map[string]any `json:"instance_info,omitempty"`
	DriverInternalInfo map[string]any `json:"driver_internal_info,omitempty"`
}

// LookupConfig is the agent's configuration in the lookup reply. The agent
// token appears in clear only here, once per boot.
type LookupConfig struct {
	HeartbeatTimeout      int      `json:"heartbeat_timeout"`
	AgentToken            string   `json:"agent_token,omitempty"`
	AgentTokenRequired    bool     `json:"agent_token_required"`
	PermittedImageFormats []string `json:"permitted_image_formats,omitempty"`
}

// Agent statuses a heartbeat reports (API 1.72 and later).
const (
	AgentStatusStart = "start"
	AgentStatusEnd   = "end"
	AgentStatusError = "error"
)

// Heartbeat is the body of POST /v1/heartbeat/<uuid>.
type Heartbeat struct {
	CallbackURL        string `json:"callback_url"`
	AgentToken         string `json:"agent_token"`
	AgentVersion       string `json:"agent_version"`
	AgentVerifyCA      string `json:"agent_verify_ca,omitempty"`
	AgentStatus        string `json:"agent_status,omitempty"`
	AgentStatusMessage string `json:"agent_status_message,omitempty"`
}

// Command names the conductor sends, as "<extension>.<command>".
const (
	CmdFinalizeRescue       = "rescue.finalize_rescue"
	CmdPrepareImage         = "standby.prepare_image"
	CmdPowerOff             = "standby.power_off"
	CmdSync                 = "standby.sync"
	CmdEraseDevicesMetadata = "deploy.erase_devices_metadata"
	CmdCollectSystemLogs    = "log.collect_system_logs"
)

// Command statuses of a CommandResult.
const (
	StatusRunning   = "RUNNING"
	StatusSucceeded = "SUCCEEDED"
	StatusFailed    = "FAILED"
)

// CommandRequest is the body of POST /v1/commands/.
type CommandRequest struct {
	Name   string          `json:"name"`
	Params json.RawMessage `json:"params"`
}

// CommandResult is one command as the agent reports it. CommandName is the
// command without its extension ("finalize_rescue"), as Ironic compares
// it. CommandParams never carries secrets: the agent removes them.
type CommandResult struct {
	ID            string          `json:"id"`
	CommandName   string          `json:"command_name"`
	CommandParams map[string]any  `json:"command_params"`
	CommandStatus string          `json:"command_status"`
	CommandError  *CommandError   `json:"command_error"`
	CommandResult json.RawMessage `json:"command_result"`
}

// Done reports whether the command has finished, successfully or not.
func (r *CommandResult) Done() bool {
	return r.CommandStatus == StatusSucceeded || r.CommandStatus == StatusFailed
}

// CommandError is a failed command's error, in the agent's serialized
// exception form.
type CommandError struct {
	Type    string `json:"type"`
	Code    int    `json:"code"`
	Message string `json:"message"`
	Details string `json:"details"`
}

func (e *CommandError) Error() string {
	if e.Details != "" && e.Details != e.Message {
		return e.Type + ": " + e.Message + ": " + e.Details
	}
	return e.Type + ": " + e.Message
}

// CommandList is the reply of GET /v1/commands/.
type CommandList struct {
	Commands []CommandResult `json:"commands"`
}

// ErrorReply is the body of a refused agent API request.
type ErrorReply struct {
	Type        string `json:"type"`
	Code        int    `json:"code"`
	Message     string `json:"message"`
	Details     string `json:"details,omitempty"`
	FaultString string `json:"faultstring,omitempty"`
}

// FinalizeRescueParams are the parameters of rescue.finalize_rescue.
// RescuePassword is a crypt(3) hash when Hashed is true, else the clear
// password. SSHPublicKeys is Corral's addition: keys to authorize for the
// rescue user.
type FinalizeRescueParams struct {
	RescuePassword string   `json:"rescue_password"`
	Hashed         bool     `json:"hashed,omitempty"`
	SSHPublicKeys  []string `json:"ssh_public_keys,omitempty"`
}

// PrepareImageParams are the parameters of standby.prepare_image.
// ConfigDrive, when set, is an ISO 9660 image labelled config-2,
// gzip-compressed and base64-encoded, as Ironic sends it: the agent
// writes it to a new partition at the end of the disk after the image.
// It may hold secrets (user data with tokens): never logged or shown.
type PrepareImageParams struct {
	ImageInfo   ImageInfo `json:"image_info"`
	ConfigDrive string    `json:"configdrive,omitempty"`
}

// ImageInfo describes the image to write to the machine's root disk.
// Checksum is the legacy MD5 (or, as Ironic allows, any hex digest whose
// length names the algorithm) used when OSHashAlgo is empty.
type ImageInfo struct {
	ID          string         `json:"id"`
	URLs        []string       `json:"urls"`
	DiskFormat  string         `json:"disk_format,omitempty"`
	OSHashAlgo  string         `json:"os_hash_algo,omitempty"`
	OSHashValue string         `json:"os_hash_value,omitempty"`
	Checksum    string         `json:"checksum,omitempty"`
	RootDevice  map[string]any `json:"root_device,omitempty"`
}

// PrepareImageResult is the command_result of a finished prepare_image.
type PrepareImageResult struct {
	// Result is the agent's one-line summary, under the key Ironic's
	// agent uses.
	Result       string `json:"result"`
	Device       string `json:"device"`
	BytesWritten int64  `json:"bytes_written"`
}
