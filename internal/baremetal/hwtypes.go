package baremetal

import (
	"slices"
	"sort"

	"github.com/corral/corral/internal/config"
	"github.com/corral/corral/internal/ecode"
	"github.com/corral/corral/internal/machinewire"
)

// Interface names, as the Bare Metal API's *_interface fields drop their
// suffix.
const (
	IfBios       = "bios"
	IfBoot       = "boot"
	IfConsole    = "console"
	IfDeploy     = "deploy"
	IfInspect    = "inspect"
	IfManagement = "management"
	IfNetwork    = "network"
	IfPower      = "power"
	IfRaid       = "raid"
	IfRescue     = "rescue"
	IfStorage    = "storage"
	IfVendor     = "vendor"
)

// Interfaces lists every hardware interface, in the API's order.
var Interfaces = []string{IfBios, IfBoot, IfConsole, IfDeploy, IfInspect, IfManagement, IfNetwork, IfPower, IfRaid, IfRescue, IfStorage, IfVendor}

// A HardwareType is what Ironic calls a driver: which implementation of
// each interface a machine of this kind may use, the first being the
// default.
type HardwareType = machinewire.HardwareType

// defaultImpl is the implementation of iface a new machine of h gets.
func defaultImpl(h HardwareType, iface string) string {
	if l := h.Enabled[iface]; len(l) > 0 {
		return l[0]
	}
	return ""
}

// The implementations that are the same for every hardware type.
var commonInterfaces = map[string][]string{
	IfBios:    {"no-bios"},
	IfNetwork: {"noop", "flat"},
	IfRaid:    {"no-raid"},
	IfStorage: {"noop"},
	IfVendor:  {"no-vendor"},
	IfConsole: {"no-console"},
}

func hardwareType(name string, own map[string][]string) HardwareType {
	h := HardwareType{Name: name, Enabled: map[string][]string{}}
	for k, v := range commonInterfaces {
		h.Enabled[k] = v
	}
	for k, v := range own {
		h.Enabled[k] = v
	}
	return h
}

// hardwareTypes are the drivers Corral has. fake-hardware acts on nothing
// and is there to exercise the state machine (with the agent interfaces,
// as in Ironic, its agent may be any program speaking the agent's API); ipmi and redfish drive real
// BMCs from the conductor's node, boot the agent's ramdisk and deploy and
// rescue through it. The bridged network interface moves a machine's
// ports between the conductor's bridges (provisioning, rescue, tenant),
// as Ironic's neutron interface moves them between networks.
var hardwareTypes = map[string]HardwareType{
	"fake-hardware": hardwareType("fake-hardware", map[string][]string{
		IfBoot:       {"fake"},
		IfDeploy:     {"fake", "direct"},
		IfInspect:    {"fake", "no-inspect"},
		IfManagement: {"fake"},
		IfPower:      {"fake"},
		IfRescue:     {"fake", "agent", "no-rescue"},
	}),
	"ipmi": hardwareType("ipmi", map[string][]string{
		IfNetwork:    {"noop", "flat", "bridged"},
		IfBoot:       {"ipxe", "pxe", "fake"},
		IfDeploy:     {"direct", "fake"},
		IfInspect:    {"no-inspect", "fake"},
		IfManagement: {"ipmitool"},
		IfPower:      {"ipmitool"},
		IfRescue:     {"agent", "no-rescue", "fake"},
		// ipmitool-sol: the conductor's node carries `ipmitool sol
		// activate` to `corral baremetal node console` (no-console stays
		// the default, as in Ironic).
		IfConsole: {"no-console", "ipmitool-sol"},
	}),
	"redfish": hardwareType("redfish", map[string][]string{
		IfNetwork:    {"noop", "flat", "bridged"},
		IfBoot:       {"redfish-virtual-media", "ipxe", "pxe", "fake"},
		IfDeploy:     {"direct", "fake"},
		IfInspect:    {"no-inspect", "fake"},
		IfManagement: {"redfish"},
		IfPower:      {"redfish"},
		IfRescue:     {"agent", "no-rescue", "fake"},
	}),
}

// HardwareTypes lists the drivers, sorted by name.
func HardwareTypes() []HardwareType {
	out := make([]HardwareType, 0, len(hardwareTypes))
	for _, h := range hardwareTypes {
		out = append(out, h)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// LookupHardwareType finds a driver by name.
func LookupHardwareType(name string) (HardwareType, error) {
	h, ok := hardwareTypes[name]
	if !ok {
		return HardwareType{}, ecode.Errorf(ecode.Inval, "Could not find the following driver(s) or hardware type(s): %s.", name)
	}
	return h, nil
}

// interfaceField points at the field of iface in is.
func interfaceField(is *config.MachineInterfaces, iface string) *string {
	switch iface {
	case IfBios:
		return &is.Bios
	case IfBoot:
		return &is.Boot
	case IfConsole:
		return &is.Console
	case IfDeploy:
		return &is.Deploy
	case IfInspect:
		return &is.Inspect
	case IfManagement:
		return &is.Management
	case IfNetwork:
		return &is.Network
	case IfPower:
		return &is.Power
	case IfRaid:
		return &is.Raid
	case IfRescue:
		return &is.Rescue
	case IfStorage:
		return &is.Storage
	case IfVendor:
		return &is.Vendor
	}
	return nil
}

// fillInterfaces gives every interface left empty the driver's default
// and refuses one the driver does not enable, with Ironic's message.
func fillInterfaces(m *config.Machine) error {
	h, err := LookupHardwareType(m.Driver)
	if err != nil {
		return err
	}
	for _, iface := range Interfaces {
		f := interfaceField(&m.Interfaces, iface)
		if *f == "" {
			*f = defaultImpl(h, iface)
			continue
		}
		if !slices.Contains(h.Enabled[iface], *f) {
			return ecode.Errorf(ecode.Inval, "Could not find the following interface in the 'ironic.hardware.interfaces.%s' entrypoint: %s. Valid interfaces are %v.", iface, *f, h.Enabled[iface])
		}
	}
	return nil
}
