package bmc

import (
	"context"
	"fmt"
	"io"

	"github.com/corral/corral/internal/ecode"
)

// ipmi_sim's chassis_control protocol: ipmi_sim runs "PROG DIR get PARM..."
// and reads "PARM:VALUE" lines, and runs "PROG DIR set PARM VALUE ..." for
// each change. Parameters: power (0|1), reset (1), shutdown (1, the soft
// power button), boot (none|pxe|cdrom|bios|default; ipmitool's "disk"
// arrives as "default").

// ChassisGet answers a "get" for each parameter named.
func ChassisGet(m *Machine, params []string, w io.Writer) error {
	for _, p := range params {
		var v string
		switch p {
		case "power":
			v = "0"
			if m.PoweredOn() {
				v = "1"
			}
		case "boot":
			b, err := m.BootOverride()
			if err != nil {
				return err
			}
			v = chassisBootName(b.Device)
		default:
			return ecode.Errorf(ecode.Inval, "chassis parameter %q is not power or boot", p)
		}
		if _, err := fmt.Fprintf(w, "%s:%s\n", p, v); err != nil {
			return fmt.Errorf("chassis answer: %w", err)
		}
	}
	return nil
}

// chassisBootName is the protocol's word for a boot device: IPMI has no
// separate "disk" (it is the default device).
func chassisBootName(dev string) string {
	switch dev {
	case BootPXE, BootCDROM, BootBIOS:
		return dev
	}
	return "default"
}

// ChassisSet applies "set" pairs in order.
func ChassisSet(ctx context.Context, m *Machine, pairs []string) error {
	if len(pairs) == 0 || len(pairs)%2 != 0 {
		return ecode.Errorf(ecode.Inval, "chassis set needs PARAM VALUE pairs, got %d words", len(pairs))
	}
	for i := 0; i < len(pairs); i += 2 {
		if err := chassisSetOne(ctx, m, pairs[i], pairs[i+1]); err != nil {
			return err
		}
	}
	return nil
}

func chassisSetOne(ctx context.Context, m *Machine, param, value string) error {
	switch param {
	case "power":
		switch value {
		case "1":
			return m.PowerOn(ctx)
		case "0":
			return m.PowerOff(ctx)
		}
	case "reset":
		if value == "1" {
			return m.Reset(ctx)
		}
		if value == "0" {
			return nil
		}
	case "shutdown":
		if value == "1" {
			return m.SoftOff(ctx)
		}
		if value == "0" {
			return nil
		}
	case "boot":
		dev := value
		switch value {
		case "default", "none":
			dev = BootNone
		case "disk", "hdd":
			dev = BootDisk
		}
		if !ValidBootDevice(dev) {
			break
		}
		// ipmi_sim keeps the once/persistent flag of the boot
		// parameter itself and does not pass it on: the device stays
		// until it is changed again.
		return m.SetBootOverride(BootOverride{Device: dev, Persistent: true})
	default:
		return ecode.Errorf(ecode.Inval, "chassis parameter %q is not power, reset, shutdown or boot", param)
	}
	return ecode.Errorf(ecode.Inval, "chassis %s value %q is not valid", param, value)
}
