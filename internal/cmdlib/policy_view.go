package cmdlib

import (
	"maps"
	"slices"

	"github.com/corral/corral/internal/config"
)

// The instance policy and disk parameters as queries show them: Ganeti's
// wire form (ipolicy keys minmax, std, disk-templates, vcpu-ratio,
// spindle-ratio), built from the same defaults the checks in ipolicy.go
// use, so what an operator reads is what an allocation is held to.

// Ganeti's IPOLICY_DEFAULTS beyond the minmax pair and vcpu-ratio that
// ipolicy.go keeps: the standard spec equals the minimum one, and the
// spindle-ratio (unused by Corral's checks, which have no spindles).
const defaultSpindleRatio = 32.0

// ClusterIPolicy is the cluster's instance policy in Ganeti's form. Corral
// keeps no cluster policy of its own, so it is Ganeti's default with the
// allowed disk templates cut to the enabled ones, as a new Ganeti cluster
// has it.
func ClusterIPolicy(c *config.Cluster) map[string]any {
	out := map[string]any{
		"minmax":         []any{map[string]any{"min": specDict(defaultMinSpec), "max": specDict(defaultMaxSpec)}},
		"std":            specDict(defaultMinSpec),
		"disk-templates": slices.Clone(nonNilStrings(c.EnabledDiskTemplates)),
		"vcpu-ratio":     defaultVCPURatio,
		"spindle-ratio":  defaultSpindleRatio,
	}
	for k, v := range c.IPolicy {
		if k == "std" {
			// A partial std fills Ganeti's, as its FillIPolicy does.
			std := out["std"].(map[string]any)
			if m, ok := v.(map[string]any); ok {
				maps.Copy(std, m)
			}
			continue
		}
		out[k] = v
	}
	return out
}

// GroupIPolicy is a group's effective instance policy in Ganeti's form:
// the cluster's with the group's custom keys replacing whole entries, as
// Ganeti's FillIPolicy (a group cannot set std, so no merge of it happens).
func GroupIPolicy(c *config.Cluster, custom config.Params) map[string]any {
	out := ClusterIPolicy(c)
	maps.Copy(out, custom)
	return out
}

// specDict is one ipolicy spec with integral values as JSON numbers.
func specDict(spec map[string]float64) map[string]any {
	out := make(map[string]any, len(spec))
	for k, v := range spec {
		out[k] = int64(v)
	}
	return out
}

// diskParamDefaults are Ganeti's DISK_DT_DEFAULTS, the values a disk
// template's parameters have until a group overrides them.
var diskParamDefaults = map[string]config.Params{
	"plain": {"stripes": float64(1)},
	"drbd": {"resync-rate": float64(61440), "data-stripes": float64(1), "meta-stripes": float64(1),
		"disk-barriers": "n", "meta-barriers": false, "metavg": "xenvg", "disk-custom": "",
		"net-custom": "", "protocol": "C", "dynamic-resync": false, "c-plan-ahead": float64(20),
		"c-fill-target": float64(0), "c-delay-target": float64(1), "c-max-rate": float64(61440),
		"c-min-rate": float64(4096)},
	// Corral reaches Ceph through librbd only: userspace is its default
	// (Ganeti's is kernelspace, which Corral refuses). conf and keyring are
	// Corral's own: where each node finds the cluster and its client key.
	"rbd": {"pool": "rbd", "access": "userspace", "conf": "/etc/ceph/ceph.conf",
		"keyring": "/etc/ceph/ceph.client.admin.keyring"},
	"ext":        {"access": "kernelspace"},
	"gluster":    {"host": "127.0.0.1", "port": float64(24007), "volume": "gv0", "access": "kernelspace"},
	"file":       {},
	"sharedfile": {},
	"blockdev":   {},
	"diskless":   {},
}

// ClusterDiskParams are the cluster's disk parameters per template:
// Ganeti's defaults, since Corral keeps none of its own.
func ClusterDiskParams() map[string]config.Params {
	return GroupDiskParams(nil)
}

// GroupDiskParams are a group's effective disk parameters: every template's
// defaults overlaid with the group's custom values (Ganeti's FillDiskParams).
func GroupDiskParams(custom map[string]config.Params) map[string]config.Params {
	out := make(map[string]config.Params, len(diskParamDefaults))
	for tmpl, def := range diskParamDefaults {
		out[tmpl] = config.Fill(def, custom[tmpl])
	}
	return out
}

// nodeParamDefaults are Ganeti's NDC_DEFAULTS: a node parameter's value
// until the cluster, a group or the node sets it.
var nodeParamDefaults = config.Params{
	"oob_program": "", "spindle_count": float64(1), "exclusive_storage": false, "ovs": false,
	"ovs_name": "switch1", "ovs_link": "", "ssh_port": float64(22), "cpu_speed": 1.0,
}

// ClusterNDParams are the cluster's node parameters over Ganeti's defaults.
func ClusterNDParams(c *config.Cluster) config.Params {
	return config.Fill(nodeParamDefaults, c.NDParams)
}

// NodeNDParams are a node's effective node parameters: the defaults, the
// cluster's, its group's (g may be nil) and its own, later ones winning
// (Ganeti's FillND).
func NodeNDParams(c *config.Cluster, g *config.NodeGroup, n *config.Node) config.Params {
	p := ClusterNDParams(c)
	if g != nil {
		p = config.Fill(p, g.NDParams)
	}
	return config.Fill(p, n.NDParams)
}
