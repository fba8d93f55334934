package cmdlib

import (
	"slices"
	"strings"

	"github.com/corral/corral/internal/config"
	"github.com/corral/corral/internal/ecode"
	"github.com/corral/corral/internal/opcodes"
)

// checkStdSpec checks a standard spec: a dict of ispec parameters with
// integer values (a partial one fills Ganeti's default).
func checkStdSpec(v any) error {
	m, ok := v.(map[string]any)
	if !ok {
		return ecode.Errorf(ecode.Inval, "Instance policy std must be a dict of instance specs")
	}
	for k, x := range m {
		if !slices.Contains(ispecParams, k) {
			return ecode.Errorf(ecode.Inval, "Unknown instance spec parameter '%s'", k)
		}
		f, ok := number(x)
		if !ok || f != float64(int64(f)) {
			return ecode.Errorf(ecode.Inval, "Instance policy std: %s must be an integer", k)
		}
	}
	return nil
}

// setClusterIPolicy applies OP_CLUSTER_SET_PARAMS's ipolicy to the
// cluster's custom policy: Ganeti's keys, "default" (or null) resetting
// one. The filled standard spec must lie within one of the min/max pairs,
// and the cluster's default backend parameters must still fit.
func setClusterIPolicy(op *opcodes.Op, c *config.Cluster, changed *bool) error {
	raw, ok := op.Params["ipolicy"]
	if !ok || raw == nil {
		return nil
	}
	upd, ok := raw.(map[string]any)
	if !ok {
		return ecode.Errorf(ecode.Inval, "ipolicy must be a dict")
	}
	pol, err := checkIPolicy(c, c.IPolicy, upd, true)
	if err != nil {
		return err
	}
	next := c.Clone()
	next.IPolicy = pol
	filled := ClusterIPolicy(next)
	if err := checkStdWithinMinMax(filled); err != nil {
		return err
	}
	if v := clusterPolicy(next).violations(beSpecs(config.Fill(nil, c.BEParams), true)); len(v) > 0 {
		return ecode.Errorf(ecode.Inval, "The cluster's default backend parameters would violate the new instance policy: %s", strings.Join(v, ", "))
	}
	c.IPolicy = pol
	*changed = true
	return nil
}

// checkStdWithinMinMax refuses a standard spec outside every min/max pair.
func checkStdWithinMinMax(filled map[string]any) error {
	pol := parsePolicy(filled)
	std, _ := filled["std"].(map[string]any)
	var vals []specValue
	for _, k := range ispecParams {
		if f, ok := number(std[k]); ok {
			vals = append(vals, specValue{spec: k, value: f})
		}
	}
	pol.ownMinMax = true
	if v := pol.violations(&instanceSpecs{values: vals}); len(v) > 0 {
		return ecode.Errorf(ecode.Inval, "Invalid instance policy: the standard spec is outside its min/max specs: %s", strings.Join(v, ", "))
	}
	return nil
}
