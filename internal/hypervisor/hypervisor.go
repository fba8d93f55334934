// Package hypervisor defines what the node daemon asks of a hypervisor: start,
// stop and inspect instances, report node resources, open the serial console and
// check hypervisor parameters. Implementations live in fake/ (no guest, for
// tests and development clusters) and kvm/ (one qemu process per instance).
//
// Parameter names and values follow Ganeti's KVM hypervisor (kernel_path,
// serial_console, nic_type, ...), so configurations and RAPI clients written
// for Ganeti carry over.
package hypervisor

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/corral/corral/internal/ecode"
	"github.com/corral/corral/internal/uidpool"
)

// Hypervisor names.
const (
	Fake = "fake"
	KVM  = "kvm"
)

// NIC modes (Ganeti's nic_mode values this project supports).
const (
	NICModeBridged = "bridged"
	NICModeRouted  = "routed"
)

// DiskSpec is one disk as the hypervisor sees it: a file or block device the
// caller has already created and made accessible to the hypervisor's user.
type DiskSpec struct {
	Index    int
	Path     string
	SizeMiB  int64
	ReadOnly bool
	UUID     string
	// RBD, when set, is a Ceph image the hypervisor opens itself through
	// librbd; Path is then only its name for operators.
	RBD *RBDImage
}

// RBDImage is a Ceph RBD image and the node's files that reach it. The
// hypervisor hands its confined process copies of conf and of the one
// client's key in keyring, never the node's files themselves.
type RBDImage struct {
	Pool, Image string
	Client      string // cephx user without "client."
	Conf        string // the node's ceph.conf
	Keyring     string // the node's keyring holding client's key
}

// NICSpec is one network interface. Tap is the host device name, created by the
// caller (see internal/netdev) before Start.
type NICSpec struct {
	Index int
	MAC   string
	Mode  string // NICModeBridged or NICModeRouted
	Link  string
	IP    string
	Tap   string
}

// InstanceSpec is everything a hypervisor needs to run an instance.
type InstanceSpec struct {
	Name      string
	UUID      string
	MemoryMiB int64
	VCPUs     int
	// HVParams uses Ganeti's names; keys missing here take DefaultParams values.
	HVParams map[string]string
	// NetworkPort is Ganeti's per-instance network_port: the TCP port of the
	// VNC console when vnc_bind_address is an IP address (display = port-5900).
	NetworkPort int
	Disks       []DiskSpec
	NICs        []NICSpec
	// UIDPool is the cluster's uid pool, used by security_model pool.
	UIDPool uidpool.Pool
	// Incoming starts the instance as the destination of a migration: it
	// waits for its state (see Migrator) instead of booting.
	Incoming bool
}

// State is what a hypervisor reports about an instance it runs.
type State string

const (
	StateRunning State = "running"
	StateStopped State = "stopped" // process alive, guest shut down
	StatePaused  State = "paused"
	StateCrashed State = "crashed"
)

// RunningInstance is one instance known to the hypervisor.
type RunningInstance struct {
	Name      string
	UUID      string
	State     State
	MemoryMiB int64
	VCPUs     int
	PID       int // 0 when there is no process (fake)
	StartedAt time.Time
	// Confinement is nil where the hypervisor does not confine (fake).
	Confinement *Confinement
}

// NodeResources is the node's memory and CPU as the hypervisor sees them. Disk
// space is reported by the storage layer, not here.
type NodeResources struct {
	MemoryTotalMiB int64
	// MemoryFreeMiB is what new instances may still use: memory promised to
	// running instances counts as used even where the guest has not touched it.
	MemoryFreeMiB int64
	// MemoryNodeMiB is what the node itself uses, instances excluded (Ganeti's
	// memory_dom0).
	MemoryNodeMiB int64
	CPUs          int
	Hypervisor    string
}

// Hypervisor runs instances on one node.
type Hypervisor interface {
	Name() string
	// Start boots the instance. Starting an instance that already runs with the
	// same UUID succeeds without doing anything.
	Start(ctx context.Context, spec InstanceSpec) error
	// Stop asks the guest to shut down (ACPI power button) and kills it after
	// timeout; force kills at once. Stopping an instance that does not run
	// succeeds.
	Stop(ctx context.Context, name string, timeout time.Duration, force bool) error
	Reboot(ctx context.Context, name string) error
	List(ctx context.Context) ([]RunningInstance, error)
	// Info returns nil, nil when the instance does not run.
	Info(ctx context.Context, name string) (*RunningInstance, error)
	NodeInfo(ctx context.Context) (NodeResources, error)
	// Console connects to the instance's serial console.
	Console(ctx context.Context, name string) (io.ReadWriteCloser, error)
	// ConsoleLog is the path of the file holding all console output since the
	// instance started, "" when there is none.
	ConsoleLog(name string) string
	// ValidateParams checks a filled hypervisor parameter set: unknown keys and
	// bad values are ecode.Inval errors.
	ValidateParams(hv map[string]string) error
}

// CheckSpec validates the parts of a spec every implementation relies on.
func CheckSpec(spec InstanceSpec) error {
	if err := CheckName(spec.Name); err != nil {
		return err
	}
	if !ValidUUID(spec.UUID) {
		return ecode.Errorf(ecode.Inval, "instance %s: invalid uuid %q", spec.Name, spec.UUID)
	}
	if spec.MemoryMiB <= 0 {
		return ecode.Errorf(ecode.Inval, "instance %s: memory must be positive, got %d MiB", spec.Name, spec.MemoryMiB)
	}
	if spec.VCPUs <= 0 {
		return ecode.Errorf(ecode.Inval, "instance %s: vcpus must be positive, got %d", spec.Name, spec.VCPUs)
	}
	for i, d := range spec.Disks {
		if d.Path == "" {
			return ecode.Errorf(ecode.Inval, "instance %s: disk %d has no path", spec.Name, i)
		}
	}
	for i, n := range spec.NICs {
		switch n.Mode {
		case NICModeBridged, NICModeRouted, "":
		default:
			return ecode.Errorf(ecode.Inval, "instance %s: nic %d: unsupported mode %q", spec.Name, i, n.Mode)
		}
		if n.MAC != "" && !validMAC(n.MAC) {
			return ecode.Errorf(ecode.Inval, "instance %s: nic %d: invalid MAC %q", spec.Name, i, n.MAC)
		}
	}
	return nil
}

// CheckName accepts host-name-like instance names. Names become file names in
// state directories, so anything that could escape a directory is refused.
func CheckName(name string) error {
	if name == "" || len(name) > 255 || name[0] == '.' || name[0] == '-' {
		return ecode.Errorf(ecode.Inval, "invalid instance name %q", name)
	}
	for _, r := range name {
		ok := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '-' || r == '_'
		if !ok {
			return ecode.Errorf(ecode.Inval, "invalid instance name %q: character %q not allowed", name, r)
		}
	}
	return nil
}

// ValidUUID reports whether s has the canonical 8-4-4-4-12 hex form qemu's
// -uuid accepts.
func ValidUUID(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i, c := range s {
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return false
			}
		default:
			if !isHex(c) {
				return false
			}
		}
	}
	return true
}

func validMAC(s string) bool {
	parts := strings.Split(s, ":")
	if len(parts) != 6 {
		return false
	}
	for _, p := range parts {
		if len(p) != 2 || !isHex(rune(p[0])) || !isHex(rune(p[1])) {
			return false
		}
	}
	return true
}

func isHex(c rune) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

// NotRunning is the error for operations that need a running instance.
func NotRunning(name string) error {
	return ecode.Errorf(ecode.State, "instance %s is not running", name)
}

// MergeParams fills hv with defaults for the keys it lacks; hv wins.
func MergeParams(defaults, hv map[string]string) map[string]string {
	out := make(map[string]string, len(defaults)+len(hv))
	for k, v := range defaults {
		out[k] = v
	}
	for k, v := range hv {
		out[k] = v
	}
	return out
}

// errorf is a shorthand for the Inval errors parameter checks return.
func errorf(format string, args ...any) error {
	return ecode.Errorf(ecode.Inval, "%s", fmt.Sprintf(format, args...))
}
