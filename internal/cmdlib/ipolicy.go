package cmdlib

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"

	"github.com/corral/corral/internal/config"
	"github.com/corral/corral/internal/ecode"
)

// The instance policy (Ganeti's ipolicy) bounds what an instance may ask
// for. The cluster's is its custom entries over Ganeti's defaults
// (IPOLICY_DEFAULTS, with the enabled disk templates); a node group's
// custom ipolicy replaces whole entries of it, as Ganeti's FillIPolicy
// does (see ClusterIPolicy and GroupIPolicy).

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
	groupUUID, groupName string // empty for the cluster's own
	minMax               []minMaxSpec
	diskTemplates        []string
	vcpuRatio            float64
	spindleRatio         float64
	// ownMinMax is set when the group or the cluster has minmax specs of
	// its own: then every spec is checked. Under Ganeti's default specs only memory,
	// CPUs and spindles are: its 1 GiB minimum disk size and one-NIC
	// minimum would refuse the small instances development clusters run.
	ownMinMax bool
}

// beSpecNames are the specs checked under the default minmax.
var beSpecNames = []string{"memory-size", "cpu-count", "spindle-use"}

// clusterPolicy is the cluster's instance policy.
func clusterPolicy(c *config.Cluster) instancePolicy {
	pol := parsePolicy(ClusterIPolicy(c))
	_, pol.ownMinMax = c.IPolicy["minmax"]
	return pol
}

// groupPolicy is a group's effective policy (the cluster's when g is nil).
func groupPolicy(c *config.Cluster, g *config.NodeGroup) instancePolicy {
	if g == nil {
		return clusterPolicy(c)
	}
	pol := parsePolicy(GroupIPolicy(c, g.IPolicy))
	pol.groupUUID, pol.groupName = g.UUID, g.Name
	_, groupMinMax := g.IPolicy["minmax"]
	_, clusterMinMax := c.IPolicy["minmax"]
	pol.ownMinMax = groupMinMax || clusterMinMax
	return pol
}

// parsePolicy reads an ipolicy in Ganeti's form; entries missing or of the
// wrong shape keep Ganeti's defaults.
func parsePolicy(m map[string]any) instancePolicy {
	pol := instancePolicy{minMax: []minMaxSpec{{defaultMinSpec, defaultMaxSpec}}, vcpuRatio: defaultVCPURatio, spindleRatio: defaultSpindleRatio}
	if r, ok := number(m["vcpu-ratio"]); ok && r > 0 {
		pol.vcpuRatio = r
	}
	if r, ok := number(m["spindle-ratio"]); ok && r > 0 {
		pol.spindleRatio = r
	}
	switch l := m["disk-templates"].(type) {
	case []string:
		pol.diskTemplates = slices.Clone(l)
	case []any:
		for _, t := range l {
			if s, ok := t.(string); ok {
				pol.diskTemplates = append(pol.diskTemplates, s)
			}
		}
	}
	l, _ := m["minmax"].([]any)
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

func number(v any) (float64, bool) {
	switch x := v.(type) {
	case float64:
		return x, true
	case int64:
		return float64(x), true
	case int:
		return float64(x), true
	}
	return 0, false
}

func numbers(m map[string]any) map[string]float64 {
	out := make(map[string]float64, len(m))
	for k, v := range m {
		if f, ok := number(v); ok {
			out[k] = f
		}
	}
	return out
}

// nodePolicy is the instance policy of the node's group.
func (p *Processor) nodePolicy(n *config.Node) instancePolicy {
	g, _ := p.Cfg.Group(n.Group)
	return groupPolicy(p.Cfg.Cluster(), g)
}

// specValue is one value an instance asks for, under its ipolicy name
// (cpu-count) and, for per-disk values, the disk's index as qualifier.
type specValue struct {
	spec, qualifier string
	value           float64
}

// instanceSpecs is what an instance asks of a policy: values checked
// against the minmax pairs and, when template is set, its disk template
// (for disks disks; 0 is diskless).
type instanceSpecs struct {
	values   []specValue
	template string
	disks    int
}

// beSpec are the backend values the ipolicy bounds, from filled beparams;
// memory-size is checked with maxmem and, when asked, minmem too (as
// Ganeti's set-params checks both).
func beSpec(be config.Params, withMinMem bool) []specValue {
	out := []specValue{
		{"memory-size", "", float64(config.MemoryMiB(be))},
		{"cpu-count", "", float64(config.VCPUs(be))},
		{"spindle-use", "", float64(config.ParamInt(be["spindle_use"], 1))},
	}
	if withMinMem {
		out = append(out, specValue{"memory-size", "", float64(config.ParamInt(be["minmem"], 0))})
	}
	return out
}

// beSpecs are the backend values alone (a change of beparams).
func beSpecs(be config.Params, withMinMem bool) *instanceSpecs {
	return &instanceSpecs{values: beSpec(be, withMinMem)}
}

// fullSpecs is everything Ganeti's ComputeIPolicyInstanceSpecViolation
// checks of an instance: memory, CPUs, spindles, NIC count, disk count,
// each disk's size and the disk template.
func fullSpecs(be config.Params, template string, disks []config.Disk, nics int) *instanceSpecs {
	s := &instanceSpecs{values: beSpec(be, false), template: template, disks: len(disks)}
	s.values = append(s.values, specValue{"nic-count", "", float64(nics)})
	for i, d := range disks {
		s.values = append(s.values, specValue{"disk-size", fmt.Sprint(i), float64(d.SizeMiB)})
	}
	if len(disks) > 0 {
		s.values = append(s.values, specValue{"disk-count", "", float64(len(disks))})
	}
	return s
}

// instanceFullSpecs are an instance's specs as configured.
func instanceFullSpecs(c *config.Cluster, inst *config.Instance) *instanceSpecs {
	return fullSpecs(config.Fill(c.BEParams, inst.BEParams), inst.DiskTemplate, inst.Disks, len(inst.NICs))
}

// violations are Ganeti's ComputeIPolicySpecViolation: the disk template
// must be allowed, and the values must fit one of the minmax pairs;
// otherwise the messages of the pair with the fewest violations.
func (pol instancePolicy) violations(s *instanceSpecs) []string {
	var out []string
	if s.template != "" {
		allowed := slices.Clone(pol.diskTemplates)
		sort.Strings(allowed)
		switch {
		case s.disks == 0 && !slices.Contains(allowed, config.DTDiskless):
			out = append(out, fmt.Sprintf("Disk template %s is not allowed (allowed templates %s)", config.DTDiskless, strings.Join(allowed, ", ")))
		case s.disks > 0 && !slices.Contains(allowed, s.template):
			out = append(out, fmt.Sprintf("Disk template %s is not allowed (allowed templates: %s)", s.template, strings.Join(allowed, ", ")))
		}
	}
	var best []string
	for i, mm := range pol.minMax {
		var errs []string
		for _, v := range s.values {
			if !pol.ownMinMax && !slices.Contains(beSpecNames, v.spec) {
				continue
			}
			lo, okLo := mm.min[v.spec]
			hi, okHi := mm.max[v.spec]
			if !okLo {
				lo = v.value
			}
			if !okHi {
				hi = v.value
			}
			if v.value < lo || v.value > hi {
				name := v.spec
				if v.qualifier != "" {
					name += "/" + v.qualifier
				}
				errs = append(errs, fmt.Sprintf("%s value %s is not in range [%s, %s]", name, num(v.value), num(lo), num(hi)))
			}
		}
		if i == 0 || len(errs) < len(best) {
			best = errs
		}
	}
	return append(out, best...)
}

// check refuses values outside the policy with Ganeti's OpPrereqError.
func (pol instancePolicy) check(s *instanceSpecs) error {
	v := pol.violations(s)
	if len(v) == 0 {
		return nil
	}
	if pol.groupUUID == "" {
		return ecode.Errorf(ecode.Inval, "Instance allocation to the cluster violates policy: %s", strings.Join(v, ", "))
	}
	return ecode.Errorf(ecode.Inval, "Instance allocation to group %s (%s) violates policy: %s", pol.groupUUID, pol.groupName, strings.Join(v, ", "))
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
			vcpus, n.Name, cpus, pol.where(), num(pol.vcpuRatio), limit)
	}
	return nil
}

// checkSpindles refuses a spindle use above the node's spindle_count times
// the policy's spindle-ratio.
func (pol instancePolicy) checkSpindles(n *config.Node, spindles, use int) error {
	if spindles <= 0 || use <= 0 {
		return nil
	}
	if limit := int(math.Floor(float64(spindles) * pol.spindleRatio)); use > limit {
		return ecode.Errorf(ecode.NoRes, "spindle_use value %d is above what node %s can give an instance: %d spindles times the %s's spindle-ratio %s is %d",
			use, n.Name, spindles, pol.where(), num(pol.spindleRatio), limit)
	}
	return nil
}

func (pol instancePolicy) where() string {
	if pol.groupName == "" {
		return "cluster"
	}
	return "group " + pol.groupName
}

func num(f float64) string {
	if f == math.Trunc(f) && math.Abs(f) < 1e15 {
		return fmt.Sprintf("%d", int64(f))
	}
	return fmt.Sprint(f)
}

// checkTargetGroupPolicy is Ganeti's CheckTargetNodeIPolicy: an instance
// moving to a node of another group must meet that group's policy;
// with ignore the violation is only logged.
func (p *Processor) checkTargetGroupPolicy(inst *config.Instance, src, target *config.Node, ignore bool) error {
	if src.Group == target.Group {
		return nil
	}
	v := p.nodePolicy(target).violations(instanceFullSpecs(p.Cfg.Cluster(), inst))
	if len(v) == 0 {
		return nil
	}
	msg := fmt.Sprintf("Instance does not meet target node group's (%s) instance policy: %s", target.Group, strings.Join(v, ", "))
	if ignore {
		p.Log.Warn(msg, "instance", inst.Name)
		return nil
	}
	return ecode.Errorf(ecode.Inval, "%s", msg)
}
