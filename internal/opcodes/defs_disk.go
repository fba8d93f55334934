package opcodes

// diskDefs are the instance disk opcodes (activate, deactivate, grow,
// recreate) and
// the console opcode, with Ganeti's parameter names and defaults.
func diskDefs() []Def {
	inst := Param{Name: "instance_name", Type: TNEString, Required: true, Doc: "instance name"}
	instUUID := Param{Name: "instance_uuid", Type: TMaybeString, Default: nil, Doc: "instance uuid (internal)"}
	return []Def{
		{ID: "OP_INSTANCE_ACTIVATE_DISKS", KeyPrm: "instance_name", Doc: "activate an instance's disks", Params: []Param{
			inst, instUUID,
			{Name: "ignore_size", Type: TBool, Default: false, Doc: "do not check the disks' sizes against the configuration"},
			{Name: "wait_for_sync", Type: TBool, Default: false, Doc: "wait for the disks to be in sync"},
		}},
		{ID: "OP_INSTANCE_DEACTIVATE_DISKS", KeyPrm: "instance_name", Doc: "deactivate an instance's disks", Params: []Param{
			inst, instUUID,
			{Name: "force", Type: TBool, Default: false, Doc: "deactivate even while the instance runs"},
		}},
		{ID: "OP_INSTANCE_GROW_DISK", KeyPrm: "instance_name", Doc: "grow one disk of an instance", Params: []Param{
			inst, instUUID,
			{Name: "disk", Type: TInt, Required: true, Doc: "disk index"},
			{Name: "amount", Type: TInt, Required: true, Doc: "MiB to add (or the new size when absolute)"},
			{Name: "wait_for_sync", Type: TBool, Default: true, Doc: "wait for the disk to be in sync"},
			{Name: "absolute", Type: TBool, Default: false, Doc: "amount is the new size, not an increment"},
			{Name: "ignore_ipolicy", Type: TBool, Default: false, Doc: "ignore the instance policy"},
		}},
		{ID: "OP_INSTANCE_RECREATE_DISKS", KeyPrm: "instance_name", Doc: "make fresh, empty disks for a stopped instance", Params: []Param{
			inst, instUUID,
			{Name: "disks", Type: TAny, Default: []any{}, Doc: "disk indices, or [index, {size, mode}] pairs (every disk when empty)"},
			{Name: "nodes", Type: TStringList, Default: []any{}, Doc: "new primary node (one name), if the disks are to be made elsewhere"},
			{Name: "node_uuids", Type: TAny, Default: nil, Doc: "uuids of nodes (internal; recomputed from nodes, as Ganeti)"},
			{Name: "iallocator", Type: TMaybeString, Default: nil, Doc: "allocator choosing the new primary node in the instance's group"},
		}},
		{ID: "OP_INSTANCE_CONSOLE", KeyPrm: "instance_name", Doc: "how to reach an instance's console", Params: []Param{
			inst, instUUID,
		}},
	}
}
