package cmdlib

import (
	"fmt"
	"math"
	"strings"

	"github.com/corral/corral/internal/config"
	"github.com/corral/corral/internal/ecode"
)

// The instance policy (Ganeti's ipolicy) bounds what an instance may ask
// for. The cluster's is Ganeti's default (IPOLICY_DEFAULTS: Corral keeps
// no cluster ipolicy of its own); a node group's custom ipolicy overrides
// its minmax and ratios, as Ganeti's FillIPolicy does.

// Ganeti's ISPECS_MINMAX_DEFAULTS and the default vcpu-ratio.
var (
	defaultMinSpec = map[string]float64{"memory-size": 128, "cpu-count": 1, "disk-count": 1,
		"disk-size": 1024, "nic-count": 1, "spindle-use": 1}
	defaultMaxSpec = map[string]float64{"memory-size": 32768, "cpu-count": 8, "disk-count": 16,
		"disk-size": 1024 * 1024, "nic-count": 8, "spindle-use": 12}
)

const defaultVCPURatio = 4.0

// minMaxSpec is one {min, max} pair of an ipolicy's minmax.
type minMaxSpec struct{ min, max map[string]float64 }

// instancePolicy is an effective (filled) instance policy.
type instancePolicy struct {
	where     string // "cluster" or "group NAME"
	minMax    []minMaxSpec
	vcpuRatio float64
}

// clusterPolicy is the cluster's instance policy: Ganeti's defaults.
func clusterPolicy() instancePolicy {
	return instancePolicy{where: "cluster", minMax: []minMaxSpec{{defaultMinSpec, defaultMaxSpec}}, vcpuRatio: defaultVCPURatio}
}

// groupPolicy fills a group's custom ipolicy (checked when it was set, by
// checkGroupIPolicy) from the cluster's.
func groupPolicy(g *config.NodeGroup) instancePolicy {
	pol := clusterPolicy()
	if g == nil {
		return pol
	}
	pol.where = "group " + g.Name
	if r, ok := g.IPolicy["vcpu-ratio"].(float64); ok && r > 0 {
		pol.vcpuRatio = r
	}
	l, _ := g.IPolicy["minmax"].([]any)
	var custom []minMaxSpec
	for _, e := range l {
		pair, _ := e.(map[string]any)
		lo, okLo := pair["min"].(map[string]any)
		hi, okHi := pair["max"].(map[string]any)
		if !okLo || !okHi {
			continue
		}
		custom = append(custom, minMaxSpec{numbers(lo), numbers(hi)})
	}
	if len(custom) > 0 {
		pol.minMax = custom
	}
	return pol
}

func numbers(m map[string]any) map[string]float64 {
	out := make(map[string]float64, len(m))
	for k, v := range m {
		if f, ok := v.(float64); ok {
			out[k] = f
		}
	}
	return out
}

// nodePolicy is the instance policy of the node's group.
func (p *Processor) nodePolicy(n *config.Node) instancePolicy {
	g, _ := p.Cfg.Group(n.Group)
	return groupPolicy(g)
}

// specValue is one value an instance asks for, under its ipolicy name
// (cpu-count) and the parameter that sets it (vcpus).
type specValue struct {
	spec, param string
	value       float64
}

// beSpec are the backend parameters the ipolicy bounds, from filled
// beparams; memory-size is checked with maxmem and, when asked, minmem too
// (as Ganeti's set-params does).
func beSpec(be config.Params, withMinMem bool) []specValue {
	out := []specValue{
		{"memory-size", "maxmem", float64(config.MemoryMiB(be))},
		{"cpu-count", "vcpus", float64(config.VCPUs(be))},
		{"spindle-use", "spindle_use", float64(config.ParamInt(be["spindle_use"], 1))},
	}
	if withMinMem {
		out = append(out, specValue{"memory-size", "minmem", float64(config.ParamInt(be["minmem"], 0))})
	}
	return out
}

// violations are Ganeti's ComputeIPolicySpecViolation: the values fit when
// they fit one of the minmax pairs; otherwise the messages of the pair with
// the fewest violations.
func (pol instancePolicy) violations(vals []specValue) []string {
	var best []string
	for i, mm := range pol.minMax {
		var errs []string
		for _, v := range vals {
			lo, okLo := mm.min[v.spec]
			hi, okHi := mm.max[v.spec]
			if (okLo && v.value < lo) || (okHi && v.value > hi) {
				errs = append(errs, fmt.Sprintf("%s value %s is not in range [%s, %s] (%s)",
					v.spec, num(v.value), num(lo), num(hi), v.param))
			}
		}
		if len(errs) == 0 {
			return nil
		}
		if i == 0 || len(errs) < len(best) {
			best = errs
		}
	}
	return best
}

// check refuses values outside the policy, as Ganeti's OpPrereqError
// "Instance allocation to group ... violates policy".
func (pol instancePolicy) check(vals []specValue) error {
	if v := pol.violations(vals); len(v) > 0 {
		return ecode.Errorf(ecode.Inval, "Instance allocation to %s violates policy: %s (ignore_ipolicy overrides)", pol.where, strings.Join(v, ", "))
	}
	return nil
}

// maxVCPUs is how many virtual CPUs an instance may have on a node with
// cpus physical ones; 0 when the node does not say.
func (pol instancePolicy) maxVCPUs(cpus int) int {
	if cpus <= 0 {
		return 0
	}
	return int(math.Floor(float64(cpus) * pol.vcpuRatio))
}

// checkVCPUs refuses more virtual CPUs than the node's physical CPUs times
// the policy's vcpu-ratio.
func (pol instancePolicy) checkVCPUs(n *config.Node, cpus, vcpus int) error {
	if limit := pol.maxVCPUs(cpus); limit > 0 && vcpus > limit {
		return ecode.Errorf(ecode.NoRes, "vcpus value %d is above what node %s can give an instance: %d physical CPUs times the %s's vcpu-ratio %s is %d",
			vcpus, n.Name, cpus, pol.where, num(pol.vcpuRatio), limit)
	}
	return nil
}

func num(f float64) string {
	if f == math.Trunc(f) && math.Abs(f) < 1e15 {
		return fmt.Sprintf("%d", int64(f))
	}
	return fmt.Sprint(f)
}
