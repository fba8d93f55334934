package query

import (
	"fmt"

	"github.com/corral/corral/internal/config"
	"github.com/corral/corral/internal/nodeapi"
)

// NodeRow is a node with what its fields need.
type NodeRow struct {
	Node   *config.Node
	Master string // master node uuid
	Group  *config.NodeGroup
	// NDParams are the node's parameters filled from its group's and the
	// cluster's (Ganeti's FillND).
	NDParams  config.Params
	Primary   []string // instance names
	Facts     *nodeapi.NodeInfoReply
	LiveState int
	Status    *config.Status // what Corral observed (confdb), nil if nothing
	// MachinePower is the recorded power state of the bare-metal machine
	// the node runs on (node parameter machine); "" without one.
	MachinePower string
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

// nodeNotReported is a live field the node daemon does not report: no
// data, as Ganeti answers when a node's reply lacks the value.
func nodeNotReported(r *NodeRow) (any, int) {
	if v, st := nodeLive(r, func(*nodeapi.NodeInfoReply) any { return nil }); st != RSNormal {
		return v, st
	}
	return nil, RSNoData
}

// Nodes is the node resource: every field of Ganeti 3.0's node query.
func Nodes() *Resource[*NodeRow] {
	fields := append(nodeConfigFields(), nodeLiveFields()...)
	for _, p := range ndParamFields {
		fields = append(fields, Field[*NodeRow]{Name: "ndp/" + p.Name, Title: p.Title, Kind: p.Kind,
			Doc: fmt.Sprintf("Node parameter %s (filled)", p.Name),
			Get: func(r *NodeRow) (any, int) { return typedParam(r.NDParams, p) }})
	}
	return NewResource("node", fields)
}

func nodeConfigFields() []Field[*NodeRow] {
	return []Field[*NodeRow]{
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
		{Name: "powered", Title: "Powered", Kind: KBool, Doc: "Whether the node is thought powered on: false only when the bare-metal machine its node parameter machine names was last seen powered off", Get: func(r *NodeRow) (any, int) { return ok(r.MachinePower != "power off") }},
		{Name: "role", Title: "Role", Kind: KText, Doc: "Node role: M(aster), C(andidate), R(egular), D(rained), O(ffline)", Get: func(r *NodeRow) (any, int) { return ok(r.Node.Role(r.Master)) }},
		{Name: "group", Title: "Group", Kind: KText, Doc: "Node group name", Get: func(r *NodeRow) (any, int) {
			if r.Group == nil {
				return nil, RSUnavail
			}
			return ok(r.Group.Name)
		}},
		{Name: "group.uuid", Title: "GroupUUID", Kind: KText, Doc: "Node group UUID", Get: func(r *NodeRow) (any, int) { return ok(r.Node.Group) }},
		{Name: "ndparams", Title: "NodeParameters", Kind: KOther, Doc: "Node parameters (filled from the group's and the cluster's)", Get: func(r *NodeRow) (any, int) { return ok(emptyIfNil(r.NDParams)) }},
		{Name: "custom_ndparams", Title: "CustomNodeParameters", Kind: KOther, Doc: "Node parameters set on the node", Get: func(r *NodeRow) (any, int) { return ok(emptyIfNil(r.Node.NDParams)) }},
		{Name: "hv_state", Title: "HypervisorState", Kind: KOther, Doc: "Hypervisor state declared by the operator (hv_state_static)", Get: func(r *NodeRow) (any, int) {
			if r.Node.HVStateStatic == nil {
				return ok(config.HVState{})
			}
			return ok(r.Node.HVStateStatic)
		}},
		{Name: "disk_state", Title: "DiskState", Kind: KOther, Doc: "Disk state declared by the operator (disk_state_static)", Get: func(r *NodeRow) (any, int) {
			if r.Node.DiskStateStatic == nil {
				return ok(config.DiskState{})
			}
			return ok(r.Node.DiskStateStatic)
		}},
		{Name: "pinst_cnt", Title: "Pinst", Kind: KNumber, Doc: "Number of primary instances", Get: func(r *NodeRow) (any, int) { return ok(len(r.Primary)) }},
		{Name: "pinst_list", Title: "PriInstances", Kind: KOther, Doc: "Primary instances", Get: func(r *NodeRow) (any, int) { return ok(nonNil(r.Primary)) }},
		{Name: "sinst_cnt", Title: "Sinst", Kind: KNumber, Doc: "Number of secondary instances", Get: func(r *NodeRow) (any, int) { return ok(0) }},
		{Name: "sinst_list", Title: "SecInstances", Kind: KOther, Doc: "Secondary instances", Get: func(r *NodeRow) (any, int) { return ok([]string{}) }},
		{Name: "ctime", Title: "CTime", Kind: KTimestamp, Doc: "Creation time", Get: func(r *NodeRow) (any, int) { return ok(r.Node.CTime) }},
		{Name: "mtime", Title: "MTime", Kind: KTimestamp, Doc: "Modification time", Get: func(r *NodeRow) (any, int) { return ok(r.Node.MTime) }},
		{Name: "serial_no", Title: "SerialNo", Kind: KNumber, Doc: "Serial number", Get: func(r *NodeRow) (any, int) { return ok(r.Node.Serial) }},
		{Name: "tags", Title: "Tags", Kind: KOther, Doc: "Tags", Get: func(r *NodeRow) (any, int) { return ok(tags(r.Node.Tags)) }},
		{Name: "status", Title: "Status", Kind: KOther, Doc: "What Corral observed: state, last error and conditions; null when nothing (Corral only)", Get: nodeStatus},
	}
}

func nodeLiveFields() []Field[*NodeRow] {
	live := func(name, title string, kind Kind, doc string, f func(*nodeapi.NodeInfoReply) any) Field[*NodeRow] {
		return Field[*NodeRow]{Name: name, Title: title, Kind: kind, Live: true, Doc: doc,
			Get: func(r *NodeRow) (any, int) { return nodeLive(r, f) }}
	}
	absent := func(name, title string, kind Kind, doc string) Field[*NodeRow] {
		return Field[*NodeRow]{Name: name, Title: title, Kind: kind, Live: true, Doc: doc, Get: nodeNotReported}
	}
	return []Field[*NodeRow]{
		live("mtotal", "MTotal", KUnit, "Total memory (MiB)", func(f *nodeapi.NodeInfoReply) any { return f.MemoryTotalMiB }),
		live("mnode", "MNode", KUnit, "Memory used by the node itself (MiB)", func(f *nodeapi.NodeInfoReply) any { return f.MemoryNodeMiB }),
		live("mfree", "MFree", KUnit, "Free memory (MiB)", func(f *nodeapi.NodeInfoReply) any { return f.MemoryFreeMiB }),
		live("dtotal", "DTotal", KUnit, "Total disk space of the default storage (MiB)", func(f *nodeapi.NodeInfoReply) any { return f.DiskTotalMiB }),
		live("dfree", "DFree", KUnit, "Free disk space of the default storage (MiB)", func(f *nodeapi.NodeInfoReply) any { return f.DiskFreeMiB }),
		live("ctotal", "CTotal", KNumber, "Logical CPUs", func(f *nodeapi.NodeInfoReply) any { return f.CPUs }),
		live("version", "Version", KText, "Node daemon version (Corral only)", func(f *nodeapi.NodeInfoReply) any { return f.Version }),
		absent("cnos", "CNOs", KNumber, "Logical CPUs the node OS keeps (not reported by Corral's node daemon)"),
		absent("cnodes", "CNodes", KNumber, "NUMA domains (not reported by Corral's node daemon)"),
		absent("csockets", "CSockets", KNumber, "CPU sockets (not reported by Corral's node daemon)"),
		absent("bootid", "BootID", KText, "Boot id (not reported by Corral's node daemon)"),
		absent("spfree", "SpFree", KNumber, "Free spindles (exclusive storage only; Corral has no LVM storage)"),
		absent("sptotal", "SpTotal", KNumber, "Total spindles (exclusive storage only; Corral has no LVM storage)"),
	}
}

func nodeStatus(r *NodeRow) (any, int) {
	if r.Status == nil {
		return ok(nil)
	}
	return ok(r.Status)
}
