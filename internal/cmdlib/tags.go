package cmdlib

// tagLU returns the unit of one of the tag opcodes, or nil for another opcode.
func tagLU(id string) LU {
	return nil
}
