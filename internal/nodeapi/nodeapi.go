// Package nodeapi defines the messages the master sends to corral-node and
// their replies: one place both sides import, so the wire contract is a Go
// type and not a convention.
package nodeapi

// Method names (the path is /rpc/v1/<method>).
const (
	NodeInfo         = "node_info"
	Version          = "version"
	InstanceStart    = "instance_start"
	InstanceShutdown = "instance_shutdown"
	InstanceReboot   = "instance_reboot"
	InstanceList     = "instance_list"
	DiskCreate       = "blockdev_create"
	DiskRemove       = "blockdev_remove"
	DiskList         = "blockdev_list"
	DiskGrow         = "blockdev_grow"
	DiskConvert      = "blockdev_convert"
	OSCreate         = "instance_os_add"
	OSRename         = "instance_run_rename"
	OSDiagnose       = "os_diagnose"
	OSValidate       = "os_validate"
	Console          = "instance_console"
	TestDelay        = "test_delay"
	ProcessList      = "hypervisor_processes"
	EtcdMemberStart  = "etcd_member_start"
	EtcdMemberStop   = "etcd_member_stop"
)

// HypervisorProcess is a qemu process found on the node, managed or not.
type HypervisorProcess struct {
	PID  int    `json:"pid"`
	UUID string `json:"uuid"`
	UID  int    `json:"uid"`
}

// NodeInfoArgs asks for facts about the node.
type NodeInfoArgs struct {
	Hypervisor string `json:"hypervisor"`
	Template   string `json:"disk_template"`
}

// NodeInfoReply is the node's facts.
type NodeInfoReply struct {
	Name           string   `json:"name"`
	Version        string   `json:"version"`
	Time           float64  `json:"time"`
	MemoryTotalMiB int64    `json:"memory_total"`
	MemoryFreeMiB  int64    `json:"memory_free"`
	MemoryNodeMiB  int64    `json:"memory_dom0"`
	CPUs           int      `json:"cpu_total"`
	DiskTotalMiB   int64    `json:"storage_size"`
	DiskFreeMiB    int64    `json:"storage_free"`
	Hypervisors    []string `json:"hypervisors"`
	Instances      int      `json:"instances"`
	CertNotAfter   float64  `json:"cert_not_after"`
}

// DiskSpec is one instance disk as the node sees it.
type DiskSpec struct {
	UUID    string `json:"uuid"`
	Name    string `json:"name,omitempty"`
	Index   int    `json:"index"`
	SizeMiB int64  `json:"size"`
	Mode    string `json:"mode"`
	// Params are the template's disk parameters in the node's group
	// (rbd: pool, access, conf, keyring); none for file and diskless.
	Params map[string]string `json:"params,omitempty"`
}

// NICSpec is one instance NIC as the node sees it.
type NICSpec struct {
	UUID string `json:"uuid"`
	Name string `json:"name,omitempty"`
	MAC  string `json:"mac"`
	IP   string `json:"ip,omitempty"`
	Mode string `json:"mode"`
	Link string `json:"link,omitempty"`
	// Network describes the NIC's network, for the OS scripts'
	// NIC_<n>_NETWORK_* variables; nil for a NIC on no network.
	Network *NetworkInfo `json:"network,omitempty"`
}

// NetworkInfo is what a node learns of a NIC's network.
type NetworkInfo struct {
	Name      string   `json:"name"`
	UUID      string   `json:"uuid"`
	Tags      []string `json:"tags,omitempty"`
	Subnet    string   `json:"subnet,omitempty"`
	Gateway   string   `json:"gateway,omitempty"`
	Subnet6   string   `json:"subnet6,omitempty"`
	Gateway6  string   `json:"gateway6,omitempty"`
	MACPrefix string   `json:"mac_prefix,omitempty"`
}

// InstanceSpec is everything a node needs to run or install an instance:
// parameters arrive filled with the cluster defaults.
type InstanceSpec struct {
	Name            string            `json:"name"`
	UUID            string            `json:"uuid"`
	OS              string            `json:"os"`
	Hypervisor      string            `json:"hypervisor"`
	PrimaryNodeUUID string            `json:"primary_node"`
	CTime           float64           `json:"ctime"`
	MTime           float64           `json:"mtime"`
	HVParams        map[string]string `json:"hvparams"`
	BEParams        map[string]string `json:"beparams"`
	OSParams        map[string]string `json:"osparams"`
	// OSParamsPrivate are the instance's private OS parameters: every OS
	// script sees them, and the node keeps their values out of its logs
	// and errors.
	OSParamsPrivate map[string]string `json:"osparams_private,omitempty"`
	MemoryMiB       int64             `json:"memory"`
	VCPUs           int               `json:"vcpus"`
	DiskTemplate    string            `json:"disk_template"`
	Disks           []DiskSpec        `json:"disks"`
	NICs            []NICSpec         `json:"nics"`
	// UIDPool is the cluster's uid pool, for hvparam security_model pool.
	UIDPool [][2]uint32 `json:"uid_pool,omitempty"`
	// SharedFileDir is the cluster's shared_file_storage_dir, for the
	// sharedfile template.
	SharedFileDir string `json:"shared_file_storage_dir,omitempty"`
	// NetworkPort is the instance's network_port, the TCP port of a VNC
	// console bound to an IP address or of SPICE; 0 when it has none.
	NetworkPort int `json:"network_port,omitempty"`
}

// InstanceArgs carries one instance.
type InstanceArgs struct {
	Instance InstanceSpec `json:"instance"`
}

// ShutdownArgs stops an instance.
type ShutdownArgs struct {
	Instance InstanceSpec `json:"instance"`
	Timeout  int          `json:"timeout"` // seconds; 0 stops the instance at once
	Force    bool         `json:"force"`
}

// RebootArgs reboots an instance: soft (guest), hard (reset) or full
// (stop and start).
type RebootArgs struct {
	Instance InstanceSpec `json:"instance"`
	Type     string       `json:"reboot_type"`
	Timeout  int          `json:"timeout"`
}

// RunningInstance is an instance the hypervisor runs.
type RunningInstance struct {
	Name      string `json:"name"`
	UUID      string `json:"uuid"`
	State     string `json:"state"`
	MemoryMiB int64  `json:"memory"`
	VCPUs     int    `json:"vcpus"`
	PID       int    `json:"pid,omitempty"`
	// SerialSocket is the unix socket of the serial console on the node,
	// "" when the instance has none (the console opcode builds its socat
	// command from it).
	SerialSocket string `json:"serial_socket,omitempty"`
	// Confinement says how the process is confined; nil where the
	// hypervisor does not confine (fake).
	Confinement *Confinement `json:"confinement,omitempty"`
}

// InstanceListArgs lists running instances of some hypervisors.
type InstanceListArgs struct {
	Hypervisors []string `json:"hypervisors"`
}

// DiskArgs creates or removes one disk.
type DiskArgs struct {
	InstanceUUID string   `json:"instance_uuid"`
	Template     string   `json:"disk_template"`
	Disk         DiskSpec `json:"disk"`
	// SharedFileDir: see InstanceSpec.
	SharedFileDir string `json:"shared_file_storage_dir,omitempty"`
}

// DiskReply reports where a disk lives.
type DiskReply struct {
	Path string `json:"path"`
}

// DiskGrowArgs sets one disk's size. The size is the target, not an
// increment, so a repeated call is harmless even without the operation
// record.
type DiskGrowArgs struct {
	InstanceUUID string   `json:"instance_uuid"`
	Template     string   `json:"disk_template"`
	Disk         DiskSpec `json:"disk"`
	NewSizeMiB   int64    `json:"new_size"`
	// SharedFileDir: see InstanceSpec.
	SharedFileDir string `json:"shared_file_storage_dir,omitempty"`
}

// DiskConvertArgs copies one disk of a stopped instance from its template
// to another (file and rbd); the source is left for the caller to remove.
// From and To carry each side's disk parameters.
type DiskConvertArgs struct {
	InstanceUUID string   `json:"instance_uuid"`
	FromTemplate string   `json:"from_template"`
	ToTemplate   string   `json:"to_template"`
	From         DiskSpec `json:"from"`
	To           DiskSpec `json:"to"`
	// SharedFileDir is the cluster's shared_file_storage_dir, for the
	// sharedfile side of a conversion.
	SharedFileDir string `json:"shared_file_dir,omitempty"`
}

// DiskGrowReply reports the grown disk.
type DiskGrowReply struct {
	Path    string `json:"path"`
	SizeMiB int64  `json:"size"`
}

// FoundDisk is a disk file present on a node.
type FoundDisk struct {
	Path         string `json:"path"`
	InstanceUUID string `json:"instance_uuid"`
	DiskUUID     string `json:"disk_uuid"`
	SizeMiB      int64  `json:"size"`
	UID          int    `json:"uid"`
	Mode         uint32 `json:"mode"`
}

// OSCreateArgs runs an OS definition's create script.
type OSCreateArgs struct {
	Instance     InstanceSpec      `json:"instance"`
	Reinstall    bool              `json:"reinstall"`
	ForceVariant bool              `json:"force_variant"`
	DebugLevel   int               `json:"debug"`
	SecretParams map[string]string `json:"osparams_secret,omitempty"`
}

// OSRenameArgs runs the rename script.
type OSRenameArgs struct {
	Instance InstanceSpec `json:"instance"`
	OldName  string       `json:"old_name"`
}

// OSReply reports where the script's log is.
type OSReply struct {
	LogPath string `json:"log"`
}

// OSInfo describes one OS definition found on a node.
type OSInfo struct {
	Name        string      `json:"name"`
	Path        string      `json:"path"`
	Valid       bool        `json:"valid"`
	Error       string      `json:"error,omitempty"`
	Variants    []string    `json:"variants"`
	Parameters  [][2]string `json:"parameters"`
	APIVersions []int       `json:"api_versions"`
	Trusted     bool        `json:"trusted"`
	Version     string      `json:"os_version,omitempty"` // first line of os_version
}

// OSValidateArgs runs an OS's verify script on parameter values, as
// Ganeti's os_validate RPC does with the "parameters" check. Private holds
// the instance's private OS parameters: the script sees them like the
// others, the node keeps their values out of logs and errors.
type OSValidateArgs struct {
	OS           string            `json:"os"` // with "+variant" when one is set
	Required     bool              `json:"required"`
	ForceVariant bool              `json:"force_variant"`
	Params       map[string]string `json:"osparams"`
	Private      map[string]string `json:"osparams_private,omitempty"`
}

// OSValidateReply says whether the OS was found (a missing OS is an error
// only when it was required) and where the verify script logged.
type OSValidateReply struct {
	Found   bool   `json:"found"`
	LogPath string `json:"log_path,omitempty"`
}

// DelayArgs sleeps on a node.
type DelayArgs struct {
	Duration float64 `json:"duration"`
}

// ConsoleArgs opens an instance's serial console.
type ConsoleArgs struct {
	Instance InstanceSpec `json:"instance"`
}

// VersionReply identifies the node daemon.
type VersionReply struct {
	Version  string  `json:"version"`
	Protocol int     `json:"protocol"`
	Time     float64 `json:"time"`
}

// EtcdMemberStartArgs asks the node to run an etcd member of the cluster's
// store, one the master has just added through etcd's cluster API. The
// member's certificate and key are issued by the cluster CA for this one
// member (the key travels only over the node RPC's mutual TLS).
type EtcdMemberStartArgs struct {
	Name           string `json:"name"`
	ClientURL      string `json:"client_url"`
	PeerURL        string `json:"peer_url"`
	InitialCluster string `json:"initial_cluster"`
	CertPEM        string `json:"cert_pem"`
	KeyPEM         string `json:"key_pem"`
	CAPEM          string `json:"ca_pem"`
}

// EtcdMemberStartReply names the running member's process.
type EtcdMemberStartReply struct {
	PID     int    `json:"pid"`
	DataDir string `json:"data_dir"`
}

// EtcdMemberStopArgs asks the node to stop an etcd member the cluster no
// longer counts, and to delete its data (a removed member can never rejoin
// on it).
type EtcdMemberStopArgs struct {
	Name string `json:"name"`
}

// Live migration (nodeserver/migrate.go). The master asks both nodes for a
// certificate request, signs them with the cluster CA (role migration), then
// starts the destination (MigrationAccept) and the source (MigrationStart),
// and follows the source (MigrationStatus). The keys never leave the nodes.
const (
	MigrationCSR      = "migration_csr"
	MigrationAccept   = "migration_accept"
	MigrationStart    = "migration_start"
	MigrationStatus   = "migration_status"
	MigrationPostcopy = "migration_postcopy"
	MigrationCancel   = "migration_cancel"
	MigrationFinish   = "migration_finish"
	// MigrationDrop stops the instance's process on this node without
	// touching its shared disks: the source after a migration, or a
	// destination that will not get the instance.
	MigrationDrop = "migration_drop"
)

// MigrationCSRArgs asks for a key (kept by the node) and its request.
type MigrationCSRArgs struct {
	InstanceUUID string `json:"instance_uuid"`
}

// MigrationCSRReply is the certificate request, PEM.
type MigrationCSRReply struct {
	CSR string `json:"csr"`
}

// MigrationAcceptArgs starts the destination and makes it listen.
type MigrationAcceptArgs struct {
	Instance InstanceSpec `json:"instance"`
	Address  string       `json:"address"`
	Port     int          `json:"port"`
	CertPEM  string       `json:"cert"`
	Postcopy bool         `json:"postcopy"`
}

// MigrationStartArgs starts sending the instance.
type MigrationStartArgs struct {
	Instance     InstanceSpec `json:"instance"`
	Address      string       `json:"address"`
	Port         int          `json:"port"`
	TLSHostname  string       `json:"tls_hostname"`
	CertPEM      string       `json:"cert"`
	Live         bool         `json:"live"`
	BandwidthMiB int          `json:"bandwidth"`
	DowntimeMS   int          `json:"downtime"`
	Postcopy     bool         `json:"postcopy"`
}

// SharedDirProbe writes, reads or removes a probe file in the shared
// directory, so cluster verify can tell that every node sees the same files.
const SharedDirProbe = "shared_dir_probe"

// Probe operations.
const (
	ProbeWrite  = "write"
	ProbeRead   = "read"
	ProbeRemove = "remove"
)

// SharedDirProbeArgs names the probe (a file name starting with
// ".corral-probe-") and, for a write, its content.
type SharedDirProbeArgs struct {
	Dir     string `json:"dir"`
	Name    string `json:"name"`
	Op      string `json:"op"`
	Content string `json:"content,omitempty"`
}

// SharedDirProbeReply is what a read found.
type SharedDirProbeReply struct {
	Found   bool   `json:"found"`
	Content string `json:"content,omitempty"`
	// Closed names a directory on the way to the shared one that other
	// users cannot pass through: qemu, unprivileged, could not open the
	// disks (reported by writes).
	Closed string `json:"closed,omitempty"`
}
