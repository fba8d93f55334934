package cmdlib

import (
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/corral/corral/internal/config"
	"github.com/corral/corral/internal/ecode"
	"github.com/corral/corral/internal/opcodes"
)

// The checks of a node group's parameter dictionaries (ndparams,
// diskparams, ipolicy), with Ganeti's key names and value types.

// paramKind is a parameter's type as Ganeti's VTYPE_*.
type paramKind int

const (
	kindString paramKind = iota
	kindInt
	kindBool
	kindFloat
)

// ndParamKinds are Ganeti's NDS_PARAMETER_TYPES.
var ndParamKinds = map[string]paramKind{
	"oob_program": kindString, "spindle_count": kindInt, "exclusive_storage": kindBool,
	"ovs": kindBool, "ovs_name": kindString, "ovs_link": kindString, "ssh_port": kindInt,
	"cpu_speed": kindFloat,
	// Corral only: the bare-metal machine the node runs on, for power
	// control (OP_NODE_POWERCYCLE); no default, so unset on most nodes.
	NDMachine: kindString,
}

// diskParamKinds are Ganeti's DISK_DT_TYPES, per template as in
// DISK_DT_DEFAULTS (file, sharedfile, blockdev and diskless have none).
var diskParamKinds = map[string]map[string]paramKind{
	"plain": {"stripes": kindInt},
	"drbd": {"resync-rate": kindInt, "data-stripes": kindInt, "meta-stripes": kindInt,
		"disk-barriers": kindString, "meta-barriers": kindBool, "metavg": kindString,
		"disk-custom": kindString, "net-custom": kindString, "protocol": kindString,
		"dynamic-resync": kindBool, "c-plan-ahead": kindInt, "c-fill-target": kindInt,
		"c-delay-target": kindInt, "c-max-rate": kindInt, "c-min-rate": kindInt},
	"rbd":        {"pool": kindString, "access": kindString, "conf": kindString, "keyring": kindString},
	"ext":        {"access": kindString},
	"gluster":    {"host": kindString, "port": kindInt, "volume": kindString, "access": kindString},
	"file":       {},
	"sharedfile": {},
	"blockdev":   {},
	"diskless":   {},
}

// coerce converts v to kind as Ganeti's ForceDictType does: the CLI sends
// every value as text.
func coerce(key string, kind paramKind, v any) (any, error) {
	bad := func() error {
		return ecode.Errorf(ecode.Inval, "Parameter '%s' must be %s, got %s", key,
			[...]string{"a string", "an integer", "a boolean", "a number"}[kind], opcodes.ParamText(v))
	}
	switch kind {
	case kindString:
		if s, ok := v.(string); ok {
			return s, nil
		}
	case kindInt, kindFloat:
		f, ok := v.(float64)
		if s, isStr := v.(string); isStr {
			var err error
			if f, err = strconv.ParseFloat(strings.TrimSpace(s), 64); err != nil {
				return nil, bad()
			}
			ok = true
		}
		if !ok || math.IsNaN(f) || math.IsInf(f, 0) || (kind == kindInt && f != math.Trunc(f)) {
			return nil, bad()
		}
		return f, nil
	case kindBool:
		switch x := v.(type) {
		case bool:
			return x, nil
		case string:
			switch strings.ToLower(x) {
			case "true", "yes", "y", "1", "on":
				return true, nil
			case "false", "no", "n", "0", "off":
				return false, nil
			}
		}
	}
	return nil, bad()
}

// updateTyped merges upd into old like updateParams and checks every key
// and value against kinds.
func updateTyped(what string, old config.Params, upd map[string]any, kinds map[string]paramKind) (config.Params, error) {
	checked := make(map[string]any, len(upd))
	for k, v := range upd {
		kind, known := kinds[k]
		if !known {
			return nil, ecode.Errorf(ecode.Inval, "Unknown %s parameter '%s'", what, k)
		}
		if v == nil || v == "default" {
			checked[k] = v
			continue
		}
		cv, err := coerce(k, kind, v)
		if err != nil {
			return nil, err
		}
		checked[k] = cv
	}
	return updateParams(old, checked), nil
}

func checkNDParams(old config.Params, upd map[string]any) (config.Params, error) {
	return updateTyped("node", old, upd, ndParamKinds)
}

func checkDiskParams(old map[string]config.Params, upd map[string]any) (map[string]config.Params, error) {
	out := cloneParamsMap(old)
	if out == nil {
		out = map[string]config.Params{}
	}
	for tmpl, v := range upd {
		kinds, known := diskParamKinds[tmpl]
		if !known {
			return nil, ecode.Errorf(ecode.Inval, "Unknown disk template '%s' in diskparams", tmpl)
		}
		m, ok := v.(map[string]any)
		if !ok {
			return nil, ecode.Errorf(ecode.Inval, "diskparams for %s must be a dict", tmpl)
		}
		p, err := updateTyped(tmpl+" disk", out[tmpl], m, kinds)
		if err != nil {
			return nil, err
		}
		if err := checkTemplateDiskParams(tmpl, p); err != nil {
			return nil, err
		}
		if len(p) == 0 {
			delete(out, tmpl)
		} else {
			out[tmpl] = p
		}
	}
	return out, nil
}

// ispecParams are Ganeti's ISPECS_PARAMETERS, the keys of an ipolicy's
// min and max specs.
var ispecParams = []string{"cpu-count", "disk-count", "disk-size", "memory-size", "nic-count", "spindle-use"}

// checkGroupIPolicy merges upd into a group's custom instance policy.
// A group may not set the standard spec (Ganeti keeps "std" cluster-wide);
// allowed disk templates must be enabled on the cluster.
func checkGroupIPolicy(c *config.Cluster, old config.Params, upd map[string]any) (config.Params, error) {
	return checkIPolicy(c, old, upd, false)
}

// checkIPolicy is checkGroupIPolicy, or with forCluster the cluster's
// own, which may set the standard spec too.
func checkIPolicy(c *config.Cluster, old config.Params, upd map[string]any, forCluster bool) (config.Params, error) {
	checked := make(map[string]any, len(upd))
	for k, v := range upd {
		if v == nil || v == "default" {
			checked[k] = v
			continue
		}
		switch k {
		case "std":
			if !forCluster {
				return nil, ecode.Errorf(ecode.Inval, "The standard instance spec (std) can only be set for the cluster")
			}
			if err := checkStdSpec(v); err != nil {
				return nil, err
			}
			checked[k] = v
		case "vcpu-ratio", "spindle-ratio", "memory-ratio":
			f, err := coerce(k, kindFloat, v)
			if err != nil {
				return nil, err
			}
			if f.(float64) <= 0 {
				return nil, ecode.Errorf(ecode.Inval, "Instance policy %s must be positive", k)
			}
			checked[k] = f
		case "disk-templates":
			l, ok := v.([]any)
			if !ok {
				return nil, ecode.Errorf(ecode.Inval, "Instance policy disk-templates must be a list")
			}
			var off []string
			for _, t := range l {
				s, _ := t.(string)
				if !slices.Contains(c.EnabledDiskTemplates, s) {
					off = append(off, opcodes.ParamText(t))
				}
			}
			if len(off) > 0 {
				return nil, ecode.Errorf(ecode.Inval, "The following disk templates are allowed by the ipolicy, but not enabled on the cluster: %s", strings.Join(off, ", "))
			}
			checked[k] = v
		case "minmax":
			if err := checkMinMax(v); err != nil {
				return nil, err
			}
			checked[k] = v
		default:
			return nil, ecode.Errorf(ecode.Inval, "Unknown instance policy parameter '%s'", k)
		}
	}
	return updateParams(old, checked), nil
}

// checkMinMax checks an ipolicy's minmax: a non-empty list of {min, max}
// specs with every ISPECS parameter an integer and min <= max.
func checkMinMax(v any) error {
	l, ok := v.([]any)
	if !ok || len(l) == 0 {
		return ecode.Errorf(ecode.Inval, "Instance policy minmax must be a non-empty list of {min, max} dicts")
	}
	for i, e := range l {
		pair, ok := e.(map[string]any)
		if !ok || len(pair) != 2 {
			return ecode.Errorf(ecode.Inval, "Instance policy minmax[%d] must be a dict with min and max", i)
		}
		lo, okLo := pair["min"].(map[string]any)
		hi, okHi := pair["max"].(map[string]any)
		if !okLo || !okHi {
			return ecode.Errorf(ecode.Inval, "Instance policy minmax[%d] must be a dict with min and max", i)
		}
		for _, spec := range []map[string]any{lo, hi} {
			for k := range spec {
				if !slices.Contains(ispecParams, k) {
					return ecode.Errorf(ecode.Inval, "Unknown instance spec parameter '%s'", k)
				}
			}
		}
		for _, k := range ispecParams {
			a, okA := lo[k].(float64)
			b, okB := hi[k].(float64)
			if !okA || !okB || a != float64(int64(a)) || b != float64(int64(b)) {
				return ecode.Errorf(ecode.Inval, "Instance policy minmax[%d]: %s must be an integer in min and max", i, k)
			}
			if a > b {
				return ecode.Errorf(ecode.Inval, "Instance policy minmax[%d]: %s min %d is above max %d", i, k, int64(a), int64(b))
			}
		}
	}
	return nil
}
