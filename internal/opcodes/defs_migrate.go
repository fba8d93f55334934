package opcodes

// migrateDefs are the instance moves between nodes with shared disks,
// with Ganeti's parameters (src/Ganeti/OpCodes.hs, OpParams.hs).
func migrateDefs() []Def {
	inst := Param{Name: "instance_name", Type: TNEString, Required: true, Doc: "instance name"}
	instUUID := Param{Name: "instance_uuid", Type: TMaybeString, Default: nil, Doc: "instance uuid: must match instance_name"}
	target := Param{Name: "target_node", Type: TMaybeString, Default: nil, Doc: "node to move the instance to; default: the allocator's choice in its group"}
	targetUUID := Param{Name: "target_node_uuid", Type: TMaybeString, Default: nil, Doc: "target node uuid (internal)"}
	ipolicy := Param{Name: "ignore_ipolicy", Type: TBool, Default: false, Doc: "ignore the target group's instance policy"}
	iallocator := Param{Name: "iallocator", Type: TMaybeString, Default: nil, Doc: "allocator choosing the target (the built-in one; hail)"}
	cleanup := Param{Name: "cleanup", Type: TBool, Default: false, Doc: "find where the instance runs after a failed migration and fix the configuration"}
	return []Def{
		{ID: "OP_INSTANCE_MIGRATE", KeyPrm: "instance_name", Doc: "move a running instance to another node without stopping it", Params: []Param{
			inst, instUUID, target, targetUUID, ipolicy, iallocator, cleanup,
			{Name: "mode", Type: TMaybeString, Default: nil, Doc: "live | non-live; default: the migration_mode hvparam"},
			{Name: "live", Type: TAny, Default: nil, Doc: "obsolete form of mode (true: live)"},
			{Name: "allow_runtime_changes", Type: TBool, Default: true, Doc: "accepted; Corral changes nothing at run time"},
			{Name: "allow_failover", Type: TBool, Default: false, Doc: "fail a stopped instance over instead"},
			{Name: "ignore_hvversions", Type: TBool, Default: false, Doc: "accepted; both nodes run the same qemu checks"},
		}},
		{ID: "OP_INSTANCE_FAILOVER", KeyPrm: "instance_name", Doc: "stop an instance on its node and start it on another", Params: []Param{
			inst, instUUID, target, targetUUID, ipolicy, iallocator, cleanup,
			{Name: "shutdown_timeout", Type: TNonNegInt, Default: float64(120), Doc: "seconds to wait for a clean shutdown"},
			{Name: "ignore_consistency", Type: TBool, Default: false, Doc: "go on when the instance cannot be shut down on its node (dead node)"},
		}},
		{ID: "OP_INSTANCE_MOVE", KeyPrm: "instance_name", Doc: "copy an instance's disks to another node and make it the primary", Params: []Param{
			inst, instUUID, ipolicy,
			{Name: "target_node", Type: TNEString, Required: true, Doc: "node to move the instance to"},
			targetUUID,
			{Name: "shutdown_timeout", Type: TNonNegInt, Default: float64(120), Doc: "seconds to wait for a clean shutdown"},
			{Name: "compress", Type: TString, Default: "none", Doc: "compression of the disk copy (none, gzip, ...)"},
			{Name: "ignore_consistency", Type: TBool, Default: false, Doc: "go on when the instance cannot be shut down on its node"},
		}},
	}
}
