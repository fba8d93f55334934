package config

import (
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/corral/corral/internal/ecode"
)

// HVState is Ganeti's hv_state_static: per hypervisor, resource figures the
// operator declares for a node, a node group or the cluster (keys
// HVStateParams), which allocators may read instead of what nodes report.
type HVState map[string]map[string]int64

// DiskState is Ganeti's disk_state_static: per storage type, per storage
// unit (a volume group, say), declared figures (keys DiskStateParams).
type DiskState map[string]map[string]map[string]int64

// Ganeti's HVSTS_PARAMETERS and DSS_PARAMETERS (all integers), with the
// defaults (HVST_DEFAULTS, DS_DEFAULTS) the cluster's values are filled
// with.
var (
	HVStateDefaults   = map[string]int64{"cpu_node": 1, "cpu_total": 1, "mem_hv": 0, "mem_node": 0, "mem_total": 0}
	DiskStateDefaults = map[string]int64{"disk_overhead": 0, "disk_reserved": 0, "disk_total": 0}
	// StateHypervisors are Ganeti's HYPER_TYPES, the keys of an hv state.
	StateHypervisors = []string{"chroot", "fake", "kvm", "lxc", "xen-hvm", "xen-pvm"}
	// DiskStateTypes are Ganeti's DS_VALID_TYPES, the keys of a disk state.
	DiskStateTypes = []string{"plain"}
)

// Clone copies s.
func (s HVState) Clone() HVState {
	if s == nil {
		return nil
	}
	out := make(HVState, len(s))
	for k, v := range s {
		out[k] = maps.Clone(v)
	}
	return out
}

// Clone copies s.
func (s DiskState) Clone() DiskState {
	if s == nil {
		return nil
	}
	out := make(DiskState, len(s))
	for k, units := range s {
		out[k] = make(map[string]map[string]int64, len(units))
		for u, v := range units {
			out[k][u] = maps.Clone(v)
		}
	}
	return out
}

// MergeHVState applies an opcode's hv_state to old, as Ganeti's
// MergeAndVerifyHvState: each hypervisor's figures are updated ("default" or
// null removes one) and must be known integers. An empty update returns
// old unchanged.
func MergeHVState(old HVState, upd any) (HVState, error) {
	m, err := stateDict("hypervisor state", upd)
	if err != nil || len(m) == 0 {
		return old, err
	}
	if bad := unknownKeys(m, StateHypervisors); len(bad) > 0 {
		return nil, ecode.Errorf(ecode.Inval, "Invalid hypervisor(s) in hypervisor state: %s", strings.Join(bad, ", "))
	}
	out := old.Clone()
	if out == nil {
		out = HVState{}
	}
	for hv, v := range m {
		figs, err := updateFigures(out[hv], v, HVStateDefaults)
		if err != nil {
			return nil, err
		}
		out[hv] = figs
	}
	return out, nil
}

// MergeDiskState applies an opcode's disk_state to old, as Ganeti's
// MergeAndVerifyDiskState: per storage type, per storage unit.
func MergeDiskState(old DiskState, upd any) (DiskState, error) {
	m, err := stateDict("disk state", upd)
	if err != nil || len(m) == 0 {
		return old, err
	}
	if bad := unknownKeys(m, DiskStateTypes); len(bad) > 0 {
		return nil, ecode.Errorf(ecode.Inval, "Invalid storage type(s) in disk state: %s", strings.Join(bad, ", "))
	}
	out := old.Clone()
	if out == nil {
		out = DiskState{}
	}
	for typ, v := range m {
		units, err := stateDict("disk state of "+typ, v)
		if err != nil {
			return nil, err
		}
		merged := out[typ]
		if merged == nil {
			merged = map[string]map[string]int64{}
		}
		for unit, figs := range units {
			if merged[unit], err = updateFigures(merged[unit], figs, DiskStateDefaults); err != nil {
				return nil, err
			}
		}
		out[typ] = merged
	}
	return out, nil
}

// FillHVState fills each hypervisor's figures with Ganeti's defaults, as
// the cluster's are stored.
func FillHVState(s HVState) HVState {
	out := s.Clone()
	for hv, figs := range out {
		filled := maps.Clone(HVStateDefaults)
		maps.Copy(filled, figs)
		out[hv] = filled
	}
	return out
}

// FillDiskState fills each storage unit's figures with Ganeti's defaults.
func FillDiskState(s DiskState) DiskState {
	out := s.Clone()
	for _, units := range out {
		for u, figs := range units {
			filled := maps.Clone(DiskStateDefaults)
			maps.Copy(filled, figs)
			units[u] = filled
		}
	}
	return out
}

func stateDict(what string, v any) (map[string]any, error) {
	if v == nil {
		return nil, nil
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, ecode.Errorf(ecode.Inval, "Invalid %s: expected a dictionary, got %v", what, v)
	}
	return m, nil
}

func unknownKeys(m map[string]any, known []string) []string {
	var bad []string
	for k := range m {
		if !slices.Contains(known, k) {
			bad = append(bad, k)
		}
	}
	slices.Sort(bad)
	return bad
}

// updateFigures applies upd to old as Ganeti's GetUpdatedParams, then
// checks every figure as ForceDictType does for integers.
func updateFigures(old map[string]int64, upd any, known map[string]int64) (map[string]int64, error) {
	m, err := stateDict("state figures", upd)
	if err != nil {
		return nil, err
	}
	out := maps.Clone(old)
	if out == nil {
		out = map[string]int64{}
	}
	for k, v := range m {
		if _, ok := known[k]; !ok {
			return nil, ecode.Errorf(ecode.Inval, "Unknown parameter '%s'", k)
		}
		if v == nil || v == "default" {
			delete(out, k)
			continue
		}
		n, ok := stateInt(v)
		if !ok {
			return nil, ecode.Errorf(ecode.Inval, "'%s' (value %v) is not a valid integer", k, v)
		}
		out[k] = n
	}
	return out, nil
}

// stateInt converts as Python's int() does for the values an opcode may
// carry: whole strings, numbers (truncated) and booleans.
func stateInt(v any) (int64, bool) {
	switch x := v.(type) {
	case int:
		return int64(x), true
	case int64:
		return x, true
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) || math.Abs(x) > math.MaxInt64/2 {
			return 0, false
		}
		return int64(x), true
	case bool:
		if x {
			return 1, true
		}
		return 0, true
	case string:
		n, err := strconv.ParseInt(strings.TrimSpace(x), 10, 64)
		return n, err == nil
	}
	return 0, false
}
