package opcodes

// diskDefs are the instance disk opcodes (activate, deactivate, grow).
func diskDefs() []Def {
	return nil
}
