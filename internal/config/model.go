// Package config is Corral's object model: the cluster, node groups, nodes and
// instances, with the metadata every object carries (uuid, name, serial_no,
// ctime, mtime, tags). Field names follow Ganeti's so RAPI and LUXI answers
// match what Ganeti clients expect. Persistence lives in package confdb.
package config

import (
	"crypto/rand"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/google/uuid"
)

// Meta is carried by every configuration object.
type Meta struct {
	UUID   string   `json:"uuid"`
	Name   string   `json:"name"`
	Serial int64    `json:"serial_no"`
	CTime  float64  `json:"ctime"`
	MTime  float64  `json:"mtime"`
	Tags   []string `json:"tags,omitempty"`
}

// GetUUID returns the object's uuid.
func (m *Meta) GetUUID() string { return m.UUID }

// GetName returns the object's name.
func (m *Meta) GetName() string { return m.Name }

// GetSerial returns the object's serial number.
func (m *Meta) GetSerial() int64 { return m.Serial }

// Touch bumps the serial number and modification time, and sets the creation
// time and uuid of a new object.
func (m *Meta) Touch(now time.Time) {
	t := float64(now.UnixMicro()) / 1e6
	if m.UUID == "" {
		m.UUID = NewUUID()
	}
	if m.CTime == 0 {
		m.CTime = t
	}
	m.MTime = t
	m.Serial++
}

// NewUUID returns a random (version 4) uuid.
func NewUUID() string { return uuid.NewString() }

// Params is a parameter dictionary (hvparams, beparams, osparams, ...).
// Values keep their JSON types so answers round-trip as Ganeti sends them.
type Params map[string]any

// Clone copies the dictionary (values are scalars or treated as immutable).
func (p Params) Clone() Params {
	if p == nil {
		return nil
	}
	return maps.Clone(p)
}

// Fill returns defaults overlaid with p (Ganeti's FillDict).
func Fill(defaults, p Params) Params {
	out := make(Params, len(defaults)+len(p))
	maps.Copy(out, defaults)
	maps.Copy(out, p)
	return out
}

// Strings renders every value as text, the form OS scripts and qemu see.
func (p Params) Strings() map[string]string {
	out := make(map[string]string, len(p))
	for k, v := range p {
		out[k] = ParamString(v)
	}
	return out
}

// ParamString renders one parameter value as text.
func ParamString(v any) string {
	switch x := v.(type) {
	case nil:
		return ""
	case string:
		return x
	case bool:
		if x {
			return "True"
		}
		return "False"
	case float64:
		if x == float64(int64(x)) {
			return fmt.Sprintf("%d", int64(x))
		}
		return fmt.Sprint(x)
	default:
		return fmt.Sprint(x)
	}
}

// Cluster is the singleton cluster object.
type Cluster struct {
	Meta
	ClusterName        string            `json:"cluster_name"`
	MasterNode         string            `json:"master_node"` // uuid
	Epoch              int64             `json:"epoch"`       // bumped by every master start; fences node RPC
	JoinAddress        string            `json:"join_address"`
	RPCPort            int               `json:"rpc_port"`
	EnabledHypervisors []string          `json:"enabled_hypervisors"`
	HVParams           map[string]Params `json:"hvparams"`
	BEParams           Params            `json:"beparams"`
	NICParams          Params            `json:"nicparams"`
	NDParams           Params            `json:"ndparams"`
	OSParams           map[string]Params `json:"osparams"`
	// OSHVParams are Ganeti's os_hvp: per OS (or OS+variant), per
	// hypervisor, parameters over the cluster's for that hypervisor.
	OSHVParams map[string]map[string]Params `json:"os_hvp,omitempty"`
	// OSParamsPrivate are Ganeti's osparams_private_cluster: per OS (or
	// OS+variant) private parameters under the instances' own private ones.
	OSParamsPrivate map[string]Params `json:"osparams_private_cluster,omitempty"`
	// IPolicy is the cluster's custom instance policy (Ganeti's ipolicy
	// keys), over Ganeti's defaults; node groups' custom ones override it.
	IPolicy              Params   `json:"ipolicy,omitempty"`
	EnabledDiskTemplates []string `json:"enabled_disk_templates"`
	MACPrefix            string   `json:"mac_prefix"`
	CandidatePoolSize    int      `json:"candidate_pool_size"`
	MaxRunningJobs       int      `json:"max_running_jobs"`
	MaxTrackedJobs       int      `json:"max_tracked_jobs"`
	JobQueueSize         int      `json:"job_queue_size"`
	HiddenOS             []string `json:"hidden_os"`
	BlacklistedOS        []string `json:"blacklisted_os"`
	FileStorageDir       string   `json:"file_storage_dir"`
	// SharedFileStorageDir is where the sharedfile template keeps disks: a
	// directory every node mounts at this path (Ganeti's
	// shared_file_storage_dir).
	SharedFileStorageDir string  `json:"shared_file_storage_dir,omitempty"`
	WatcherPauseUntil    float64 `json:"watcher_pause"`
	DefaultIAllocator    string  `json:"default_iallocator"`
	ConfigVersion        int     `json:"config_version"`
	// UIDPool is Ganeti's uid_pool: inclusive [low, high] uid ranges for
	// qemu under security_model pool (see internal/uidpool).
	UIDPool [][2]uint32 `json:"uid_pool,omitempty"`

	// ReconcilerPauses are corrald's reconcilers' own pause switches:
	// reconciler name -> the Unix time its pause ends, 0 for until
	// resumed (see reconcile.Pauses). The watcher pause holds them all.
	ReconcilerPauses map[string]float64 `json:"reconciler_pauses,omitempty"`

	// Per-node SSH keys (cmdlib/sshkeys.go): "" and 0 mean Ganeti's
	// defaults (rsa, 2048); a nil ModifySSHSetup means true.
	SSHKeyType                     string `json:"ssh_key_type,omitempty"`
	SSHKeyBits                     int    `json:"ssh_key_bits,omitempty"`
	ModifySSHSetup                 *bool  `json:"modify_ssh_setup,omitempty"`
	MasterCapabilityRAPIModifiable bool   `json:"master_capability_rapi_modifiable,omitempty"`
	// AutoFailover lets the watcher fail over the instances of a node
	// declared offline (Corral only; off by default).
	AutoFailover bool `json:"auto_failover,omitempty"`

	// ClusterIP is the cluster's floating address (Ganeti's master IP):
	// the node the master runs on holds it on MasterNetdev, with prefix
	// length MasterNetmask (0 means 32). "" when the cluster has none;
	// the master's node's primary IP then stands for it (masterip.go).
	ClusterIP     string `json:"cluster_ip,omitempty"`
	MasterNetdev  string `json:"master_netdev,omitempty"`
	MasterNetmask int    `json:"master_netmask,omitempty"`

	// GanetiDropin makes the master stand in for a Ganeti master on its
	// machine (package ganetidropin): it also serves LUXI on Ganeti's
	// socket paths and keeps Ganeti's ssconf files current, under the
	// root prefix GanetiRoot ("" = /; tests use a temporary directory).
	GanetiDropin bool   `json:"ganeti_dropin,omitempty"`
	GanetiRoot   string `json:"ganeti_root,omitempty"`

	// HVStateStatic and DiskStateStatic are Ganeti's hv_state_static and
	// disk_state_static: resource figures the operator declares (see
	// staticstate.go), stored filled with Ganeti's defaults.
	HVStateStatic   HVState   `json:"hv_state_static,omitempty"`
	DiskStateStatic DiskState `json:"disk_state_static,omitempty"`
}

// DefaultHypervisor is the first enabled one, as in Ganeti.
func (c *Cluster) DefaultHypervisor() string {
	if len(c.EnabledHypervisors) == 0 {
		return ""
	}
	return c.EnabledHypervisors[0]
}

// Clone returns a deep enough copy for modification.
func (c *Cluster) Clone() *Cluster {
	n := *c
	n.Tags = slices.Clone(c.Tags)
	n.EnabledHypervisors = slices.Clone(c.EnabledHypervisors)
	n.EnabledDiskTemplates = slices.Clone(c.EnabledDiskTemplates)
	n.HiddenOS = slices.Clone(c.HiddenOS)
	n.BlacklistedOS = slices.Clone(c.BlacklistedOS)
	n.UIDPool = slices.Clone(c.UIDPool)
	n.HVStateStatic, n.DiskStateStatic = c.HVStateStatic.Clone(), c.DiskStateStatic.Clone()
	n.ReconcilerPauses = maps.Clone(c.ReconcilerPauses)
	n.HVParams = cloneNested(c.HVParams)
	n.OSParams = cloneNested(c.OSParams)
	n.IPolicy = c.IPolicy.Clone()
	n.OSParamsPrivate = cloneNested(c.OSParamsPrivate)
	if c.OSHVParams != nil {
		n.OSHVParams = make(map[string]map[string]Params, len(c.OSHVParams))
		for os, hvs := range c.OSHVParams {
			n.OSHVParams[os] = cloneNested(hvs)
		}
	}
	n.BEParams = c.BEParams.Clone()
	n.NICParams = c.NICParams.Clone()
	n.NDParams = c.NDParams.Clone()
	return &n
}

func cloneNested(m map[string]Params) map[string]Params {
	if m == nil {
		return nil
	}
	out := make(map[string]Params, len(m))
	for k, v := range m {
		out[k] = v.Clone()
	}
	return out
}

// NodeGroup is a set of nodes (Ganeti's node group).
type NodeGroup struct {
	Meta
	AllocPolicy string            `json:"alloc_policy"`
	NDParams    Params            `json:"ndparams"`             // custom values only
	DiskParams  map[string]Params `json:"diskparams,omitempty"` // per disk template, custom values only
	IPolicy     Params            `json:"ipolicy,omitempty"`    // custom instance policy
	// Networks are the networks connected to the group, by network uuid,
	// with the NIC parameters their instances' NICs get (Ganeti's
	// group.networks).
	Networks map[string]NetParams `json:"networks,omitempty"`
	// Ganeti's hv_state_static and disk_state_static (staticstate.go).
	HVStateStatic   HVState   `json:"hv_state_static,omitempty"`
	DiskStateStatic DiskState `json:"disk_state_static,omitempty"`
}

func (g *NodeGroup) Clone() *NodeGroup {
	n := *g
	n.Tags = slices.Clone(g.Tags)
	n.NDParams = g.NDParams.Clone()
	n.DiskParams = cloneNested(g.DiskParams)
	n.IPolicy = g.IPolicy.Clone()
	n.Networks = maps.Clone(g.Networks)
	n.HVStateStatic, n.DiskStateStatic = g.HVStateStatic.Clone(), g.DiskStateStatic.Clone()
	return &n
}

// Node is one machine running corral-node.
type Node struct {
	Meta
	PrimaryIP       string `json:"primary_ip"`
	SecondaryIP     string `json:"secondary_ip"`
	Group           string `json:"group"` // uuid
	MasterCandidate bool   `json:"master_candidate"`
	MasterCapable   bool   `json:"master_capable"`
	VMCapable       bool   `json:"vm_capable"`
	Offline         bool   `json:"offline"`
	Drained         bool   `json:"drained"`
	NDParams        Params `json:"ndparams"`
	// Ganeti's hv_state_static and disk_state_static (staticstate.go).
	HVStateStatic   HVState   `json:"hv_state_static,omitempty"`
	DiskStateStatic DiskState `json:"disk_state_static,omitempty"`
}

func (n *Node) Clone() *Node {
	c := *n
	c.Tags = slices.Clone(n.Tags)
	c.NDParams = n.NDParams.Clone()
	c.HVStateStatic, c.DiskStateStatic = n.HVStateStatic.Clone(), n.DiskStateStatic.Clone()
	return &c
}

// Role is Ganeti's one-letter node role: M(aster), C(andidate), R(egular),
// D(rained), O(ffline).
func (n *Node) Role(masterUUID string) string {
	switch {
	case n.UUID == masterUUID:
		return "M"
	case n.MasterCandidate:
		return "C"
	case n.Drained:
		return "D"
	case n.Offline:
		return "O"
	default:
		return "R"
	}
}

// RoleName is the role as the long word used by RAPI's /role resource.
func RoleName(letter string) string {
	switch letter {
	case "M":
		return "master"
	case "C":
		return "master-candidate"
	case "D":
		return "drained"
	case "O":
		return "offline"
	default:
		return "regular"
	}
}

// Admin states of an instance.
const (
	AdminUp      = "up"
	AdminDown    = "down"
	AdminOffline = "offline"
)

// Disk templates.
const (
	DTDiskless = "diskless"
	DTFile     = "file"
	DTRBD      = "rbd"
	// DTSharedFile is the sharedfile template: disks in the cluster's
	// shared_file_storage_dir, reachable from every node.
	DTSharedFile = "sharedfile"
)

// Disk is one instance disk.
type Disk struct {
	UUID    string `json:"uuid"`
	Name    string `json:"name,omitempty"`
	SizeMiB int64  `json:"size"`
	Mode    string `json:"mode"` // rw | ro
}

// NIC is one instance network interface.
type NIC struct {
	UUID string `json:"uuid"`
	Name string `json:"name,omitempty"`
	MAC  string `json:"mac"`
	IP   string `json:"ip,omitempty"`
	Mode string `json:"mode"` // bridged | routed
	Link string `json:"link,omitempty"`
	// Network is the uuid of the network the NIC is on ("" for none);
	// Mode, Link and VLAN then come from the group's connection to it.
	Network string `json:"network,omitempty"`
	VLAN    string `json:"vlan,omitempty"`
}

// Instance is a virtual machine.
type Instance struct {
	Meta
	PrimaryNode  string `json:"primary_node"` // uuid
	OS           string `json:"os"`
	Hypervisor   string `json:"hypervisor"`
	HVParams     Params `json:"hvparams"` // custom values only
	BEParams     Params `json:"beparams"`
	OSParams     Params `json:"osparams"`
	OSParamsPriv Params `json:"osparams_private,omitempty"`
	AdminState   string `json:"admin_state"`
	DiskTemplate string `json:"disk_template"`
	Disks        []Disk `json:"disks"`
	NICs         []NIC  `json:"nics"`
	NetworkPort  int    `json:"network_port,omitempty"`
}

func (i *Instance) Clone() *Instance {
	c := *i
	c.Tags = slices.Clone(i.Tags)
	c.HVParams = i.HVParams.Clone()
	c.BEParams = i.BEParams.Clone()
	c.OSParams = i.OSParams.Clone()
	c.OSParamsPriv = i.OSParamsPriv.Clone()
	c.Disks = slices.Clone(i.Disks)
	c.NICs = slices.Clone(i.NICs)
	return &c
}

// MemoryMiB is the instance's maximum memory from its filled beparams.
func MemoryMiB(be Params) int64 { return int64(ParamInt(be["maxmem"], 128)) }

// VCPUs from filled beparams.
func VCPUs(be Params) int { return ParamInt(be["vcpus"], 1) }

// ParamInt reads a numeric parameter, def when absent or not a number.
func ParamInt(v any, def int) int {
	switch x := v.(type) {
	case float64:
		return int(x)
	case int:
		return x
	case int64:
		return int(x)
	}
	return def
}

// NewMAC returns a random MAC under prefix ("aa:00:00").
func NewMAC(prefix string) string {
	var b [3]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("%s:%02x:%02x:%02x", prefix, b[0], b[1], b[2])
}
