package opcodes

// osDefs are the OS opcodes (OP_OS_DIAGNOSE).
func osDefs() []Def {
	return nil
}
