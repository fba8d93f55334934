package cmdlib

import (
	"context"
	"maps"
	"slices"
	"sort"
	"strings"

	"github.com/corral/corral/internal/config"
	"github.com/corral/corral/internal/ecode"
	"github.com/corral/corral/internal/nodeapi"
	"github.com/corral/corral/internal/opcodes"
)

// instanceOSParams are the parameters an instance's OS scripts and its
// verify script see: the cluster's for the OS (OS+variant overriding OS),
// the instance's public ones, then its private ones.
func instanceOSParams(c *config.Cluster, osName string, public, private config.Params) config.Params {
	return config.Fill(config.Fill(config.ClusterOSParams(c, osName), public), private)
}

// privateOSParamsUpdate is the op's osparams_private as a change to apply:
// nil when none is given (Ganeti's client sends an empty dict then). A
// name both in osparams and osparams_private is refused, as Ganeti does.
func privateOSParamsUpdate(op *opcodes.Op) (map[string]any, error) {
	priv := op.Dict("osparams_private")
	if len(priv) == 0 {
		return nil, nil
	}
	pub := op.Dict("osparams")
	var dupes []string
	for k := range priv {
		if _, ok := pub[k]; ok {
			dupes = append(dupes, k)
		}
	}
	if len(dupes) > 0 {
		sort.Strings(dupes)
		return nil, ecode.Errorf(ecode.Inval, "OS parameters repeated multiple times: %s", strings.Join(dupes, ", "))
	}
	return priv, nil
}

// checkOSParams is Ganeti's CheckOSParams on one node: the OS must exist
// there with the variant and parameter names given, and its verify script
// (OS API 20) must accept the values. public are the filled public
// parameters, private the instance's private ones: the node passes both to
// the script and keeps the private values out of logs and errors.
func (p *Processor) checkOSParams(ctx context.Context, node *config.Node, osName string, forceVariant bool, public, private config.Params) error {
	if err := p.checkOS(ctx, node, osName, forceVariant, config.Fill(public, private)); err != nil {
		return err
	}
	args := nodeapi.OSValidateArgs{OS: osName, Required: true, ForceVariant: forceVariant,
		Params: public.Strings(), Private: private.Strings()}
	var r nodeapi.OSValidateReply
	if err := p.RPC.Call(ctx, node, nodeapi.OSValidate, "", args, &r); err != nil {
		return ecode.ExecErrorf("OS Parameters validation failed on node %s: %w", node.Name, err)
	}
	return nil
}

// setOSHVParams applies OP_CLUSTER_SET_PARAMS's os_hvp, as Ganeti does:
// {os: {hypervisor: params}}, where a hypervisor's params update its
// current ones ("default" or null removes one) and a null hypervisor
// entry removes all of them; an OS left without any is dropped.
func setOSHVParams(op *opcodes.Op, c *config.Cluster, changed *bool) error {
	raw, ok := op.Params["os_hvp"]
	if !ok || raw == nil {
		return nil
	}
	m, ok := raw.(map[string]any)
	if !ok {
		return ecode.Errorf(ecode.Inval, "os_hvp must be a dict of OS names to dicts of hypervisor parameters")
	}
	if c.OSHVParams == nil {
		c.OSHVParams = map[string]map[string]config.Params{}
	}
	for _, osName := range slices.Sorted(maps.Keys(m)) {
		if osBase(osName) == "" {
			return ecode.Errorf(ecode.Inval, "os_hvp: empty OS name")
		}
		hvs, ok := m[osName].(map[string]any)
		if !ok {
			return ecode.Errorf(ecode.Inval, "os_hvp for %s must be a dict of hypervisor parameters", osName)
		}
		cur := c.OSHVParams[osName]
		if cur == nil {
			cur = map[string]config.Params{}
		}
		for _, hv := range slices.Sorted(maps.Keys(hvs)) {
			if _, known := c.HVParams[hv]; !known {
				return ecode.Errorf(ecode.Inval, "Unknown hypervisor '%s'", hv)
			}
			if hvs[hv] == nil {
				delete(cur, hv)
				continue
			}
			upd, ok := hvs[hv].(map[string]any)
			if !ok {
				return ecode.Errorf(ecode.Inval, "os_hvp for %s, %s must be a dict", osName, hv)
			}
			checked, err := checkHVParams(c, hv, upd)
			if err != nil {
				return err
			}
			cur[hv] = updateParams(cur[hv], checked)
			if len(cur[hv]) == 0 {
				delete(cur, hv)
			}
		}
		if len(cur) == 0 {
			delete(c.OSHVParams, osName)
		} else {
			c.OSHVParams[osName] = cur
		}
	}
	*changed = true
	return nil
}

// osBlacklisted says whether new installations of osName are refused:
// Ganeti matches the name as given ("os+variant"); Corral also refuses
// every variant of a blacklisted OS.
func osBlacklisted(c *config.Cluster, osName string) bool {
	return slices.Contains(c.BlacklistedOS, osName) || slices.Contains(c.BlacklistedOS, osBase(osName))
}
