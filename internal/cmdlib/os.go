package cmdlib

// osLU returns the unit of one of the OS opcodes, or nil for another opcode.
func osLU(id string) LU {
	return nil
}
