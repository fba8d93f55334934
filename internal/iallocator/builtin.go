package iallocator

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
)

// Builtin is Corral's own allocator. It answers every mode from the same
// document an external allocator gets: a node qualifies when it is online,
// undrained and vm_capable, in a group whose policy allows allocation, and
// has the memory, node-local disk and CPUs the instance needs under its
// group's instance policy; among those it picks, in a preferred group
// before a last_resort one, the node with the most free memory left.
// Placements made within one request count against later ones.
type Builtin struct{}

// Name is BuiltinName.
func (Builtin) Name() string { return BuiltinName }

// Run answers doc.
func (b Builtin) Run(_ context.Context, doc *Document) (*Answer, error) {
	st := newPlacementState(doc.Cluster)
	switch r := doc.Request.(type) {
	case *Allocate:
		return st.allocate(r), nil
	case *MultiAllocate:
		m := &MultiResult{}
		for _, a := range r.Instances {
			if ans := st.allocate(a); ans.Success {
				m.Allocated = append(m.Allocated, Placement{Name: a.Name, Nodes: ans.Nodes})
			} else {
				m.Failed = append(m.Failed, a.Name)
			}
		}
		return &Answer{Success: true, Info: fmt.Sprintf("allocated %d of %d instances", len(m.Allocated), len(r.Instances)), Multi: m}, nil
	case *Relocate:
		return st.relocate(r), nil
	case *NodeEvacuate:
		return st.evacuate(r.Instances, r.EvacMode, nil), nil
	case *ChangeGroup:
		return st.evacuate(r.Instances, "", r.TargetGroups), nil
	}
	return nil, fmt.Errorf("the built-in allocator has no mode %s", doc.Request.Mode())
}

// nodeRoom is what is left on a node as the request's placements are made.
type nodeRoom struct {
	node      *Node
	memFree   int64
	diskFree  int64
	cpus      int64
	vcpusUsed int64
}

type placementState struct {
	c        *Cluster
	rooms    map[string]*nodeRoom      // usable nodes by name
	policies map[string]map[string]any // group uuid -> effective policy, in JSON's types
	cluster  map[string]any            // the cluster's policy, for nodes of unknown groups
}

// jsonTypes gives a policy the types a decoded document has (numbers as
// float64, lists as []any), whatever types the caller built it with.
func jsonTypes(m map[string]any) map[string]any {
	b, err := json.Marshal(m)
	if err != nil {
		return nil
	}
	var out map[string]any
	if json.Unmarshal(b, &out) != nil {
		return nil
	}
	return out
}

func newPlacementState(c *Cluster) *placementState {
	st := &placementState{c: c, rooms: map[string]*nodeRoom{}, policies: map[string]map[string]any{}, cluster: jsonTypes(c.IPolicy)}
	for _, g := range c.Groups {
		if g.IPolicy != nil {
			st.policies[g.UUID] = jsonTypes(g.IPolicy)
		}
	}
	for i := range c.Nodes {
		n := &c.Nodes[i]
		if n.Offline || n.Drained || !n.VMCapable || n.Resources == nil {
			continue
		}
		st.rooms[n.Name] = &nodeRoom{node: n, memFree: n.Resources.FreeMemory, diskFree: n.Resources.FreeDisk, cpus: n.Resources.TotalCPUs}
	}
	for _, inst := range c.Instances {
		if len(inst.Nodes) > 0 {
			if r := st.rooms[inst.Nodes[0]]; r != nil {
				r.vcpusUsed += int64(inst.VCPUs)
			}
		}
	}
	return st
}

// demand is what an instance asks of a node.
type demand struct {
	template  string
	mem       int64
	vcpus     int
	localDisk int64 // disk taken on the node itself
}

func allocDemand(a *Allocate) demand {
	d := demand{template: a.DiskTemplate, mem: a.Memory, vcpus: a.VCPUs}
	if mirror(a.DiskTemplate) != mirrorExternal {
		d.localDisk = DiskSpaceTotal(a.DiskTemplate, a.Disks)
	}
	return d
}

func instanceDemand(i *Instance) demand {
	d := demand{template: i.DiskTemplate, mem: i.Memory, vcpus: i.VCPUs}
	if mirror(i.DiskTemplate) != mirrorExternal {
		d.localDisk = DiskSpaceTotal(i.DiskTemplate, i.Disks)
	}
	return d
}

// why says why room r cannot take d ("" when it can).
func (st *placementState) why(r *nodeRoom, d demand) string {
	pol := st.cluster
	if p, ok := st.policies[r.node.Group]; ok {
		pol = p
	}
	switch {
	case r.memFree < d.mem:
		return fmt.Sprintf("%d MiB of memory free, %d MiB needed", r.memFree, d.mem)
	case d.localDisk > 0 && r.diskFree < d.localDisk:
		return fmt.Sprintf("%d MiB of disk free, %d MiB needed", r.diskFree, d.localDisk)
	}
	if ratio, ok := pol["vcpu-ratio"].(float64); ok && r.cpus > 0 && float64(r.vcpusUsed+int64(d.vcpus)) > float64(r.cpus)*ratio {
		return fmt.Sprintf("%d virtual CPUs in use, %d more exceed %d CPUs × vcpu-ratio %g", r.vcpusUsed, d.vcpus, r.cpus, ratio)
	}
	if dts, ok := pol["disk-templates"].([]any); ok && !slices.Contains(dts, any(d.template)) {
		return fmt.Sprintf("disk template %s is not allowed by the instance policy", d.template)
	}
	if v := policySpecViolation(pol, d); v != "" {
		return v
	}
	return ""
}

// policySpecViolation checks d's memory and CPU count against the
// policy's minmax pairs (some pair must hold both): the bounds Corral's
// own instance checks enforce, so that the built-in allocator moves any
// instance Corral accepted. External allocators apply the whole policy.
func policySpecViolation(pol map[string]any, d demand) string {
	mm, ok := pol["minmax"].([]any)
	if !ok || len(mm) == 0 {
		return ""
	}
	vals := map[string]int64{"memory-size": d.mem, "cpu-count": int64(d.vcpus)}
	var last string
	for _, pair := range mm {
		p, _ := pair.(map[string]any)
		lo, _ := p["min"].(map[string]any)
		hi, _ := p["max"].(map[string]any)
		last = ""
		for _, k := range []string{"memory-size", "cpu-count"} {
			v := vals[k]
			if l, ok := lo[k].(float64); ok && float64(v) < l {
				last = fmt.Sprintf("%s %d is below the instance policy's minimum %g", k, v, l)
				break
			}
			if h, ok := hi[k].(float64); ok && float64(v) > h {
				last = fmt.Sprintf("%s %d is above the instance policy's maximum %g", k, v, h)
				break
			}
		}
		if last == "" {
			return ""
		}
	}
	return last
}

// pick chooses a node for d among the usable nodes that pass keep, or
// explains why there is none.
func (st *placementState) pick(d demand, keep func(*Node) bool) (*nodeRoom, string) {
	type cand struct {
		r    *nodeRoom
		rank int
	}
	var cands []cand
	var reasons []string
	for _, r := range st.rooms {
		if !keep(r.node) {
			continue
		}
		rank := 0
		if g := st.c.group(r.node.Group); g != nil {
			switch g.AllocPolicy {
			case "unallocable":
				continue
			case "last_resort":
				rank = 1
			}
		}
		if w := st.why(r, d); w != "" {
			reasons = append(reasons, r.node.Name+": "+w)
			continue
		}
		cands = append(cands, cand{r, rank})
	}
	if len(cands) == 0 {
		sort.Strings(reasons)
		if len(reasons) == 0 {
			return nil, "no usable node (online, undrained, vm_capable, in an allocable group)"
		}
		return nil, strings.Join(reasons, "; ")
	}
	sort.Slice(cands, func(i, j int) bool {
		a, b := cands[i], cands[j]
		if a.rank != b.rank {
			return a.rank < b.rank
		}
		if a.r.memFree-d.mem != b.r.memFree-d.mem {
			return a.r.memFree > b.r.memFree
		}
		return a.r.node.Name < b.r.node.Name
	})
	return cands[0].r, ""
}

// take books d on r.
func (st *placementState) take(r *nodeRoom, d demand) {
	r.memFree -= d.mem
	r.diskFree -= d.localDisk
	r.vcpusUsed += int64(d.vcpus)
}

func (st *placementState) allocate(a *Allocate) *Answer {
	if a.RequiredNodes() != 1 {
		return &Answer{Info: fmt.Sprintf("disk template %s needs %d nodes; the built-in allocator places one", a.DiskTemplate, a.RequiredNodes())}
	}
	d := allocDemand(a)
	r, why := st.pick(d, func(n *Node) bool {
		if a.GroupName != "" {
			if g := st.c.group(n.Group); g == nil || (g.Name != a.GroupName && g.UUID != a.GroupName) {
				return false
			}
		}
		return a.RestrictTo == nil || slices.Contains(a.RestrictTo, n.Name)
	})
	if r == nil {
		return &Answer{Info: fmt.Sprintf("no node can hold instance %s: %s", a.Name, why)}
	}
	st.take(r, d)
	return &Answer{Success: true, Info: fmt.Sprintf("instance %s on node %s", a.Name, r.node.Name), Nodes: []string{r.node.Name}}
}

func (st *placementState) relocate(rq *Relocate) *Answer {
	inst := st.c.instance(rq.Name)
	if inst == nil || len(inst.Nodes) == 0 {
		return &Answer{Info: fmt.Sprintf("instance %s is unknown", rq.Name)}
	}
	primary := st.c.node(inst.Nodes[0])
	d := instanceDemand(inst)
	r, why := st.pick(d, func(n *Node) bool {
		return !slices.Contains(inst.Nodes, n.Name) && !slices.Contains(rq.RelocateFrom, n.Name) &&
			(primary == nil || n.Group == primary.Group)
	})
	if r == nil {
		return &Answer{Info: fmt.Sprintf("no node can take instance %s: %s", rq.Name, why)}
	}
	st.take(r, d)
	return &Answer{Success: true, Info: fmt.Sprintf("instance %s to node %s", rq.Name, r.node.Name), Nodes: []string{r.node.Name}}
}

// evacuate moves instances off their primary node: within its group for a
// node evacuation (mode set), into targetGroups (uuids; none: any other
// group) for a group change (mode "").
func (st *placementState) evacuate(names []string, mode string, targetGroups []string) *Answer {
	res := &EvacResult{Moved: []Moved{}, Failed: []Failed{}, Jobs: [][]json.RawMessage{}}
	for _, name := range names {
		inst := st.c.instance(name)
		if inst == nil || len(inst.Nodes) == 0 {
			res.Failed = append(res.Failed, Failed{name, "instance unknown to the allocator"})
			continue
		}
		if mode == EvacSecondary || mirror(inst.DiskTemplate) == mirrorInternal {
			res.Failed = append(res.Failed, Failed{name, fmt.Sprintf("instances with disk template '%s' have no secondary node to change", inst.DiskTemplate)})
			continue
		}
		if mirror(inst.DiskTemplate) == mirrorNone {
			res.Failed = append(res.Failed, Failed{name, fmt.Sprintf("instances with disk template '%s' keep their data on node %s and cannot be failed over or migrated", inst.DiskTemplate, inst.Nodes[0])})
			continue
		}
		primary := st.c.node(inst.Nodes[0])
		d := instanceDemand(inst)
		r, why := st.pick(d, func(n *Node) bool {
			if slices.Contains(inst.Nodes, n.Name) {
				return false
			}
			if mode != "" {
				return primary == nil || n.Group == primary.Group
			}
			if len(targetGroups) > 0 {
				return slices.Contains(targetGroups, n.Group)
			}
			return primary == nil || n.Group != primary.Group
		})
		if r == nil {
			res.Failed = append(res.Failed, Failed{name, why})
			continue
		}
		st.take(r, d)
		res.Moved = append(res.Moved, Moved{Name: name, Group: st.c.groupName(r.node.Group), Nodes: []string{r.node.Name}})
		res.Jobs = append(res.Jobs, []json.RawMessage{MigrateOp(name, r.node.Name)})
	}
	info := fmt.Sprintf("%d instances moved, %d failed", len(res.Moved), len(res.Failed))
	return &Answer{Success: true, Info: info, Evac: res}
}

// MigrateOp is the opcode that moves an instance with shared or no
// storage to target: a migration that falls back to a failover when the
// instance is not running, with the parameters hail gives it.
func MigrateOp(instance, target string) json.RawMessage {
	b, _ := json.Marshal(map[string]any{ // a map of strings and bools always encodes
		"OP_ID": "OP_INSTANCE_MIGRATE", "instance_name": instance, "target_node": target,
		"allow_failover": true, "allow_runtime_changes": false, "ignore_ipolicy": false,
		"cleanup": false, "ignore_hvversions": true,
	})
	return b
}
