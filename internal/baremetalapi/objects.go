package baremetalapi

import (
	"github.com/corral/corral/internal/baremetal/driver"
	"github.com/corral/corral/internal/config"
)

// NodeObject is m as the API shows it at MaxVersion, secrets masked,
// without links: what `corral baremetal node show` prints, so that it has
// the keys and values of `openstack baremetal node show`.
func NodeObject(m *config.Machine) map[string]any {
	out := renderNode(m, MaxVersion, "", nil)
	for _, k := range []string{"links", "ports", "states", "portgroups", "volume"} {
		delete(out, k)
	}
	return out
}

// PortObject is p as the API shows it at MaxVersion, without links.
func PortObject(p *config.MachinePort) map[string]any {
	return portDoc(p, MaxVersion, nil)
}

// ValidateMachine checks what can be checked of m without touching the
// hardware: the driver_info its power and management drivers need, and
// that no interface is a no-op one. It returns a result per interface
// name (power, boot, rescue, ...).
func ValidateMachine(m *config.Machine) (map[string]InterfaceValidation, error) {
	var ifaces map[string]string
	if err := roundTrip(m.Interfaces, &ifaces); err != nil {
		return nil, err
	}
	out := map[string]InterfaceValidation{}
	_, derr := driver.New(m.Driver, m.DriverInfo, driver.WithMachine(m.UUID))
	for field, impl := range ifaces {
		name := field[:len(field)-len("_interface")]
		v := InterfaceValidation{Result: true}
		switch {
		case impl == "" || impl == "noop" || len(impl) > 3 && impl[:3] == "no-":
			v = InterfaceValidation{Reason: name + " interface is not supported (" + impl + ")"}
		case (name == "power" || name == "management") && derr != nil:
			v = InterfaceValidation{Reason: derr.Error()}
		}
		out[name] = v
	}
	return out, nil
}
