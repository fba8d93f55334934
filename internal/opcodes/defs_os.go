package opcodes

// osDefs are the OS opcodes (OP_OS_DIAGNOSE).
func osDefs() []Def {
	return []Def{
		{ID: "OP_OS_DIAGNOSE", Doc: "list the OS definitions of the nodes", Params: []Param{
			{Name: "output_fields", Type: TStringList, Required: true, Doc: "fields to return"},
			{Name: "names", Type: TStringList, Default: []any{}, Doc: "OS names to return (all when empty)"},
		}},
	}
}
