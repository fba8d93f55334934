package cmdlib

// diskLU returns the unit of one of the instance disk opcodes, or nil for another opcode.
func diskLU(id string) LU {
	return nil
}
