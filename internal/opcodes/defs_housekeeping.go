package opcodes

// housekeepingDefs are Corral-only opcodes that clear up what failed or
// abandoned work left on the nodes. corrald's reconcilers submit them
// when they find such leftovers; an operator may submit them too.
func housekeepingDefs() []Def {
	nodes := Param{Name: "nodes", Type: TStringList, Default: []any{}, Doc: "names of the nodes to clear up (empty: every node)"}
	return []Def{
		{ID: "OP_CLUSTER_REMOVE_LEFT_DISKS", Doc: "remove the disks that changes which failed while their node did not answer left on it, and record what is still left in the node's status (Corral only)", Params: []Param{
			nodes,
		}},
		{ID: "OP_CLUSTER_ABORT_PENDING_IMPORTS", Doc: "abort the imports that have received nothing for pending_timeout seconds; the job waiting for such an import then fails and reverts (Corral only)", Params: []Param{
			nodes,
			{Name: "pending_timeout", Type: TNonNegFloat, Required: true, Doc: "seconds an import may wait for its first byte"},
		}},
	}
}
