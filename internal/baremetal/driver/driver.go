// Package driver talks to machines' BMCs: it is what corral-node calls for
// every power and boot-device action on a bare-metal machine. The drivers
// and their driver_info keys are the Bare Metal API's: fake-hardware (state
// in memory, the test double), ipmi (ipmitool over IPMI 2.0 lanplus) and
// redfish (HTTPS).
package driver

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/corral/corral/internal/ecode"
)

// Power states, as the Bare Metal API names them. PowerState reports the
// first two; SetPower accepts all.
const (
	PowerOn       = "power on"
	PowerOff      = "power off"
	Rebooting     = "rebooting"
	SoftPowerOff  = "soft power off"
	SoftRebooting = "soft rebooting"
)

// Boot devices SetBootDevice accepts and BootDevice reports ("" when the
// BMC has no override set).
const (
	BootPXE   = "pxe"
	BootCDROM = "cdrom"
	BootDisk  = "disk"
	BootBIOS  = "bios"
)

// Driver names.
const (
	DriverFakeHardware = "fake-hardware"
	DriverIPMI         = "ipmi"
	DriverRedfish      = "redfish"
)

// DefaultPowerTimeout is how long SetPower waits for the machine to reach
// the target state when the caller gives no timeout (the Bare Metal
// service's power_state_change_timeout).
const DefaultPowerTimeout = 60 * time.Second

// Driver is one machine's BMC.
type Driver interface {
	// Validate checks that the BMC answers with these credentials.
	Validate(ctx context.Context) error
	// PowerState returns PowerOn or PowerOff.
	PowerState(ctx context.Context) (string, error)
	// SetPower moves the machine to target and waits until it is there
	// or timeout passes (DefaultPowerTimeout when 0).
	SetPower(ctx context.Context, target string, timeout time.Duration) error
	// SetBootDevice sets the device of the next boot, or of every boot
	// when persistent.
	SetBootDevice(ctx context.Context, dev string, persistent bool) error
	// BootDevice returns the boot device override ("" when none).
	BootDevice(ctx context.Context) (string, error)
}

// VirtualMedia is a BMC with a virtual CD drive.
type VirtualMedia interface {
	// InsertCD makes the image at url the machine's CD.
	InsertCD(ctx context.Context, url string) error
	// EjectCD empties the virtual CD drive.
	EjectCD(ctx context.Context) error
}

// Option adjusts New.
type Option func(*options)

type options struct {
	machineUUID string
}

// WithMachine names the machine the driver acts for; fake-hardware keeps
// its state under this uuid unless driver_info names a fake_machine_id.
func WithMachine(uuid string) Option { return func(o *options) { o.machineUUID = uuid } }

// New makes the driver named driver for a machine with this driver_info.
// Missing or invalid keys are ecode.Inval errors naming the key.
func New(driver string, info map[string]any, opts ...Option) (Driver, error) {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	if err := checkKnownKeys(driver, info); err != nil {
		return nil, err
	}
	switch driver {
	case DriverFakeHardware:
		return newFake(info, o)
	case DriverIPMI:
		return newIPMI(info)
	case DriverRedfish:
		return newRedfish(info)
	}
	return nil, ecode.Errorf(ecode.Inval, "unknown driver %q (known: %s, %s, %s)", driver, DriverFakeHardware, DriverIPMI, DriverRedfish)
}

// Names lists the drivers.
func Names() []string { return []string{DriverFakeHardware, DriverIPMI, DriverRedfish} }

// Property is one driver_info key of a driver.
type Property struct {
	Name        string
	Description string
	Required    bool
	// Secret keys are masked whenever driver_info is shown.
	Secret bool
}

var properties = map[string][]Property{
	DriverFakeHardware: {
		{Name: "fake_machine_id", Description: "Key the fake BMC keeps this machine's power state and boot device under; the machine's UUID when not set. Optional."},
	},
	DriverIPMI: {
		{Name: "ipmi_address", Description: "IP address or host name of the BMC. Required.", Required: true},
		{Name: "ipmi_port", Description: "UDP port of the BMC. Optional, 623 by default."},
		{Name: "ipmi_username", Description: "User name on the BMC. Optional; none means the anonymous user."},
		{Name: "ipmi_password", Description: "Password of the BMC user. Optional.", Secret: true},
		{Name: "ipmi_cipher_suite", Description: "IPMI 2.0 cipher suite id for lanplus (e.g. 3 or 17). Optional; ipmitool's default when not set."},
		{Name: "ipmi_priv_level", Description: "Privilege level: ADMINISTRATOR (default), OPERATOR, USER or CALLBACK. Optional."},
	},
	DriverRedfish: {
		{Name: "redfish_address", Description: "URL of the Redfish service, e.g. https://bmc.example.net; https:// is assumed without a scheme. Required.", Required: true},
		{Name: "redfish_system_id", Description: "Path of the ComputerSystem, e.g. /redfish/v1/Systems/1. Optional when the service has exactly one system."},
		{Name: "redfish_username", Description: "User name for HTTP basic authentication. Optional."},
		{Name: "redfish_password", Description: "Password for HTTP basic authentication. Optional.", Secret: true},
		{Name: "redfish_verify_ca", Description: "true (default) to verify the TLS certificate with the system's CAs, false not to verify, or the path of a CA bundle. Optional."},
	},
}

// Properties describes the driver_info keys of a driver, sorted by name.
func Properties(driver string) ([]Property, error) {
	p, ok := properties[driver]
	if !ok {
		return nil, ecode.Errorf(ecode.NoEnt, "unknown driver %q", driver)
	}
	out := slices.Clone(p)
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// SecretKeys returns the driver_info keys of driver whose values are
// secret (empty for an unknown driver).
func SecretKeys(driver string) []string {
	var keys []string
	for _, p := range properties[driver] {
		if p.Secret {
			keys = append(keys, p.Name)
		}
	}
	return keys
}

// checkKnownKeys refuses driver_info keys of another driver's family, the
// usual slip when a machine changes driver. Keys of no driver (deploy_kernel,
// rescue_ramdisk, ...) belong to other interfaces and pass.
func checkKnownKeys(driver string, info map[string]any) error {
	own := map[string]bool{}
	for _, p := range properties[driver] {
		own[p.Name] = true
	}
	for other, props := range properties {
		if other == driver {
			continue
		}
		for _, p := range props {
			if _, set := info[p.Name]; set && !own[p.Name] {
				return ecode.Errorf(ecode.Inval, "driver_info key %s belongs to the %s driver, not %s", p.Name, other, driver)
			}
		}
	}
	return nil
}

// checkPowerTarget refuses an unknown SetPower target.
func checkPowerTarget(target string) error {
	switch target {
	case PowerOn, PowerOff, Rebooting, SoftPowerOff, SoftRebooting:
		return nil
	}
	return ecode.Errorf(ecode.Inval, "power state %q is not one of %q, %q, %q, %q, %q",
		target, PowerOn, PowerOff, Rebooting, SoftPowerOff, SoftRebooting)
}

func checkBootDevice(dev string) error {
	switch dev {
	case BootPXE, BootCDROM, BootDisk, BootBIOS:
		return nil
	}
	return ecode.Errorf(ecode.Inval, "boot device %q is not one of pxe, cdrom, disk, bios", dev)
}

// waitPower polls state until it reports want or timeout passes.
func waitPower(ctx context.Context, state func(context.Context) (string, error), want string, timeout, every time.Duration) error {
	deadline := time.Now().Add(timeout)
	last := ""
	for {
		got, err := state(ctx)
		if err == nil && got == want {
			return nil
		}
		if err == nil {
			last = got
		}
		if time.Now().After(deadline) {
			if err != nil {
				return ecode.ExecErrorf("machine did not reach %q within %s: %w", want, timeout, err)
			}
			return ecode.ExecErrorf("machine did not reach %q within %s (it is %q)", want, timeout, last)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %q: %w", want, ctx.Err())
		case <-time.After(every):
		}
	}
}
