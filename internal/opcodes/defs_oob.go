package opcodes

// oobDefs is Ganeti's OpOobCommand (gnt-node power, gnt-node health),
// which Corral runs through the nodes' bare-metal machines.
func oobDefs() []Def {
	return []Def{
		{ID: "OP_OOB_COMMAND", KeyPrm: "command", Doc: "power nodes on, off or cycle them, or read their power or health, through their bare-metal machines", Params: []Param{
			{Name: "node_names", Type: TStringList, Default: []any{}, Doc: "node names (all nodes when empty; without the master for power-off and power-cycle)"},
			{Name: "node_uuids", Type: TAny, Default: nil, Doc: "node uuids (internal)"},
			{Name: "command", Type: TNEString, Required: true, Doc: "power-on | power-off | power-cycle | power-status | health"},
			{Name: "timeout", Type: TNonNegInt, Default: float64(60), Max: MaxTestDelay, MaxDoc: "7 days", Doc: "seconds to wait for each node's machine"},
			{Name: "ignore_status", Type: TBool, Default: false, Doc: "power off nodes not marked offline"},
			{Name: "power_delay", Type: TNonNegFloat, Default: 2.0, Max: 3600, MaxDoc: "an hour", Doc: "seconds between powering on two nodes"},
		}},
	}
}
