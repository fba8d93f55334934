package opcodes

// Bare-metal machines (Corral only; Ganeti has none). The parameters are
// the Bare Metal API's field names, so the API passes a request's fields
// through unchanged. A machine is named by "machine": its name or uuid.

// MachineInterfaceFields are the *_interface fields of a machine.
var MachineInterfaceFields = []string{
	"bios_interface", "boot_interface", "console_interface", "deploy_interface",
	"inspect_interface", "management_interface", "network_interface", "power_interface",
	"raid_interface", "rescue_interface", "storage_interface", "vendor_interface",
}

func machineDefs() []Def {
	machine := Param{Name: "machine", Type: TNEString, Required: true, Doc: "machine name or uuid"}
	fields := []Param{
		{Name: "name", Type: TMaybeString, Default: nil, Doc: "machine name (optional, unique)"},
		{Name: "description", Type: TMaybeString, Default: nil, Doc: "free text"},
		{Name: "driver_info", Type: TAny, Default: nil, Doc: "how to reach the BMC (dict: ipmi_address, ipmi_username, ipmi_password, redfish_address, ...)", Sensitive: Private},
		{Name: "properties", Type: TAny, Default: nil, Doc: "hardware properties (dict: cpus, memory_mb, local_gb, ...)"},
		{Name: "instance_info", Type: TAny, Default: nil, Doc: "what to deploy (dict: image_source, image_checksum or image_os_hash_*, ...)"},
		{Name: "extra", Type: TAny, Default: nil, Doc: "free-form dict"},
		{Name: "instance_uuid", Type: TMaybeString, Default: nil, Doc: "uuid of the workload using the machine"},
		{Name: "conductor_group", Type: TMaybeString, Default: nil, Doc: "which Corral nodes may act on the machine"},
		{Name: "resource_class", Type: TMaybeString, Default: nil, Doc: "scheduling class"},
		{Name: "owner", Type: TMaybeString, Default: nil, Doc: "owning project"},
		{Name: "lessee", Type: TMaybeString, Default: nil, Doc: "leasing project"},
		{Name: "automated_clean", Type: TAny, Default: nil, Doc: "clean on provide and undeploy (bool or null: the cluster's default)"},
	}
	for _, f := range MachineInterfaceFields {
		fields = append(fields, Param{Name: f, Type: TMaybeString, Default: nil, Doc: "implementation of the " + f[:len(f)-len("_interface")] + " interface"})
	}
	return []Def{
		{ID: "OP_MACHINE_CREATE", KeyPrm: "name", Doc: "enroll a bare-metal machine", Params: append([]Param{
			{Name: "driver", Type: TNEString, Required: true, Doc: "hardware type: fake-hardware, ipmi or redfish"},
			{Name: "uuid", Type: TMaybeString, Default: nil, Doc: "uuid to give the machine (default: a new one)"},
			{Name: "provision_state", Type: TString, Default: "enroll", Doc: "state the machine starts in: enroll, or available as the Bare Metal API before version 1.11"},
		}, fields...)},
		{ID: "OP_MACHINE_MODIFY", KeyPrm: "machine", Doc: "change a machine's fields", Params: []Param{machine,
			{Name: "changes", Type: TDict, Required: true, Doc: "new values by field name; null removes an optional field", Sensitive: Private},
			{Name: "serial", Type: TNonNegInt, Default: float64(0), Doc: "refuse the change if the machine's serial number is no longer this one (0: do not check)"},
		}},
		{ID: "OP_MACHINE_REMOVE", KeyPrm: "machine", Doc: "remove a machine and its ports", Params: []Param{machine}},
		{ID: "OP_MACHINE_PROVISION", KeyPrm: "machine", Doc: "move a machine through its provision states (manage, provide, inspect, active, deleted, clean, rescue, unrescue, abort, rebuild)", Params: []Param{machine,
			{Name: "target", Type: TNEString, Required: true, Doc: "the Bare Metal API's provision target"},
			{Name: "configdrive", Type: TAny, Default: nil, Doc: "config drive for deploy (string or dict)", Sensitive: Private},
			{Name: "clean_steps", Type: TAny, Default: nil, Doc: "steps of a manual clean (list)"},
			{Name: "deploy_steps", Type: TAny, Default: nil, Doc: "extra deploy steps (list)"},
			{Name: "rescue_password_hash", Type: TString, Default: "", Doc: "crypt(3) hash of the rescue user's password (the API and CLI hash it; the clear password never reaches the master)", Sensitive: Secret},
			{Name: "ssh_public_keys", Type: TStringList, Default: []any{}, Doc: "SSH public keys for the rescue user (Corral only)"},
			{Name: "disable_ramdisk", Type: TBool, Default: false, Doc: "clean without booting the agent"},
		}},
		{ID: "OP_MACHINE_POWER", KeyPrm: "machine", Doc: "power a machine on or off, or reboot it", Params: []Param{machine,
			{Name: "target", Type: TNEString, Required: true, Doc: "power on | power off | rebooting | soft power off | soft rebooting"},
			{Name: "timeout", Type: TNonNegInt, Default: float64(0), Doc: "seconds to wait for a soft power action (0: the driver's default)"},
		}},
		{ID: "OP_MACHINE_MAINTENANCE", KeyPrm: "machine", Doc: "set or clear a machine's maintenance mode", Params: []Param{machine,
			{Name: "maintenance", Type: TBool, Required: true, Doc: "true sets, false clears"},
			{Name: "maintenance_reason", Type: TString, Default: "", Doc: "why"},
		}},
		{ID: "OP_MACHINE_POWER_SYNC", Doc: "read machines' power states from their BMCs and record drift (the machine-power-sync reconciler submits it)", Params: []Param{
			{Name: "machines", Type: TStringList, Required: true, Doc: "uuids of the machines to read"},
		}},
		{ID: "OP_MACHINE_PORT_CREATE", KeyPrm: "address", Doc: "add a network port to a machine", Params: []Param{machine,
			{Name: "address", Type: TNEString, Required: true, Doc: "MAC address"},
			{Name: "uuid", Type: TMaybeString, Default: nil, Doc: "uuid to give the port (default: a new one)"},
			{Name: "physical_network", Type: TMaybeString, Default: nil, Doc: "physical network the port is wired to"},
			{Name: "pxe_enabled", Type: TBool, Default: true, Doc: "the machine may PXE boot from this port"},
			{Name: "local_link_connection", Type: TAny, Default: nil, Doc: "switch port it is wired to (dict)"},
			{Name: "extra", Type: TAny, Default: nil, Doc: "free-form dict"},
		}},
		{ID: "OP_MACHINE_PORT_MODIFY", KeyPrm: "port", Doc: "change a port's fields", Params: []Param{
			{Name: "port", Type: TNEString, Required: true, Doc: "port uuid"},
			{Name: "changes", Type: TDict, Required: true, Doc: "new values by field name (address, node_uuid, physical_network, pxe_enabled, local_link_connection, extra)"},
		}},
		{ID: "OP_MACHINE_PORT_REMOVE", KeyPrm: "port", Doc: "remove a port", Params: []Param{
			{Name: "port", Type: TNEString, Required: true, Doc: "port uuid"},
		}},
	}
}
