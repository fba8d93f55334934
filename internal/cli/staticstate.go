package cli

import (
	"strings"

	"github.com/spf13/cobra"
)

// addStateFlags adds gnt-group's and gnt-node's --hypervisor-state and
// --disk-state.
func addStateFlags(cmd *cobra.Command, hv, disk *[]string) {
	f := cmd.Flags()
	f.StringArrayVar(hv, "hypervisor-state", nil, "declared hypervisor state, hypervisor:key=val,... (cpu_node, cpu_total, mem_hv, mem_node, mem_total; repeatable)")
	f.StringArrayVar(disk, "disk-state", nil, "declared disk state, storage_type/unit:key=val,... (disk_overhead, disk_reserved, disk_total; repeatable)")
}

// stateParams turns the flags into the opcode's hv_state and disk_state
// (only those given). A disk state's "type/unit" becomes {type: {unit:
// {...}}}, as gnt-group's FlatToDict.
func stateParams(hv, disk []string, allowReset bool) (map[string]any, error) {
	out := map[string]any{}
	if len(hv) > 0 {
		m, err := parseGroups("--hypervisor-state", hv, allowReset)
		if err != nil {
			return nil, err
		}
		out["hv_state"] = m
	}
	if len(disk) > 0 {
		m, err := parseGroups("--disk-state", disk, allowReset)
		if err != nil {
			return nil, err
		}
		nested := map[string]any{}
		for key, figs := range m {
			typ, unit, ok := strings.Cut(key, "/")
			if !ok || typ == "" || unit == "" {
				return nil, paramErr("--disk-state: %q is not storage_type/unit", key)
			}
			units, _ := nested[typ].(map[string]any)
			if units == nil {
				units = map[string]any{}
				nested[typ] = units
			}
			units[unit] = figs
		}
		out["disk_state"] = nested
	}
	return out, nil
}
