// Package bmc is Corral's own baseboard management controller for tests and
// development: it powers a qemu "machine" on and off, resets it, keeps its
// boot device and virtual CD, and answers as ipmi_sim's chassis control
// program and as a Redfish service. A machine is a directory holding its
// description (machine.json) and its state (boot override, inserted media,
// qemu's pid file, QMP and serial sockets, serial log).
package bmc

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/corral/corral/internal/atomicfile"
	"github.com/corral/corral/internal/ecode"
)

// Files inside a machine directory.
const (
	ConfigFile  = "machine.json"
	bootFile    = "boot.json"
	mediaFile   = "media.json"
	mediaISO    = "cd.iso"
	pidFile     = "qemu.pid"
	qmpSocket   = "qmp.sock"
	serialSock  = "serial.sock"
	SerialLog   = "serial.log"
	chassisLog  = "chassis.log"
	qemuOutput  = "qemu.out"
	lockFile    = "lock"
	defaultMem  = 256
	maxNameSize = 64
)

// Config describes the qemu machine a directory stands for.
type Config struct {
	// Name is the machine's name: qemu's -name and the Redfish system id.
	Name     string `json:"name"`
	MemoryMB int    `json:"memory_mb,omitempty"`
	// MAC is the address of the machine's one network card.
	MAC string `json:"mac,omitempty"`
	// Network is "user" (qemu's user-mode network), "tap" (the tap device
	// Tap, which must exist, in NetNS if set) or "" for no network card.
	Network string `json:"network,omitempty"`
	// UserNetOptions is appended to the user-mode -netdev (hostfwd=,
	// guestfwd=, tftp=, restrict=on ...).
	UserNetOptions string `json:"user_net_options,omitempty"`
	Tap            string `json:"tap,omitempty"`
	// NetNS is a network namespace qemu starts in (ip netns exec).
	NetNS string `json:"netns,omitempty"`
	// Disk is a raw disk image attached as the first virtio disk.
	Disk string `json:"disk,omitempty"`
	// Kernel, Initrd and Append, when set, boot the machine directly when
	// it boots from "disk": they stand in for the operating system
	// installed on it.
	Kernel string `json:"kernel,omitempty"`
	Initrd string `json:"initrd,omitempty"`
	Append string `json:"append,omitempty"`
	// ISO is the CD present when no virtual media is inserted.
	ISO string `json:"iso,omitempty"`
	// Qemu overrides the emulator binary (qemu-system-x86_64).
	Qemu string `json:"qemu,omitempty"`
}

var (
	nameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*$`)
	macRE  = regexp.MustCompile(`^[0-9a-fA-F]{2}(:[0-9a-fA-F]{2}){5}$`)
)

// Validate checks the description before anything uses it.
func (c *Config) Validate() error {
	if !nameRE.MatchString(c.Name) || len(c.Name) > maxNameSize {
		return ecode.Errorf(ecode.Inval, "machine name %q must be letters, digits, '.', '_' or '-' (at most %d)", c.Name, maxNameSize)
	}
	if c.MemoryMB < 0 {
		return ecode.Errorf(ecode.Inval, "machine %s: memory_mb %d is negative", c.Name, c.MemoryMB)
	}
	switch c.Network {
	case "", "user":
	case "tap":
		if c.Tap == "" {
			return ecode.Errorf(ecode.Inval, "machine %s: network tap needs the tap device name", c.Name)
		}
	default:
		return ecode.Errorf(ecode.Inval, "machine %s: network %q is not user, tap or empty", c.Name, c.Network)
	}
	if c.Network != "" && !macRE.MatchString(c.MAC) {
		return ecode.Errorf(ecode.Inval, "machine %s: MAC %q is not six hex pairs", c.Name, c.MAC)
	}
	if (c.Kernel == "") != (c.Initrd == "") {
		return ecode.Errorf(ecode.Inval, "machine %s: kernel and initrd go together", c.Name)
	}
	for _, opt := range []string{c.UserNetOptions, c.Disk, c.Kernel, c.Initrd, c.ISO} {
		if strings.ContainsAny(opt, "\n\x00") {
			return ecode.Errorf(ecode.Inval, "machine %s: a path or option contains a newline or NUL", c.Name)
		}
	}
	return nil
}

// Machine is one machine directory.
type Machine struct {
	Dir    string
	Config Config
}

// Create writes a new machine directory's description.
func Create(dir string, cfg Config) (*Machine, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("machine directory %s: %w", dir, err)
	}
	if err := os.MkdirAll(abs, 0o750); err != nil {
		return nil, fmt.Errorf("machine directory: %w", err)
	}
	data, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("machine description: %w", err)
	}
	if err := atomicfile.WriteFile(filepath.Join(abs, ConfigFile), append(data, '\n'), 0o640); err != nil {
		return nil, fmt.Errorf("machine description: %w", err)
	}
	return &Machine{Dir: abs, Config: cfg}, nil
}

// Open reads a machine directory.
func Open(dir string) (*Machine, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("machine directory %s: %w", dir, err)
	}
	data, err := os.ReadFile(filepath.Join(abs, ConfigFile))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, ecode.Errorf(ecode.NoEnt, "%s is not a machine directory (no %s): %w", abs, ConfigFile, err)
	}
	if err != nil {
		return nil, fmt.Errorf("machine description: %w", err)
	}
	var cfg Config
	if err := json.Unmarshal(data, &cfg); err != nil {
		return nil, ecode.Errorf(ecode.Inval, "machine description %s: %w", filepath.Join(abs, ConfigFile), err)
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Machine{Dir: abs, Config: cfg}, nil
}

func (m *Machine) path(name string) string { return filepath.Join(m.Dir, name) }

// SerialLogPath is the file the machine's serial console is logged to.
func (m *Machine) SerialLogPath() string { return m.path(SerialLog) }

// SerialSocket is the unix socket of the machine's serial console.
func (m *Machine) SerialSocket() string { return m.path(serialSock) }
