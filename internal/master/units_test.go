package master

import (
	"testing"

	"github.com/corral/corral/internal/baremetal"
	"github.com/corral/corral/internal/cmdlib"
	"github.com/corral/corral/internal/coe"
	"github.com/corral/corral/internal/engine"
	"github.com/corral/corral/internal/opcodes"
)

// TestEveryOpcodeHasAUnit fails when an opcode of the table has no unit
// in the packages corrald registers, or a unit is registered for an
// opcode the table lacks (or twice).
func TestEveryOpcodeHasAUnit(t *testing.T) {
	r := engine.NewRegistry(opcodes.Default())
	registerUnits(r, &cmdlib.Processor{}, &baremetal.Deps{}, &coe.Deps{})
	if err := r.Check(); err != nil {
		t.Fatal(err)
	}
	if got, want := len(r.IDs()), len(opcodes.Default().IDs()); got != want {
		t.Fatalf("%d opcodes have a unit, the table has %d", got, want)
	}
}
