package opcodes

// multiAllocDefs is Ganeti's OpInstanceMultiAlloc: several instance
// creations placed together, each then run as its own job.
func multiAllocDefs() []Def {
	return []Def{
		{ID: "OP_INSTANCE_MULTI_ALLOC", Doc: "place several new instances at once and submit one creation job each", Params: []Param{
			{Name: "opportunistic_locking", Type: TBool, Default: false, Doc: "accepted; the placement takes shared node locks, which wait only for exclusive holders"},
			{Name: "iallocator", Type: TMaybeString, Default: nil, Doc: "allocator placing the instances (a name in the iallocator search path; the cluster's default, else the built-in one, when absent)"},
			{Name: "instances", Type: TList, Default: []any{}, Ops: true, Doc: "the OP_INSTANCE_CREATE opcodes of the instances, all with pnode or none"},
		}},
	}
}
