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
	OSCreate         = "instance_os_add"
	OSRename         = "instance_run_rename"
	OSDiagnose       = "os_diagnose"
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
}

// NICSpec is one instance NIC as the node sees it.
type NICSpec struct {
	UUID string `json:"uuid"`
	Name string `json:"name,omitempty"`
	MAC  string `json:"mac"`
	IP   string `json:"ip,omitempty"`
	Mode string `json:"mode"`
	Link string `json:"link,omitempty"`
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
	MemoryMiB       int64             `json:"memory"`
	VCPUs           int               `json:"vcpus"`
	DiskTemplate    string            `json:"disk_template"`
	Disks           []DiskSpec        `json:"disks"`
	NICs            []NICSpec         `json:"nics"`
	// UIDPool is the cluster's uid pool, for hvparam security_model pool.
	UIDPool [][2]uint32 `json:"uid_pool,omitempty"`
}

// InstanceArgs carries one instance.
type InstanceArgs struct {
	Instance InstanceSpec `json:"instance"`
}

// ShutdownArgs stops an instance.
type ShutdownArgs struct {
	Instance InstanceSpec `json:"instance"`
	Timeout  int          `json:"timeout"` // seconds
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
