// Package iallocator speaks Ganeti's instance allocator protocol
// (doc/iallocator.rst, protocol version 2): the request document that
// describes the cluster (its node groups, nodes with their free resources,
// instances) and one request (allocate, relocate, change-group,
// node-evacuate, multi-allocate), and the answer an allocator prints
// ({"success", "info", "result"}). An Allocator answers a Document: either
// an external program found in Ganeti's iallocator search path (Debian's
// hail from ganeti-htools runs unchanged) or the built-in allocator, which
// reads the same document.
//
// The package knows no configuration store: the caller (cmdlib) fills a
// Cluster from the configuration and the nodes' reported resources.
package iallocator

import (
	"encoding/json"
	"fmt"
	"sort"
)

// Version is the protocol version Ganeti 3.0 sends (IALLOCATOR_VERSION).
const Version = 2

// Request modes (Ganeti's IALLOCATOR_MODE_*).
const (
	ModeAllocate      = "allocate"
	ModeRelocate      = "relocate"
	ModeChangeGroup   = "change-group"
	ModeNodeEvacuate  = "node-evacuate"
	ModeMultiAllocate = "multi-allocate"
)

// Node evacuation modes (Ganeti's NODE_EVAC_*).
const (
	EvacPrimary   = "primary-only"
	EvacSecondary = "secondary-only"
	EvacAll       = "all"
)

// Cluster is what the request document says about the cluster.
type Cluster struct {
	Name               string
	Tags               []string
	EnabledHypervisors []string
	IPolicy            map[string]any
	Groups             []Group
	Nodes              []Node
	Instances          []Instance
}

// Group is a node group.
type Group struct {
	UUID, Name  string
	AllocPolicy string // preferred | last_resort | unallocable
	Networks    []string
	IPolicy     map[string]any // the group's effective policy
	Tags        []string
}

// Node is a node: its flags from the configuration and, for a node that
// answered, its resources.
type Node struct {
	Name                     string
	PrimaryIP, SecondaryIP   string
	Group                    string // uuid
	Tags                     []string
	Offline, Drained         bool
	MasterCandidate          bool
	MasterCapable, VMCapable bool
	NDParams                 map[string]any
	Resources                *NodeResources // nil: offline, not vm_capable, or did not answer
}

// NodeResources are a node's resources in MiB and CPUs, as Ganeti's node
// info reports them, with the memory the configuration promises already
// subtracted from FreeMemory.
type NodeResources struct {
	TotalMemory, ReservedMemory, FreeMemory int64
	TotalDisk, FreeDisk                     int64
	TotalSpindles, FreeSpindles             int64
	TotalCPUs, ReservedCPUs                 int64
	PrimaryMemory, PrimaryUpMemory          int64 // i_pri_memory, i_pri_up_memory
}

// Instance is an existing instance.
type Instance struct {
	Name         string
	Tags         []string
	AdminState   string // up | down | offline
	VCPUs        int
	Memory       int64 // maxmem, MiB
	SpindleUse   int
	OS           string
	Nodes        []string // primary first, then secondaries (names)
	NICs         []NIC
	Disks        []Disk
	DiskTemplate string
	DisksActive  bool
	Hypervisor   string
}

// NIC is an instance NIC.
type NIC struct {
	MAC, IP, Mode, Link string
}

// Disk is an instance disk (or a requested one).
type Disk struct {
	SizeMiB int64
	Mode    string
}

// Request is one allocator request.
type Request interface {
	Mode() string
	// body is the request dict without "type".
	body(c *Cluster) (map[string]any, error)
	// extraArgs are command-line options for an external allocator.
	extraArgs() []string
}

// Document is a built request: the cluster and the request together,
// as an allocator reads it.
type Document struct {
	Cluster *Cluster
	Request Request
	JSON    []byte
}

// Build makes the request document for r.
func Build(c *Cluster, r Request) (*Document, error) {
	req, err := r.body(c)
	if err != nil {
		return nil, err
	}
	req["type"] = r.Mode()
	doc := map[string]any{
		"version":             Version,
		"cluster_name":        c.Name,
		"cluster_tags":        strs(c.Tags),
		"enabled_hypervisors": strs(c.EnabledHypervisors),
		"ipolicy":             c.IPolicy,
		"nodegroups":          groupsDict(c.Groups),
		"nodes":               nodesDict(c.Nodes),
		"instances":           instancesDict(c.Instances),
		"request":             req,
	}
	b, err := json.Marshal(doc)
	if err != nil {
		return nil, fmt.Errorf("encoding the allocator request: %w", err)
	}
	return &Document{Cluster: c, Request: r, JSON: b}, nil
}

func strs(l []string) []string {
	if l == nil {
		return []string{}
	}
	return l
}

func groupsDict(gs []Group) map[string]any {
	out := make(map[string]any, len(gs))
	for _, g := range gs {
		out[g.UUID] = map[string]any{"name": g.Name, "alloc_policy": g.AllocPolicy,
			"networks": strs(g.Networks), "ipolicy": g.IPolicy, "tags": strs(g.Tags)}
	}
	return out
}

func nodesDict(ns []Node) map[string]any {
	out := make(map[string]any, len(ns))
	for _, n := range ns {
		nd := map[string]any{"exclusive_storage": false, "spindle_count": 1}
		for k, v := range n.NDParams {
			nd[k] = v
		}
		d := map[string]any{"tags": strs(n.Tags), "primary_ip": n.PrimaryIP, "secondary_ip": n.SecondaryIP,
			"offline": n.Offline, "drained": n.Drained, "master_candidate": n.MasterCandidate,
			"group": n.Group, "master_capable": n.MasterCapable, "vm_capable": n.VMCapable, "ndparams": nd}
		if r := n.Resources; r != nil && !n.Offline {
			d["total_memory"], d["reserved_memory"], d["free_memory"] = r.TotalMemory, r.ReservedMemory, r.FreeMemory
			d["total_disk"], d["free_disk"] = r.TotalDisk, r.FreeDisk
			d["total_spindles"], d["free_spindles"] = r.TotalSpindles, r.FreeSpindles
			d["total_cpus"], d["reserved_cpus"] = r.TotalCPUs, r.ReservedCPUs
			d["i_pri_memory"], d["i_pri_up_memory"] = r.PrimaryMemory, r.PrimaryUpMemory
		}
		out[n.Name] = d
	}
	return out
}

func nicsList(nics []NIC) []any {
	out := []any{}
	for _, n := range nics {
		d := map[string]any{"mac": n.MAC, "ip": nilIfEmpty(n.IP), "mode": n.Mode, "link": n.Link}
		if n.Mode == "bridged" {
			d["bridge"] = n.Link
		}
		out = append(out, d)
	}
	return out
}

func nilIfEmpty(s string) any {
	if s == "" {
		return nil
	}
	return s
}

func disksList(ds []Disk, template string) []any {
	out := []any{}
	for _, d := range ds {
		mode := d.Mode
		if mode == "" {
			mode = "rw"
		}
		out = append(out, map[string]any{"dev_type": template, "size": d.SizeMiB, "mode": mode, "spindles": nil})
	}
	return out
}

func instancesDict(is []Instance) map[string]any {
	out := make(map[string]any, len(is))
	for _, i := range is {
		out[i.Name] = map[string]any{"tags": strs(i.Tags), "admin_state": i.AdminState, "vcpus": i.VCPUs,
			"memory": i.Memory, "spindle_use": i.SpindleUse, "os": i.OS, "nodes": strs(i.Nodes),
			"nics": nicsList(i.NICs), "disks": disksList(i.Disks, i.DiskTemplate),
			"disk_template": i.DiskTemplate, "disks_active": i.DisksActive, "hypervisor": i.Hypervisor,
			"disk_space_total": DiskSpaceTotal(i.DiskTemplate, i.Disks)}
	}
	return out
}

// DiskSpaceTotal is the space an instance's disks take on a node (Ganeti's
// ComputeDiskSize): the disk sizes for templates with node-local storage
// (plain and file; drbd adds its 128 MiB of metadata per disk), nothing for
// the others.
func DiskSpaceTotal(template string, disks []Disk) int64 {
	var sum int64
	for _, d := range disks {
		switch template {
		case "plain", "file", "sharedfile", "rbd", "ext", "gluster", "blockdev":
			sum += d.SizeMiB
		case "drbd":
			sum += d.SizeMiB + 128
		}
	}
	return sum
}

// node finds a node by name.
func (c *Cluster) node(name string) *Node {
	for i := range c.Nodes {
		if c.Nodes[i].Name == name {
			return &c.Nodes[i]
		}
	}
	return nil
}

// instance finds an instance by name.
func (c *Cluster) instance(name string) *Instance {
	for i := range c.Instances {
		if c.Instances[i].Name == name {
			return &c.Instances[i]
		}
	}
	return nil
}

// group finds a group by uuid.
func (c *Cluster) group(uuid string) *Group {
	for i := range c.Groups {
		if c.Groups[i].UUID == uuid {
			return &c.Groups[i]
		}
	}
	return nil
}

// groupName is a group's name, or its uuid when the group is unknown.
func (c *Cluster) groupName(uuid string) string {
	if g := c.group(uuid); g != nil {
		return g.Name
	}
	return uuid
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
