package baremetal

import (
	"fmt"

	"github.com/google/uuid"

	"github.com/corral/corral/internal/config"
	"github.com/corral/corral/internal/ecode"
	"github.com/corral/corral/internal/opcodes"
)

// machineFields are the fields a create sets and a modify changes, by the
// API's name. The states, the reservation and the agent's bookkeeping are
// not among them: only the conductor's jobs change those.
var machineFields = map[string]func(m *config.Machine, v any) error{
	"name":            setString(func(m *config.Machine) *string { return &m.Name }),
	"description":     setString(func(m *config.Machine) *string { return &m.Description }),
	"driver":          setString(func(m *config.Machine) *string { return &m.Driver }),
	"instance_uuid":   setString(func(m *config.Machine) *string { return &m.InstanceUUID }),
	"conductor_group": setString(func(m *config.Machine) *string { return &m.ConductorGroup }),
	"resource_class":  setString(func(m *config.Machine) *string { return &m.ResourceClass }),
	"owner":           setString(func(m *config.Machine) *string { return &m.Owner }),
	"lessee":          setString(func(m *config.Machine) *string { return &m.Lessee }),
	"driver_info":     setDict(func(m *config.Machine) *map[string]any { return &m.DriverInfo }),
	"properties":      setDict(func(m *config.Machine) *map[string]any { return &m.Properties }),
	"instance_info":   setDict(func(m *config.Machine) *map[string]any { return &m.InstanceInfo }),
	"extra":           setDict(func(m *config.Machine) *map[string]any { return &m.Extra }),
	"maintenance": func(m *config.Machine, v any) error {
		b, ok := v.(bool)
		if !ok {
			return ecode.Errorf(ecode.Inval, "maintenance must be a boolean")
		}
		m.Maintenance = b
		if !b {
			m.MaintenanceReason, m.Fault = "", ""
		}
		return nil
	},
	"automated_clean": func(m *config.Machine, v any) error {
		switch b := v.(type) {
		case nil:
			m.AutomatedClean = nil
		case bool:
			m.AutomatedClean = &b
		default:
			return ecode.Errorf(ecode.Inval, "automated_clean must be a boolean or null")
		}
		return nil
	},
}

func init() {
	for _, f := range opcodes.MachineInterfaceFields {
		iface := f[:len(f)-len("_interface")]
		machineFields[f] = func(m *config.Machine, v any) error {
			s, ok := v.(string)
			if v != nil && !ok {
				return ecode.Errorf(ecode.Inval, "%s must be a string or null", f)
			}
			*interfaceField(&m.Interfaces, iface) = s // "" takes the driver's default
			return nil
		}
	}
}

// freeFields may change while a job holds the machine, as Ironic lets
// them change on a node in a wait state.
var freeFields = map[string]bool{"maintenance": true, "description": true, "extra": true, "properties": true, "owner": true, "lessee": true, "resource_class": true}

func onlyFreeFields(changes map[string]any) bool {
	for k := range changes {
		if !freeFields[k] {
			return false
		}
	}
	return true
}

func setString(field func(*config.Machine) *string) func(*config.Machine, any) error {
	return func(m *config.Machine, v any) error {
		switch s := v.(type) {
		case nil:
			*field(m) = ""
		case string:
			*field(m) = s
		default:
			return fmt.Errorf("must be a string or null, not %T", v)
		}
		return nil
	}
}

func setDict(field func(*config.Machine) *map[string]any) func(*config.Machine, any) error {
	return func(m *config.Machine, v any) error {
		switch d := v.(type) {
		case nil:
			*field(m) = nil
		case map[string]any:
			*field(m) = config.CloneDict(d)
		default:
			return fmt.Errorf("must be a dictionary or null, not %T", v)
		}
		return nil
	}
}

// applyMachineChanges sets each field of changes on m; an unknown field or
// a value of the wrong type is refused naming it.
func applyMachineChanges(m *config.Machine, changes map[string]any) error {
	for k, v := range changes {
		set, ok := machineFields[k]
		if !ok {
			return ecode.Errorf(ecode.Inval, "Field %s cannot be changed.", k)
		}
		if err := set(m, v); err != nil {
			if _, ok := ecode.As(err); ok {
				return err
			}
			return ecode.Errorf(ecode.Inval, "Invalid value for %s: %s", k, err.Error())
		}
	}
	if m.Driver == "" {
		return ecode.Errorf(ecode.Inval, "A node needs a driver.")
	}
	return nil
}

// checkMachineName applies Ironic's rule for logical names: unreserved
// URI characters only (letters, digits, - . _ ~), at most 255 of them,
// and not a UUID, which would be ambiguous in a path.
func checkMachineName(name string) error {
	if name == "" {
		return nil
	}
	bad := len(name) > 255
	for i := 0; i < len(name) && !bad; i++ {
		c := name[i]
		bad = !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '.' || c == '_' || c == '~')
	}
	if _, err := uuid.Parse(name); err == nil {
		bad = true
	}
	if bad {
		return ecode.Errorf(ecode.Inval, "Expected a logical name but received %s.", name)
	}
	return nil
}
