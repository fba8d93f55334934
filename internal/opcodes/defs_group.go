package opcodes

// groupDefs are the node group opcodes (OP_GROUP_*), with Ganeti's
// parameter names. The parameter dictionaries are "maybe" values: null
// means "leave as it is", which is what Ganeti's RAPI client sends for
// whatever it was not asked to change.
func groupDefs() []Def {
	group := Param{Name: "group_name", Type: TNEString, Required: true, Doc: "node group name"}
	// Shared by add and modify.
	params := []Param{
		{Name: "alloc_policy", Type: TMaybeString, Default: nil, Doc: "preferred | last_resort | unallocable"},
		{Name: "ndparams", Type: TAny, Default: nil, Doc: "node parameters (dict)"},
		{Name: "diskparams", Type: TAny, Default: nil, Doc: "disk parameters per disk template (dict of dicts)"},
		{Name: "ipolicy", Type: TAny, Default: nil, Doc: "instance policy (dict)"},
		{Name: "hv_state", Type: TAny, Default: nil, Doc: "static hypervisor state (dict)"},
		{Name: "disk_state", Type: TAny, Default: nil, Doc: "static disk state (dict)"},
	}
	withGroup := func(ps ...Param) []Param { return append([]Param{group}, ps...) }
	return []Def{
		{ID: "OP_GROUP_ADD", KeyPrm: "group_name", Doc: "add a node group", Params: withGroup(params...)},
		{ID: "OP_GROUP_REMOVE", KeyPrm: "group_name", Doc: "remove an empty node group", Params: withGroup()},
		{ID: "OP_GROUP_SET_PARAMS", KeyPrm: "group_name", Doc: "change a node group's parameters", Params: withGroup(params...)},
		{ID: "OP_GROUP_RENAME", KeyPrm: "group_name", Doc: "rename a node group", Params: withGroup(
			Param{Name: "new_name", Type: TNEString, Required: true, Doc: "the new name"},
		)},
		{ID: "OP_GROUP_ASSIGN_NODES", KeyPrm: "group_name", Doc: "move nodes into a node group", Params: withGroup(
			Param{Name: "force", Type: TBool, Default: false, Doc: "move even if instances get split between groups"},
			Param{Name: "nodes", Type: TStringList, Required: true, Doc: "names of the nodes to move"},
			Param{Name: "node_uuids", Type: TAny, Default: nil, Doc: "node uuids (internal)"},
		)},
	}
}
