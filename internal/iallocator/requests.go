package iallocator

import (
	"fmt"

	"github.com/corral/corral/internal/ecode"
)

// Allocate asks for the node(s) of a new instance.
type Allocate struct {
	Name         string
	DiskTemplate string
	GroupName    string // "": any group
	OS           string
	Tags         []string
	Memory       int64
	VCPUs        int
	SpindleUse   int
	Disks        []Disk
	NICs         []NIC
	Hypervisor   string
	// RestrictTo limits the candidates to these node names; nil: all.
	RestrictTo []string
}

// Mode is "allocate".
func (a *Allocate) Mode() string { return ModeAllocate }

// RequiredNodes is how many nodes the instance needs: two for an
// internally mirrored template (drbd), one otherwise.
func (a *Allocate) RequiredNodes() int {
	if a.DiskTemplate == "drbd" {
		return 2
	}
	return 1
}

func (a *Allocate) body(*Cluster) (map[string]any, error) {
	if a.Name == "" {
		return nil, ecode.Errorf(ecode.Inval, "Request is missing 'name' parameter")
	}
	b := map[string]any{
		"name": a.Name, "disk_template": a.DiskTemplate, "group_name": nilIfEmpty(a.GroupName),
		"tags": strs(a.Tags), "os": a.OS, "vcpus": a.VCPUs, "memory": a.Memory, "spindle_use": a.SpindleUse,
		"disks": disksList(a.Disks, a.DiskTemplate), "disk_space_total": DiskSpaceTotal(a.DiskTemplate, a.Disks),
		"nics": nicsList(a.NICs), "required_nodes": a.RequiredNodes(), "hypervisor": a.Hypervisor,
	}
	if a.RestrictTo != nil {
		b["restrict-to-nodes"] = a.RestrictTo
	}
	return b, nil
}

func (a *Allocate) extraArgs() []string { return nil }

// MultiAllocate asks for the nodes of several new instances at once.
type MultiAllocate struct {
	Instances []*Allocate
}

// Mode is "multi-allocate".
func (m *MultiAllocate) Mode() string { return ModeMultiAllocate }

func (m *MultiAllocate) body(c *Cluster) (map[string]any, error) {
	l := make([]any, 0, len(m.Instances))
	for _, a := range m.Instances {
		b, err := a.body(c)
		if err != nil {
			return nil, err
		}
		l = append(l, b)
	}
	return map[string]any{"instances": l}, nil
}

func (m *MultiAllocate) extraArgs() []string { return nil }

// Relocate asks for a new node for an instance, away from RelocateFrom.
type Relocate struct {
	Name         string
	RelocateFrom []string // node names
}

// Mode is "relocate".
func (r *Relocate) Mode() string { return ModeRelocate }

func (r *Relocate) body(c *Cluster) (map[string]any, error) {
	i := c.instance(r.Name)
	if i == nil {
		return nil, ecode.Errorf(ecode.NoEnt, "Instance '%s' not known to the allocator request", r.Name)
	}
	if mirror(i.DiskTemplate) == mirrorNone {
		return nil, ecode.Errorf(ecode.Inval, "Can't relocate non-mirrored instances")
	}
	return map[string]any{"name": r.Name, "disk_space_total": DiskSpaceTotal(i.DiskTemplate, i.Disks),
		"required_nodes": 1, "relocate_from": strs(r.RelocateFrom)}, nil
}

func (r *Relocate) extraArgs() []string { return nil }

// NodeEvacuate asks where the instances of a node should go.
type NodeEvacuate struct {
	Instances        []string
	EvacMode         string
	IgnoreSoftErrors bool
}

// Mode is "node-evacuate".
func (n *NodeEvacuate) Mode() string { return ModeNodeEvacuate }

func (n *NodeEvacuate) body(*Cluster) (map[string]any, error) {
	switch n.EvacMode {
	case EvacPrimary, EvacSecondary, EvacAll:
	default:
		return nil, ecode.Errorf(ecode.Inval, "Invalid evacuation mode '%s': use %s, %s or %s", n.EvacMode, EvacPrimary, EvacSecondary, EvacAll)
	}
	return map[string]any{"instances": strs(n.Instances), "evac_mode": n.EvacMode}, nil
}

func (n *NodeEvacuate) extraArgs() []string {
	if n.IgnoreSoftErrors {
		return []string{"--ignore-soft-errors"}
	}
	return nil
}

// ChangeGroup asks for new nodes in other groups for instances.
type ChangeGroup struct {
	Instances    []string
	TargetGroups []string // uuids; empty: every other group
}

// Mode is "change-group".
func (g *ChangeGroup) Mode() string { return ModeChangeGroup }

func (g *ChangeGroup) body(*Cluster) (map[string]any, error) {
	return map[string]any{"instances": strs(g.Instances), "target_groups": strs(g.TargetGroups)}, nil
}

func (g *ChangeGroup) extraArgs() []string { return nil }

// mirror kinds of disk templates, as hail classifies them.
type mirrorKind int

const (
	mirrorNone     mirrorKind = iota // node-local data: cannot move by failover or migration
	mirrorExternal                   // data reachable from any node (diskless, sharedfile, rbd, ...)
	mirrorInternal                   // drbd: a secondary node holds a copy
)

func mirror(template string) mirrorKind {
	switch template {
	case "file", "plain":
		return mirrorNone
	case "drbd":
		return mirrorInternal
	}
	return mirrorExternal
}

// Movable reports whether an instance of this disk template can change
// primary node by failover or migration (its data is reachable elsewhere).
func Movable(template string) bool { return mirror(template) != mirrorNone }

func describe(r Request) string {
	switch r := r.(type) {
	case *Allocate:
		return fmt.Sprintf("allocate %s", r.Name)
	case *Relocate:
		return fmt.Sprintf("relocate %s", r.Name)
	}
	return r.Mode()
}
