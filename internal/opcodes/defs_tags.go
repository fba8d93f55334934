package opcodes

// tagDefs are the tag opcodes (OP_TAGS_*).
func tagDefs() []Def {
	return nil
}
