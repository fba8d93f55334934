package opcodes

// groupDefs are the node group opcodes (OP_GROUP_*).
func groupDefs() []Def {
	return nil
}
