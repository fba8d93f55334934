package osapi

import (
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/corral/corral/internal/secret"
)

// ScriptPath is the PATH every OS script gets (Ganeti's hooks path).
const ScriptPath = "/sbin:/bin:/usr/sbin:/usr/bin"

// Hypervisor parameters that, when present, become the disks' and NICs'
// FRONTEND_TYPE, as in Ganeti.
const (
	hvDiskType = "disk_type"
	hvNICType  = "nic_type"
)

// Instance is what the OS scripts' environment is built from. The caller
// fills it from the configuration (and the node's block devices).
type Instance struct {
	Name               string
	OS                 string // with "+variant" when one is set
	UUID               string
	PrimaryNodeUUID    string
	SecondaryNodeUUIDs []string
	CTime, MTime       float64 // seconds since the epoch
	Hypervisor         string
	Disks              []Disk
	NICs               []NIC
	// Filled be/hv parameters, already stringified the way the configuration
	// shows them; keys are passed as-is.
	BEParams, HVParams map[string]string
	// OSParams holds the cluster per-OS defaults, the instance's public and
	// its private parameters, already merged.
	OSParams map[string]string
	// OSParamsPrivate are the instance's private parameters (Ganeti's
	// osparams_private): every script sees them, overriding OSParams, and
	// their values are kept out of the errors and log lines we write.
	OSParamsPrivate map[string]secret.Secret
	// OSParamsSecret is only given to the create script (never stored, never
	// logged); it overrides OSParams.
	OSParamsSecret map[string]secret.Secret
	DebugLevel     int
}

// Disk is one instance disk as the scripts see it.
type Disk struct {
	UUID, Name   string
	Path         string // block device or file; empty when there is none
	URI          string // userspace access URI, if any
	SizeMiB      int64
	Access       string // "rw" or "ro"
	BackendType  string // "block" or "file:<driver>", e.g. "file:loop"
	FrontendType string // defaults to the hvparam disk_type when empty
}

// NIC is one instance NIC as the scripts see it. The Network* fields are set
// when the NIC is connected to a network.
type NIC struct {
	MAC, UUID, Name, IP string
	Mode, Link          string // nicparams
	FrontendType        string // defaults to the hvparam nic_type when empty

	NetworkName, NetworkUUID string
	NetworkTags              []string
	NetworkSubnet            string
	NetworkGateway           string
	NetworkSubnet6           string
	NetworkGateway6          string
	NetworkMACPrefix         string
}

// envMap collects variables; it renders sorted "K=V" entries so environments
// compare and read deterministically.
type envMap map[string]string

func (e envMap) list() []string {
	out := make([]string, 0, len(e))
	for _, k := range slices.Sorted(maps.Keys(e)) {
		out = append(out, k+"="+e[k])
	}
	return out
}

// CoreEnv is the environment every script gets: API version, OS name,
// variant, debug level, OSP_* parameters and PATH. variant is the one from
// the instance's OS name, possibly empty; an OS with variants then gets its
// first listed variant.
func CoreEnv(o *OS, variant string, params map[string]string, debug int) []string {
	return coreEnv(o, variant, params, debug).list()
}

func coreEnv(o *OS, variant string, params map[string]string, debug int) envMap {
	e := envMap{
		"OS_API_VERSION": strconv.Itoa(o.APIVersion),
		"OS_NAME":        o.Name,
		"DEBUG_LEVEL":    strconv.Itoa(debug),
		"PATH":           ScriptPath,
	}
	v := ""
	if o.hasVariants() {
		v = variant
		if v == "" {
			v = o.Variants[0]
		}
	}
	e["OS_VARIANT"] = v
	for name, val := range params {
		e[ParamEnvName(name)] = val
	}
	return e
}

// ParamEnvName is the variable carrying OS parameter name: "OSP_" and the
// name upper-cased with '-' replaced by '_'.
func ParamEnvName(name string) string {
	return "OSP_" + strings.ReplaceAll(strings.ToUpper(name), "-", "_")
}

// InstanceEnv is the environment of the instance scripts (create, rename,
// import, export) without the script-specific extras. Secret OS parameters
// are not included: only the create run receives them.
func InstanceEnv(o *OS, inst Instance) []string {
	return instanceEnv(o, inst).list()
}

func instanceEnv(o *OS, inst Instance) envMap {
	_, variant := SplitName(inst.OS)
	e := coreEnv(o, variant, inst.OSParams, inst.DebugLevel)

	e["INSTANCE_NAME"] = inst.Name
	e["INSTANCE_OS"] = inst.OS
	e["INSTANCE_UUID"] = inst.UUID
	e["INSTANCE_CTIME"] = pyFloat(inst.CTime)
	e["INSTANCE_MTIME"] = pyFloat(inst.MTime)
	e["INSTANCE_PRIMARY_NODE"] = inst.PrimaryNodeUUID
	e["INSTANCE_SECONDARY_NODES"] = strings.Join(inst.SecondaryNodeUUIDs, " ")
	e["HYPERVISOR"] = inst.Hypervisor
	e["DISK_COUNT"] = strconv.Itoa(len(inst.Disks))
	e["NIC_COUNT"] = strconv.Itoa(len(inst.NICs))

	hvDisk, hasHVDisk := inst.HVParams[hvDiskType]
	for i, d := range inst.Disks {
		p := "DISK_" + strconv.Itoa(i) + "_"
		e[p+"ACCESS"] = d.Access
		e[p+"UUID"] = d.UUID
		e[p+"SIZE"] = strconv.FormatInt(d.SizeMiB, 10)
		setIf(e, p+"PATH", d.Path)
		setIf(e, p+"URI", d.URI)
		setIf(e, p+"NAME", d.Name)
		setIf(e, p+"BACKEND_TYPE", d.BackendType)
		switch {
		case d.FrontendType != "":
			e[p+"FRONTEND_TYPE"] = d.FrontendType
		case hasHVDisk:
			e[p+"FRONTEND_TYPE"] = hvDisk
		}
	}

	hvNIC, hasHVNIC := inst.HVParams[hvNICType]
	for i, n := range inst.NICs {
		p := "NIC_" + strconv.Itoa(i) + "_"
		e[p+"MAC"] = n.MAC
		e[p+"UUID"] = n.UUID
		e[p+"MODE"] = n.Mode
		setIf(e, p+"NAME", n.Name)
		setIf(e, p+"IP", n.IP)
		if n.Mode == "bridged" {
			e[p+"BRIDGE"] = n.Link
		}
		setIf(e, p+"LINK", n.Link)
		switch {
		case n.FrontendType != "":
			e[p+"FRONTEND_TYPE"] = n.FrontendType
		case hasHVNIC:
			e[p+"FRONTEND_TYPE"] = hvNIC
		}
		if n.NetworkUUID != "" || n.NetworkName != "" {
			e[p+"NETWORK_NAME"] = n.NetworkName
			e[p+"NETWORK_UUID"] = n.NetworkUUID
			e[p+"NETWORK_TAGS"] = strings.Join(n.NetworkTags, " ")
			setIf(e, p+"NETWORK_SUBNET", n.NetworkSubnet)
			setIf(e, p+"NETWORK_GATEWAY", n.NetworkGateway)
			setIf(e, p+"NETWORK_SUBNET6", n.NetworkSubnet6)
			setIf(e, p+"NETWORK_GATEWAY6", n.NetworkGateway6)
			setIf(e, p+"NETWORK_MAC_PREFIX", n.NetworkMACPrefix)
		}
	}

	for k, v := range inst.OSParamsPrivate {
		e[ParamEnvName(k)] = v.Reveal()
	}
	for k, v := range inst.BEParams {
		e["INSTANCE_BE_"+k] = v
	}
	for k, v := range inst.HVParams {
		e["INSTANCE_HV_"+k] = v
	}
	return e
}

func setIf(e envMap, k, v string) {
	if v != "" {
		e[k] = v
	}
}

// pyFloat formats f the way Python's str() does, which is how Ganeti renders
// INSTANCE_CTIME/MTIME: shortest round-trip digits, positional notation with
// at least one decimal for exponents in [-4, 16), scientific otherwise.
func pyFloat(f float64) string {
	switch {
	case math.IsNaN(f):
		return "nan"
	case math.IsInf(f, 1):
		return "inf"
	case math.IsInf(f, -1):
		return "-inf"
	}
	sci := strconv.FormatFloat(f, 'e', -1, 64)
	exp, _ := strconv.Atoi(sci[strings.LastIndexByte(sci, 'e')+1:])
	if exp < -4 || exp >= 16 {
		return sci
	}
	s := strconv.FormatFloat(f, 'f', -1, 64)
	if !strings.Contains(s, ".") {
		s += ".0"
	}
	return s
}
