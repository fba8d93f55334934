package opcodes

// evacuateDefs are the opcodes that move instances off nodes and groups
// and instances to other groups (Ganeti's OpNodeMigrate, OpNodeEvacuate,
// OpInstanceChangeGroup, OpGroupEvacuate), with Ganeti
// 3.0's parameters; their child jobs run the per-instance moves of
// migrateDefs.
func evacuateDefs() []Def {
	node := Param{Name: "node_name", Type: TNEString, Required: true, Doc: "node name"}
	nodeUUID := Param{Name: "node_uuid", Type: TMaybeString, Default: nil, Doc: "node uuid: must match node_name"}
	iallocator := Param{Name: "iallocator", Type: TMaybeString, Default: nil, Doc: "allocator choosing the target nodes (a name in the iallocator search path; the cluster's default when absent)"}
	targetNode := Param{Name: "target_node", Type: TMaybeString, Default: nil, Doc: "target node (instead of an allocator)"}
	targetNodeUUID := Param{Name: "target_node_uuid", Type: TMaybeString, Default: nil, Doc: "target node uuid: must match target_node"}
	mode := Param{Name: "mode", Type: TMaybeString, Default: nil, Doc: "live | non-live (the hypervisor's migration_mode when absent)"}
	live := Param{Name: "live", Type: TAny, Default: nil, Doc: "obsolete: true for mode live, false for non-live"}
	runtimeChanges := Param{Name: "allow_runtime_changes", Type: TBool, Default: true, Doc: "allow runtime changes (memory ballooning) while migrating"}
	ignoreIPolicy := Param{Name: "ignore_ipolicy", Type: TBool, Default: false, Doc: "ignore instance policy violations on the target"}
	earlyRelease := Param{Name: "early_release", Type: TBool, Default: false, Doc: "release locks as soon as possible"}
	return []Def{
		{ID: "OP_NODE_MIGRATE", KeyPrm: "node_name", Doc: "migrate every primary instance off a node (one job each)", Params: []Param{
			node, nodeUUID, mode, live, targetNode, targetNodeUUID, runtimeChanges, ignoreIPolicy, iallocator,
		}},
		{ID: "OP_NODE_EVACUATE", KeyPrm: "node_name", Doc: "move the instances off a node (one job each)", Params: []Param{
			earlyRelease, node, nodeUUID,
			{Name: "remote_node", Type: TMaybeString, Default: nil, Doc: "new secondary node (secondary-only, instead of an allocator)"},
			{Name: "remote_node_uuid", Type: TMaybeString, Default: nil, Doc: "new secondary node uuid: must match remote_node"},
			iallocator,
			{Name: "mode", Type: TNEString, Required: true, Doc: "primary-only | secondary-only | all"},
			{Name: "ignore_soft_errors", Type: TAny, Default: nil, Doc: "let the allocator ignore soft restrictions"},
		}},
		{ID: "OP_INSTANCE_CHANGE_GROUP", KeyPrm: "instance_name", Doc: "move an instance to a node of another group (one job)", Params: []Param{
			{Name: "instance_name", Type: TNEString, Required: true, Doc: "instance name"},
			{Name: "instance_uuid", Type: TMaybeString, Default: nil, Doc: "instance uuid (internal)"},
			earlyRelease, iallocator,
			{Name: "target_groups", Type: TAny, Default: nil, Doc: "destination group names or uuids (all groups but the instance's when absent)"},
		}},
		{ID: "OP_GROUP_EVACUATE", KeyPrm: "group_name", Doc: "move the instances of a node group to other groups (one job each)", Params: []Param{
			{Name: "group_name", Type: TNEString, Required: true, Doc: "node group name"},
			earlyRelease, iallocator,
			{Name: "target_groups", Type: TAny, Default: nil, Doc: "destination group names or uuids (all other groups when absent)"},
			{Name: "sequential", Type: TBool, Default: false, Doc: "run the jobs one after the other"},
			{Name: "force_failover", Type: TBool, Default: false, Doc: "fail over instead of migrating"},
		}},
	}
}
