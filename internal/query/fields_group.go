package query

import (
	"fmt"

	"github.com/corral/corral/internal/config"
)

// GroupRow is a node group with its members and its parameters filled
// from the cluster's.
type GroupRow struct {
	Group     *config.NodeGroup
	Nodes     []string // node names
	Instances []string // names of the instances with a primary node here
	// NDParams, IPolicy and DiskParams are the effective (filled) ones.
	NDParams   config.Params
	IPolicy    map[string]any
	DiskParams map[string]config.Params
}

// customDiskParams are the group's own disk parameters, never null.
func customDiskParams(g *config.NodeGroup) map[string]config.Params {
	if g.DiskParams == nil {
		return map[string]config.Params{}
	}
	return g.DiskParams
}

// Groups is the node group resource: every field of Ganeti 3.0's group
// query.
func Groups() *Resource[*GroupRow] {
	fields := []Field[*GroupRow]{
		{Name: "name", Title: "Group", Kind: KText, Doc: "Group name", Get: func(r *GroupRow) (any, int) { return ok(r.Group.Name) }},
		{Name: "uuid", Title: "UUID", Kind: KText, Doc: "Group UUID", Get: func(r *GroupRow) (any, int) { return ok(r.Group.UUID) }},
		{Name: "alloc_policy", Title: "AllocPolicy", Kind: KText, Doc: "Allocation policy", Get: func(r *GroupRow) (any, int) { return ok(r.Group.AllocPolicy) }},
		{Name: "node_cnt", Title: "Nodes", Kind: KNumber, Doc: "Number of nodes", Get: func(r *GroupRow) (any, int) { return ok(len(r.Nodes)) }},
		{Name: "node_list", Title: "NodeList", Kind: KOther, Doc: "Nodes", Get: func(r *GroupRow) (any, int) { return ok(nonNil(r.Nodes)) }},
		{Name: "pinst_cnt", Title: "Instances", Kind: KNumber, Doc: "Number of primary instances", Get: func(r *GroupRow) (any, int) { return ok(len(r.Instances)) }},
		{Name: "pinst_list", Title: "InstanceList", Kind: KOther, Doc: "Primary instances", Get: func(r *GroupRow) (any, int) { return ok(nonNil(r.Instances)) }},
		{Name: "ndparams", Title: "NDParams", Kind: KOther, Doc: "Node parameters (filled from the cluster's)", Get: func(r *GroupRow) (any, int) { return ok(emptyIfNil(r.NDParams)) }},
		{Name: "custom_ndparams", Title: "CustomNDParams", Kind: KOther, Doc: "Node parameters set on the group", Get: func(r *GroupRow) (any, int) { return ok(emptyIfNil(r.Group.NDParams)) }},
		{Name: "ipolicy", Title: "InstancePolicy", Kind: KOther, Doc: "Instance policy (filled from the cluster's)", Get: func(r *GroupRow) (any, int) {
			if r.IPolicy == nil {
				return ok(map[string]any{})
			}
			return ok(r.IPolicy)
		}},
		{Name: "custom_ipolicy", Title: "CustomInstancePolicy", Kind: KOther, Doc: "Instance policy set on the group", Get: func(r *GroupRow) (any, int) { return ok(emptyIfNil(r.Group.IPolicy)) }},
		{Name: "diskparams", Title: "DiskParameters", Kind: KOther, Doc: "Disk parameters per template (filled from the defaults)", Get: func(r *GroupRow) (any, int) {
			if r.DiskParams == nil {
				return ok(map[string]config.Params{})
			}
			return ok(r.DiskParams)
		}},
		{Name: "custom_diskparams", Title: "CustomDiskParameters", Kind: KOther, Doc: "Disk parameters set on the group", Get: func(r *GroupRow) (any, int) { return ok(customDiskParams(r.Group)) }},
		{Name: "hv_state", Title: "HypervisorState", Kind: KOther, Doc: "Hypervisor state declared by the operator (hv_state_static)", Get: func(r *GroupRow) (any, int) {
			if r.Group.HVStateStatic == nil {
				return ok(config.HVState{})
			}
			return ok(r.Group.HVStateStatic)
		}},
		{Name: "disk_state", Title: "DiskState", Kind: KOther, Doc: "Disk state declared by the operator (disk_state_static)", Get: func(r *GroupRow) (any, int) {
			if r.Group.DiskStateStatic == nil {
				return ok(config.DiskState{})
			}
			return ok(r.Group.DiskStateStatic)
		}},
		{Name: "ctime", Title: "CTime", Kind: KTimestamp, Doc: "Creation time", Get: func(r *GroupRow) (any, int) { return ok(r.Group.CTime) }},
		{Name: "mtime", Title: "MTime", Kind: KTimestamp, Doc: "Modification time", Get: func(r *GroupRow) (any, int) { return ok(r.Group.MTime) }},
		{Name: "serial_no", Title: "SerialNo", Kind: KNumber, Doc: "Serial number", Get: func(r *GroupRow) (any, int) { return ok(r.Group.Serial) }},
		{Name: "tags", Title: "Tags", Kind: KOther, Doc: "Tags", Get: func(r *GroupRow) (any, int) { return ok(tags(r.Group.Tags)) }},
	}
	for _, p := range ndParamFields {
		fields = append(fields, Field[*GroupRow]{Name: "ndp/" + p.Name, Title: p.Title, Kind: p.Kind,
			Doc: fmt.Sprintf("Node parameter %s (filled)", p.Name),
			Get: func(r *GroupRow) (any, int) { return typedParam(r.NDParams, p) }})
	}
	return NewResource("group", fields)
}
