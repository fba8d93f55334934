package cmdlib

// groupLU returns the unit of one of the node group opcodes, or nil for another opcode.
func groupLU(id string) LU {
	return nil
}
