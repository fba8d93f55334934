package baremetalapi

import (
	"maps"
	"strings"
	"time"

	"github.com/corral/corral/internal/config"
)

// masked is how every secret is shown.
const masked = "******"

// nodeField is one key of Ironic's node object: the first version that has
// it and how it is read from a machine (nil value: null).
type nodeField struct {
	name     string
	minMinor int
	get      func(m *config.Machine) any
}

// str is a string field: "" shows as null, as Ironic's unset columns.
func str(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// dict is a dict field: unset shows as {} (Ironic's default for them).
func dict(d map[string]any) map[string]any {
	if d == nil {
		return map[string]any{}
	}
	return d
}

// nodeFields are the node object's keys at API 1.78 (links are added by
// the renderer), each with the version that introduced it: a request of an
// older version does not see it.
var nodeFields = []nodeField{
	{"allocation_uuid", 52, func(*config.Machine) any { return nil }},
	{"automated_clean", 47, func(m *config.Machine) any {
		if m.AutomatedClean == nil {
			return nil
		}
		return *m.AutomatedClean
	}},
	{"bios_interface", 40, func(m *config.Machine) any { return str(m.Interfaces.Bios) }},
	{"boot_interface", v31DynamicIfaces, func(m *config.Machine) any { return str(m.Interfaces.Boot) }},
	{"boot_mode", v75BootMode, func(*config.Machine) any { return nil }},
	{"chassis_uuid", 1, func(*config.Machine) any { return nil }},
	{"clean_step", 7, func(*config.Machine) any { return map[string]any{} }},
	{"conductor", 49, func(m *config.Machine) any { return str(m.Conductor) }},
	{"conductor_group", v46ConductorGroup, func(m *config.Machine) any { return m.ConductorGroup }},
	{"console_enabled", 1, func(m *config.Machine) any { return m.ConsoleEnabled }},
	{"console_interface", v31DynamicIfaces, func(m *config.Machine) any { return str(m.Interfaces.Console) }},
	{"created_at", 1, func(m *config.Machine) any { return isoTime(m.CTime, false) }},
	{"deploy_interface", v31DynamicIfaces, func(m *config.Machine) any { return str(m.Interfaces.Deploy) }},
	{"deploy_step", 44, func(*config.Machine) any { return map[string]any{} }},
	{"description", 51, func(m *config.Machine) any { return str(m.Description) }},
	{"driver", 1, func(m *config.Machine) any { return m.Driver }},
	{"driver_info", 1, func(m *config.Machine) any { return dict(m.DriverInfo) }},
	{"driver_internal_info", v3DriverInternalInfo, func(m *config.Machine) any { return dict(m.DriverInternalInfo) }},
	{"extra", 1, func(m *config.Machine) any { return dict(m.Extra) }},
	{"fault", v42Fault, func(m *config.Machine) any { return str(m.Fault) }},
	{"inspect_interface", v31DynamicIfaces, func(m *config.Machine) any { return str(m.Interfaces.Inspect) }},
	{"inspection_finished_at", 6, func(*config.Machine) any { return nil }},
	{"inspection_started_at", 6, func(*config.Machine) any { return nil }},
	{"instance_info", 1, func(m *config.Machine) any { return dict(m.InstanceInfo) }},
	{"instance_uuid", 1, func(m *config.Machine) any { return str(m.InstanceUUID) }},
	{"last_error", 1, func(m *config.Machine) any { return str(m.LastError) }},
	{"lessee", 65, func(m *config.Machine) any { return str(m.Lessee) }},
	{"maintenance", 1, func(m *config.Machine) any { return m.Maintenance }},
	{"maintenance_reason", 1, func(m *config.Machine) any { return str(m.MaintenanceReason) }},
	{"management_interface", v31DynamicIfaces, func(m *config.Machine) any { return str(m.Interfaces.Management) }},
	{"name", v5NodeName, func(m *config.Machine) any { return str(m.Name) }},
	{"network_data", 66, func(*config.Machine) any { return map[string]any{} }},
	{"network_interface", 20, func(m *config.Machine) any { return str(m.Interfaces.Network) }},
	{"owner", v50Owner, func(m *config.Machine) any { return str(m.Owner) }},
	{"power_interface", v31DynamicIfaces, func(m *config.Machine) any { return str(m.Interfaces.Power) }},
	{"power_state", 1, func(m *config.Machine) any { return str(m.PowerState) }},
	{"properties", 1, func(m *config.Machine) any { return dict(m.Properties) }},
	{"protected", 48, func(*config.Machine) any { return false }},
	{"protected_reason", 48, func(*config.Machine) any { return nil }},
	{"provision_state", 1, func(m *config.Machine) any { return str(m.ProvisionState) }},
	{"provision_updated_at", 1, func(m *config.Machine) any { return isoTime(m.ProvisionUpdated, true) }},
	{"raid_config", 12, func(*config.Machine) any { return map[string]any{} }},
	{"raid_interface", v31DynamicIfaces, func(m *config.Machine) any { return str(m.Interfaces.Raid) }},
	{"rescue_interface", v38Rescue, func(m *config.Machine) any { return str(m.Interfaces.Rescue) }},
	{"reservation", 1, func(m *config.Machine) any { return str(m.Reservation) }},
	{"resource_class", v21ResourceClass, func(m *config.Machine) any { return str(m.ResourceClass) }},
	{"retired", 61, func(*config.Machine) any { return false }},
	{"retired_reason", 61, func(*config.Machine) any { return nil }},
	{"secure_boot", v75BootMode, func(*config.Machine) any { return nil }},
	{"storage_interface", 33, func(m *config.Machine) any { return str(m.Interfaces.Storage) }},
	{"target_power_state", 1, func(m *config.Machine) any { return str(m.TargetPowerState) }},
	{"target_provision_state", 1, func(m *config.Machine) any { return str(m.TargetProvisionState) }},
	{"target_raid_config", 12, func(*config.Machine) any { return map[string]any{} }},
	{"traits", v37Traits, func(*config.Machine) any { return []any{} }},
	{"updated_at", 1, func(m *config.Machine) any {
		if m.MTime == m.CTime {
			return nil
		}
		return isoTime(m.MTime, false)
	}},
	{"uuid", 1, func(m *config.Machine) any { return m.UUID }},
	{"vendor_interface", v31DynamicIfaces, func(m *config.Machine) any { return str(m.Interfaces.Vendor) }},
}

// nodeFieldMin maps a node field to the version that introduced it.
var nodeFieldMin = func() map[string]int {
	out := make(map[string]int, len(nodeFields))
	for _, f := range nodeFields {
		out[f.name] = f.minMinor
	}
	return out
}()

// nodeListFields are the keys of a node list without detail.
var nodeListFields = []string{"uuid", "name", "instance_uuid", "power_state", "provision_state", "maintenance"}

// isoTime renders a Unix time as Ironic does: ISO-8601 with "+00:00",
// microseconds only where Ironic keeps them; 0 is null.
func isoTime(t float64, micro bool) any {
	if t == 0 {
		return nil
	}
	tm := time.UnixMicro(int64(t * 1e6)).UTC()
	if micro {
		return tm.Format("2006-01-02T15:04:05.000000+00:00")
	}
	return tm.Format("2006-01-02T15:04:05+00:00")
}

// renderNode is m as the node object of version v: every key v has (only
// fields when given, links always), secrets masked.
func renderNode(m *config.Machine, v Version, base string, fields []string) map[string]any {
	out := nodeDoc(m, v, fields)
	if d, ok := out["driver_info"].(map[string]any); ok {
		out["driver_info"] = maskDriverInfo(d)
	}
	if d, ok := out["instance_info"].(map[string]any); ok {
		out["instance_info"] = maskInstanceInfo(d)
	}
	if d, ok := out["driver_internal_info"].(map[string]any); ok {
		out["driver_internal_info"] = maskInternalInfo(d)
	}
	self := base + "/v1/nodes/" + m.UUID
	out["links"] = links(self, base+"/nodes/"+m.UUID)
	if fields == nil {
		out["ports"] = links(self+"/ports", base+"/nodes/"+m.UUID+"/ports")
		if v.AtLeast(v14StatesLinks) {
			out["states"] = links(self+"/states", base+"/nodes/"+m.UUID+"/states")
		}
		if v.AtLeast(v24PortgroupsLinks) {
			out["portgroups"] = links(self+"/portgroups", base+"/nodes/"+m.UUID+"/portgroups")
		}
		if v.AtLeast(v32Volume) {
			out["volume"] = links(self+"/volume", base+"/nodes/"+m.UUID+"/volume")
		}
	}
	return out
}

// nodeDoc is m's fields at version v, unmasked: what a PATCH applies to.
func nodeDoc(m *config.Machine, v Version, fields []string) map[string]any {
	out := map[string]any{}
	for _, f := range nodeFields {
		if v.AtLeast(f.minMinor) && wanted(fields, f.name) {
			out[f.name] = f.get(m)
		}
	}
	return out
}

func wanted(fields []string, name string) bool {
	if fields == nil {
		return true
	}
	for _, f := range fields {
		if f == name {
			return true
		}
	}
	return false
}

// links is Ironic's pair of self and bookmark links.
func links(self, bookmark string) []map[string]string {
	return []map[string]string{{"href": self, "rel": "self"}, {"href": bookmark, "rel": "bookmark"}}
}

// secretKeyParts are the substrings of a driver_info key that make its
// value a secret (case-insensitive), as OpenStack's mask_dict_password
// decides: passwords, secrets, tokens, keys of every kind.
var secretKeyParts = []string{"password", "passphrase", "admin_pass", "new_pass", "pswd", "secret", "token", "key", "credential", "configdrive"}

// isSecretKey reports whether a driver_info key holds a secret.
func isSecretKey(k string) bool {
	k = strings.ToLower(k)
	for _, p := range secretKeyParts {
		if strings.Contains(k, p) {
			return true
		}
	}
	return false
}

// maskDriverInfo copies d with every secret value masked, nested dicts
// included.
func maskDriverInfo(d map[string]any) map[string]any {
	out := make(map[string]any, len(d))
	for k, v := range d {
		switch {
		case isSecretKey(k):
			out[k] = masked
		default:
			if sub, ok := v.(map[string]any); ok {
				v = maskDriverInfo(sub)
			}
			out[k] = v
		}
	}
	return out
}

// instanceInfoSecrets are instance_info's secret keys.
var instanceInfoSecrets = []string{"configdrive", "rescue_password", "hashed_rescue_password"}

func maskInstanceInfo(d map[string]any) map[string]any {
	out := maps.Clone(dict(d))
	for _, k := range instanceInfoSecrets {
		if _, ok := out[k]; ok {
			out[k] = masked
		}
	}
	return out
}

func maskInternalInfo(d map[string]any) map[string]any {
	out := maps.Clone(dict(d))
	for k := range out {
		if k == "agent_secret_token" || isSecretKey(k) && k != "agent_secret_token_pregenerated" {
			out[k] = masked
		}
	}
	return out
}
