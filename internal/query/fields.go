package query

import (
	"github.com/corral/corral/internal/config"
	"github.com/corral/corral/internal/nodeapi"
)

// InstanceRow is an instance with what its fields need.
type InstanceRow struct {
	Inst    *config.Instance
	Cluster *config.Cluster
	PNode   *config.Node
	// Live data; LiveState is RSNormal when the node answered.
	Live      *nodeapi.RunningInstance
	LiveState int
}

func (r *InstanceRow) live() (any, int) { return nil, r.LiveState }

// Status is Ganeti's combined instance status.
func (r *InstanceRow) Status() (any, int) {
	switch {
	case r.PNode == nil:
		return "ERROR_nodedown", RSNormal
	case r.PNode.Offline:
		return "ERROR_nodeoffline", RSNormal
	case r.LiveState != RSNormal:
		return "ERROR_nodedown", RSNormal
	}
	up := r.Inst.AdminState == config.AdminUp
	switch {
	case r.Live != nil && up:
		return "running", RSNormal
	case r.Live != nil:
		return "ERROR_up", RSNormal
	case up:
		return "ERROR_down", RSNormal
	case r.Inst.AdminState == config.AdminOffline:
		return "ADMIN_offline", RSNormal
	}
	return "ADMIN_down", RSNormal
}

func ok(v any) (any, int) { return v, RSNormal }

func strs[T any](l []T, f func(T) string) []string {
	out := make([]string, 0, len(l))
	for _, e := range l {
		out = append(out, f(e))
	}
	return out
}

func tags(t []string) []string {
	if t == nil {
		return []string{}
	}
	return t
}

func emptyIfNil(p config.Params) config.Params {
	if p == nil {
		return config.Params{}
	}
	return p
}

// Instances is the instance resource (Ganeti's I_FIELDS and more).
func Instances() *Resource[*InstanceRow] {
	return NewResource("instance", []Field[*InstanceRow]{
		{Name: "name", Title: "Instance", Kind: KText, Doc: "Instance name", Get: func(r *InstanceRow) (any, int) { return ok(r.Inst.Name) }},
		{Name: "uuid", Title: "UUID", Kind: KText, Doc: "Instance UUID", Get: func(r *InstanceRow) (any, int) { return ok(r.Inst.UUID) }},
		{Name: "os", Title: "OS", Kind: KText, Doc: "Operating system", Get: func(r *InstanceRow) (any, int) { return ok(r.Inst.OS) }},
		{Name: "hypervisor", Title: "Hypervisor", Kind: KText, Doc: "Hypervisor name", Get: func(r *InstanceRow) (any, int) { return ok(r.Inst.Hypervisor) }},
		{Name: "admin_state", Title: "InstanceState", Kind: KText, Doc: "Desired state (up, down, offline)", Get: func(r *InstanceRow) (any, int) { return ok(r.Inst.AdminState) }},
		{Name: "admin_up", Title: "Autostart", Kind: KBool, Doc: "Whether the instance should be up", Get: func(r *InstanceRow) (any, int) { return ok(r.Inst.AdminState == config.AdminUp) }},
		{Name: "pnode", Title: "Primary_node", Kind: KText, Doc: "Primary node", Get: func(r *InstanceRow) (any, int) {
			if r.PNode == nil {
				return nil, RSUnavail
			}
			return ok(r.PNode.Name)
		}},
		{Name: "pnode.group", Title: "PrimaryNodeGroup", Kind: KText, Doc: "Primary node's group uuid", Get: func(r *InstanceRow) (any, int) {
			if r.PNode == nil {
				return nil, RSUnavail
			}
			return ok(r.PNode.Group)
		}},
		{Name: "snodes", Title: "Secondary_Nodes", Kind: KOther, Doc: "Secondary nodes", Get: func(r *InstanceRow) (any, int) { return ok([]string{}) }},
		{Name: "disk_template", Title: "Disk_template", Kind: KText, Doc: "Disk template", Get: func(r *InstanceRow) (any, int) { return ok(r.Inst.DiskTemplate) }},
		{Name: "disk.count", Title: "Disks", Kind: KNumber, Doc: "Number of disks", Get: func(r *InstanceRow) (any, int) { return ok(len(r.Inst.Disks)) }},
		{Name: "disk.sizes", Title: "Disk_sizes", Kind: KOther, Doc: "Disk sizes (MiB)", Get: func(r *InstanceRow) (any, int) {
			out := make([]int64, 0, len(r.Inst.Disks))
			for _, d := range r.Inst.Disks {
				out = append(out, d.SizeMiB)
			}
			return ok(out)
		}},
		{Name: "disk.spindles", Title: "Disk_spindles", Kind: KOther, Doc: "Disk spindles", Get: func(r *InstanceRow) (any, int) {
			out := make([]any, len(r.Inst.Disks))
			return ok(out)
		}},
		{Name: "disk_usage", Title: "DiskUsage", Kind: KUnit, Doc: "Disk space used (MiB)", Get: func(r *InstanceRow) (any, int) {
			var s int64
			for _, d := range r.Inst.Disks {
				s += d.SizeMiB
			}
			return ok(s)
		}},
		{Name: "disk.uuids", Title: "Disk_UUIDs", Kind: KOther, Doc: "Disk UUIDs", Get: func(r *InstanceRow) (any, int) {
			return ok(strs(r.Inst.Disks, func(d config.Disk) string { return d.UUID }))
		}},
		{Name: "disk.names", Title: "Disk_names", Kind: KOther, Doc: "Disk names", Get: func(r *InstanceRow) (any, int) {
			out := make([]any, len(r.Inst.Disks))
			for i, d := range r.Inst.Disks {
				if d.Name != "" {
					out[i] = d.Name
				}
			}
			return ok(out)
		}},
		{Name: "nic.count", Title: "NICs", Kind: KNumber, Doc: "Number of NICs", Get: func(r *InstanceRow) (any, int) { return ok(len(r.Inst.NICs)) }},
		{Name: "nic.macs", Title: "NIC_MACs", Kind: KOther, Doc: "NIC MAC addresses", Get: func(r *InstanceRow) (any, int) {
			return ok(strs(r.Inst.NICs, func(n config.NIC) string { return n.MAC }))
		}},
		{Name: "nic.ips", Title: "NIC_IPs", Kind: KOther, Doc: "NIC IP addresses", Get: func(r *InstanceRow) (any, int) {
			out := make([]any, len(r.Inst.NICs))
			for i, n := range r.Inst.NICs {
				if n.IP != "" {
					out[i] = n.IP
				}
			}
			return ok(out)
		}},
		{Name: "nic.modes", Title: "NIC_modes", Kind: KOther, Doc: "NIC modes", Get: func(r *InstanceRow) (any, int) {
			return ok(strs(r.Inst.NICs, func(n config.NIC) string { return n.Mode }))
		}},
		{Name: "nic.links", Title: "NIC_links", Kind: KOther, Doc: "NIC links", Get: func(r *InstanceRow) (any, int) {
			return ok(strs(r.Inst.NICs, func(n config.NIC) string { return n.Link }))
		}},
		{Name: "nic.bridges", Title: "NIC_bridges", Kind: KOther, Doc: "NIC bridges (bridged mode)", Get: func(r *InstanceRow) (any, int) {
			out := make([]any, len(r.Inst.NICs))
			for i, n := range r.Inst.NICs {
				if n.Mode == "bridged" {
					out[i] = n.Link
				}
			}
			return ok(out)
		}},
		{Name: "nic.uuids", Title: "NIC_UUIDs", Kind: KOther, Doc: "NIC UUIDs", Get: func(r *InstanceRow) (any, int) {
			return ok(strs(r.Inst.NICs, func(n config.NIC) string { return n.UUID }))
		}},
		{Name: "nic.names", Title: "NIC_Names", Kind: KOther, Doc: "NIC names", Get: func(r *InstanceRow) (any, int) {
			out := make([]any, len(r.Inst.NICs))
			for i, n := range r.Inst.NICs {
				if n.Name != "" {
					out[i] = n.Name
				}
			}
			return ok(out)
		}},
		{Name: "nic.networks", Title: "NIC_networks", Kind: KOther, Doc: "NIC networks", Get: func(r *InstanceRow) (any, int) { return ok(make([]any, len(r.Inst.NICs))) }},
		{Name: "nic.networks.names", Title: "NIC_networks_names", Kind: KOther, Doc: "NIC network names", Get: func(r *InstanceRow) (any, int) { return ok(make([]any, len(r.Inst.NICs))) }},
		{Name: "network_port", Title: "Network_port", Kind: KOther, Doc: "Console port", Get: func(r *InstanceRow) (any, int) {
			if r.Inst.NetworkPort == 0 {
				return nil, RSNormal
			}
			return ok(r.Inst.NetworkPort)
		}},
		{Name: "beparams", Title: "BackendParameters", Kind: KOther, Doc: "Backend parameters (filled)", Get: func(r *InstanceRow) (any, int) {
			be := config.Fill(r.Cluster.BEParams, r.Inst.BEParams)
			be["memory"] = be["maxmem"] // Ganeti's compatibility alias
			return ok(be)
		}},
		{Name: "hvparams", Title: "HypervisorParameters", Kind: KOther, Doc: "Hypervisor parameters (filled)", Get: func(r *InstanceRow) (any, int) {
			return ok(config.Fill(r.Cluster.HVParams[r.Inst.Hypervisor], r.Inst.HVParams))
		}},
		{Name: "osparams", Title: "OpSysParameters", Kind: KOther, Doc: "OS parameters (filled)", Get: func(r *InstanceRow) (any, int) {
			return ok(config.Fill(r.Cluster.OSParams[osBase(r.Inst.OS)], r.Inst.OSParams))
		}},
		{Name: "custom_beparams", Title: "CustomBackendParameters", Kind: KOther, Doc: "Custom backend parameters", Get: func(r *InstanceRow) (any, int) { return ok(emptyIfNil(r.Inst.BEParams)) }},
		{Name: "custom_hvparams", Title: "CustomHypervisorParameters", Kind: KOther, Doc: "Custom hypervisor parameters", Get: func(r *InstanceRow) (any, int) { return ok(emptyIfNil(r.Inst.HVParams)) }},
		{Name: "custom_osparams", Title: "CustomOpSysParameters", Kind: KOther, Doc: "Custom OS parameters", Get: func(r *InstanceRow) (any, int) { return ok(emptyIfNil(r.Inst.OSParams)) }},
		{Name: "custom_nicparams", Title: "CustomNicParameters", Kind: KOther, Doc: "Custom NIC parameters", Get: func(r *InstanceRow) (any, int) {
			out := make([]any, 0, len(r.Inst.NICs))
			for _, n := range r.Inst.NICs {
				out = append(out, map[string]any{"mode": n.Mode, "link": n.Link})
			}
			return ok(out)
		}},
		{Name: "oper_state", Title: "Running", Kind: KBool, Live: true, Doc: "Whether the instance runs", Get: func(r *InstanceRow) (any, int) {
			if r.LiveState != RSNormal {
				return r.live()
			}
			return ok(r.Live != nil)
		}},
		{Name: "oper_ram", Title: "Memory", Kind: KUnit, Live: true, Doc: "Memory in use (MiB)", Get: func(r *InstanceRow) (any, int) {
			if r.LiveState != RSNormal {
				return r.live()
			}
			if r.Live == nil {
				return 0, RSNormal
			}
			return ok(r.Live.MemoryMiB)
		}},
		{Name: "oper_vcpus", Title: "VCPUs", Kind: KNumber, Live: true, Doc: "CPUs in use", Get: func(r *InstanceRow) (any, int) {
			if r.LiveState != RSNormal {
				return r.live()
			}
			if r.Live == nil {
				return 0, RSNormal
			}
			return ok(r.Live.VCPUs)
		}},
		{Name: "status", Title: "Status", Kind: KText, Live: true, Doc: "Combined admin and runtime status", Get: func(r *InstanceRow) (any, int) { return r.Status() }},
		{Name: "be/memory", Title: "ConfigMemory", Kind: KUnit, Doc: "Configured memory (MiB)", Get: func(r *InstanceRow) (any, int) {
			return ok(config.MemoryMiB(config.Fill(r.Cluster.BEParams, r.Inst.BEParams)))
		}},
		{Name: "be/vcpus", Title: "ConfigVCPUs", Kind: KNumber, Doc: "Configured CPUs", Get: func(r *InstanceRow) (any, int) {
			return ok(config.VCPUs(config.Fill(r.Cluster.BEParams, r.Inst.BEParams)))
		}},
		{Name: "ctime", Title: "CTime", Kind: KTimestamp, Doc: "Creation time", Get: func(r *InstanceRow) (any, int) { return ok(r.Inst.CTime) }},
		{Name: "mtime", Title: "MTime", Kind: KTimestamp, Doc: "Modification time", Get: func(r *InstanceRow) (any, int) { return ok(r.Inst.MTime) }},
		{Name: "serial_no", Title: "SerialNo", Kind: KNumber, Doc: "Serial number", Get: func(r *InstanceRow) (any, int) { return ok(r.Inst.Serial) }},
		{Name: "tags", Title: "Tags", Kind: KOther, Doc: "Tags", Get: func(r *InstanceRow) (any, int) { return ok(tags(r.Inst.Tags)) }},
	})
}

func osBase(os string) string {
	for i := 0; i < len(os); i++ {
		if os[i] == '+' {
			return os[:i]
		}
	}
	return os
}

// NodeRow is a node with what its fields need.
type NodeRow struct {
	Node      *config.Node
	Master    string // master node uuid
	Group     *config.NodeGroup
	Primary   []string // instance names
	Facts     *nodeapi.NodeInfoReply
	LiveState int
}

func nodeLive(r *NodeRow, f func(*nodeapi.NodeInfoReply) any) (any, int) {
	if r.Node.Offline {
		return nil, RSOffline
	}
	if r.LiveState != RSNormal || r.Facts == nil {
		return nil, RSUnavail
	}
	return ok(f(r.Facts))
}

// Nodes is the node resource (Ganeti's N_FIELDS).
func Nodes() *Resource[*NodeRow] {
	return NewResource("node", []Field[*NodeRow]{
		{Name: "name", Title: "Node", Kind: KText, Doc: "Node name", Get: func(r *NodeRow) (any, int) { return ok(r.Node.Name) }},
		{Name: "uuid", Title: "UUID", Kind: KText, Doc: "Node UUID", Get: func(r *NodeRow) (any, int) { return ok(r.Node.UUID) }},
		{Name: "pip", Title: "PrimaryIP", Kind: KText, Doc: "Primary IP", Get: func(r *NodeRow) (any, int) { return ok(r.Node.PrimaryIP) }},
		{Name: "sip", Title: "SecondaryIP", Kind: KText, Doc: "Secondary IP", Get: func(r *NodeRow) (any, int) { return ok(r.Node.SecondaryIP) }},
		{Name: "master", Title: "IsMaster", Kind: KBool, Doc: "Whether the node is the master", Get: func(r *NodeRow) (any, int) { return ok(r.Node.UUID == r.Master) }},
		{Name: "master_candidate", Title: "MasterC", Kind: KBool, Doc: "Master candidate", Get: func(r *NodeRow) (any, int) { return ok(r.Node.MasterCandidate) }},
		{Name: "master_capable", Title: "MasterCapable", Kind: KBool, Doc: "Can become master candidate", Get: func(r *NodeRow) (any, int) { return ok(r.Node.MasterCapable) }},
		{Name: "vm_capable", Title: "VMCapable", Kind: KBool, Doc: "Can run instances", Get: func(r *NodeRow) (any, int) { return ok(r.Node.VMCapable) }},
		{Name: "offline", Title: "Offline", Kind: KBool, Doc: "Offline", Get: func(r *NodeRow) (any, int) { return ok(r.Node.Offline) }},
		{Name: "drained", Title: "Drained", Kind: KBool, Doc: "Drained", Get: func(r *NodeRow) (any, int) { return ok(r.Node.Drained) }},
		{Name: "role", Title: "Role", Kind: KText, Doc: "Node role: M(aster), C(andidate), R(egular), D(rained), O(ffline)", Get: func(r *NodeRow) (any, int) { return ok(r.Node.Role(r.Master)) }},
		{Name: "group", Title: "Group", Kind: KText, Doc: "Node group name", Get: func(r *NodeRow) (any, int) {
			if r.Group == nil {
				return nil, RSUnavail
			}
			return ok(r.Group.Name)
		}},
		{Name: "group.uuid", Title: "GroupUUID", Kind: KText, Doc: "Node group UUID", Get: func(r *NodeRow) (any, int) { return ok(r.Node.Group) }},
		{Name: "ndparams", Title: "NodeParameters", Kind: KOther, Doc: "Node parameters", Get: func(r *NodeRow) (any, int) { return ok(emptyIfNil(r.Node.NDParams)) }},
		{Name: "pinst_cnt", Title: "Pinst", Kind: KNumber, Doc: "Number of primary instances", Get: func(r *NodeRow) (any, int) { return ok(len(r.Primary)) }},
		{Name: "pinst_list", Title: "PriInstances", Kind: KOther, Doc: "Primary instances", Get: func(r *NodeRow) (any, int) { return ok(nonNil(r.Primary)) }},
		{Name: "sinst_cnt", Title: "Sinst", Kind: KNumber, Doc: "Number of secondary instances", Get: func(r *NodeRow) (any, int) { return ok(0) }},
		{Name: "sinst_list", Title: "SecInstances", Kind: KOther, Doc: "Secondary instances", Get: func(r *NodeRow) (any, int) { return ok([]string{}) }},
		{Name: "mtotal", Title: "MTotal", Kind: KUnit, Live: true, Doc: "Total memory (MiB)", Get: func(r *NodeRow) (any, int) {
			return nodeLive(r, func(f *nodeapi.NodeInfoReply) any { return f.MemoryTotalMiB })
		}},
		{Name: "mnode", Title: "MNode", Kind: KUnit, Live: true, Doc: "Memory used by the node itself (MiB)", Get: func(r *NodeRow) (any, int) {
			return nodeLive(r, func(f *nodeapi.NodeInfoReply) any { return f.MemoryNodeMiB })
		}},
		{Name: "mfree", Title: "MFree", Kind: KUnit, Live: true, Doc: "Free memory (MiB)", Get: func(r *NodeRow) (any, int) {
			return nodeLive(r, func(f *nodeapi.NodeInfoReply) any { return f.MemoryFreeMiB })
		}},
		{Name: "dtotal", Title: "DTotal", Kind: KUnit, Live: true, Doc: "Total disk space (MiB)", Get: func(r *NodeRow) (any, int) {
			return nodeLive(r, func(f *nodeapi.NodeInfoReply) any { return f.DiskTotalMiB })
		}},
		{Name: "dfree", Title: "DFree", Kind: KUnit, Live: true, Doc: "Free disk space (MiB)", Get: func(r *NodeRow) (any, int) {
			return nodeLive(r, func(f *nodeapi.NodeInfoReply) any { return f.DiskFreeMiB })
		}},
		{Name: "ctotal", Title: "CTotal", Kind: KNumber, Live: true, Doc: "CPUs", Get: func(r *NodeRow) (any, int) {
			return nodeLive(r, func(f *nodeapi.NodeInfoReply) any { return f.CPUs })
		}},
		{Name: "version", Title: "Version", Kind: KText, Live: true, Doc: "Node daemon version", Get: func(r *NodeRow) (any, int) {
			return nodeLive(r, func(f *nodeapi.NodeInfoReply) any { return f.Version })
		}},
		{Name: "ctime", Title: "CTime", Kind: KTimestamp, Doc: "Creation time", Get: func(r *NodeRow) (any, int) { return ok(r.Node.CTime) }},
		{Name: "mtime", Title: "MTime", Kind: KTimestamp, Doc: "Modification time", Get: func(r *NodeRow) (any, int) { return ok(r.Node.MTime) }},
		{Name: "serial_no", Title: "SerialNo", Kind: KNumber, Doc: "Serial number", Get: func(r *NodeRow) (any, int) { return ok(r.Node.Serial) }},
		{Name: "tags", Title: "Tags", Kind: KOther, Doc: "Tags", Get: func(r *NodeRow) (any, int) { return ok(tags(r.Node.Tags)) }},
	})
}

func nonNil(l []string) []string {
	if l == nil {
		return []string{}
	}
	return l
}

// GroupRow is a node group with its members.
type GroupRow struct {
	Group *config.NodeGroup
	Nodes []string
	Insts int
}

// groupDiskParams is a group's disk parameters, never null. The cluster
// keeps no disk parameters of its own, so the custom ones are all there is.
func groupDiskParams(g *config.NodeGroup) map[string]config.Params {
	if g.DiskParams == nil {
		return map[string]config.Params{}
	}
	return g.DiskParams
}

// Groups is the node group resource (Ganeti's G_FIELDS).
func Groups() *Resource[*GroupRow] {
	return NewResource("group", []Field[*GroupRow]{
		{Name: "name", Title: "Group", Kind: KText, Doc: "Group name", Get: func(r *GroupRow) (any, int) { return ok(r.Group.Name) }},
		{Name: "uuid", Title: "UUID", Kind: KText, Doc: "Group UUID", Get: func(r *GroupRow) (any, int) { return ok(r.Group.UUID) }},
		{Name: "alloc_policy", Title: "AllocPolicy", Kind: KText, Doc: "Allocation policy", Get: func(r *GroupRow) (any, int) { return ok(r.Group.AllocPolicy) }},
		{Name: "node_cnt", Title: "Nodes", Kind: KNumber, Doc: "Number of nodes", Get: func(r *GroupRow) (any, int) { return ok(len(r.Nodes)) }},
		{Name: "node_list", Title: "NodeList", Kind: KOther, Doc: "Nodes", Get: func(r *GroupRow) (any, int) { return ok(nonNil(r.Nodes)) }},
		{Name: "pinst_cnt", Title: "Instances", Kind: KNumber, Doc: "Number of primary instances", Get: func(r *GroupRow) (any, int) { return ok(r.Insts) }},
		{Name: "ndparams", Title: "NDParams", Kind: KOther, Doc: "Node parameters", Get: func(r *GroupRow) (any, int) { return ok(emptyIfNil(r.Group.NDParams)) }},
		{Name: "custom_ndparams", Title: "CustomNDParams", Kind: KOther, Doc: "Custom node parameters", Get: func(r *GroupRow) (any, int) { return ok(emptyIfNil(r.Group.NDParams)) }},
		{Name: "ipolicy", Title: "InstancePolicy", Kind: KOther, Doc: "Instance policy", Get: func(r *GroupRow) (any, int) { return ok(emptyIfNil(r.Group.IPolicy)) }},
		{Name: "custom_ipolicy", Title: "CustomInstancePolicy", Kind: KOther, Doc: "Custom instance policy", Get: func(r *GroupRow) (any, int) { return ok(emptyIfNil(r.Group.IPolicy)) }},
		{Name: "diskparams", Title: "DiskParameters", Kind: KOther, Doc: "Disk parameters", Get: func(r *GroupRow) (any, int) { return ok(groupDiskParams(r.Group)) }},
		{Name: "custom_diskparams", Title: "CustomDiskParameters", Kind: KOther, Doc: "Custom disk parameters", Get: func(r *GroupRow) (any, int) { return ok(groupDiskParams(r.Group)) }},
		{Name: "ctime", Title: "CTime", Kind: KTimestamp, Doc: "Creation time", Get: func(r *GroupRow) (any, int) { return ok(r.Group.CTime) }},
		{Name: "mtime", Title: "MTime", Kind: KTimestamp, Doc: "Modification time", Get: func(r *GroupRow) (any, int) { return ok(r.Group.MTime) }},
		{Name: "serial_no", Title: "SerialNo", Kind: KNumber, Doc: "Serial number", Get: func(r *GroupRow) (any, int) { return ok(r.Group.Serial) }},
		{Name: "tags", Title: "Tags", Kind: KOther, Doc: "Tags", Get: func(r *GroupRow) (any, int) { return ok(tags(r.Group.Tags)) }},
	})
}
