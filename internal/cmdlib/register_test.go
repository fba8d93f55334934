package cmdlib

import (
	"testing"
	"time"

	"github.com/corral/corral/internal/engine"
	"github.com/corral/corral/internal/nodeapi"
	"github.com/corral/corral/internal/opcodes"
)

// TestEveryOpcodeHasAUnit fails when an opcode of the table has no unit,
// or a unit is registered for an opcode the table lacks (or twice).
func TestEveryOpcodeHasAUnit(t *testing.T) {
	r := engine.NewRegistry(opcodes.Default())
	(&Processor{}).Register(r)
	if err := r.Check(); err != nil {
		t.Fatal(err)
	}
	if got, want := len(r.IDs()), len(opcodes.Default().IDs()); got != want {
		t.Fatalf("%d opcodes have a unit, the table has %d", got, want)
	}
}

func TestCallTimeoutsOfWaitingNodeCalls(t *testing.T) {
	r := engine.NewRegistry(opcodes.Default())
	(&Processor{}).Register(r)
	cases := []struct {
		args any
		want time.Duration
	}{
		{nodeapi.ShutdownArgs{}, 2*time.Minute + callSlack},
		{nodeapi.ShutdownArgs{Timeout: 10}, 10*time.Second + callSlack},
		{nodeapi.RebootArgs{Timeout: 5}, 5*time.Second + 2*callSlack},
		{nodeapi.OSCreateArgs{}, osScriptTimeout + callSlack},
		{nodeapi.OSRenameArgs{}, osScriptTimeout + callSlack},
		{nodeapi.DelayArgs{Duration: 1.5}, 1500*time.Millisecond + callSlack},
	}
	for _, c := range cases {
		if got, ok := r.CallTimeout(c.args); !ok || got != c.want {
			t.Errorf("CallTimeout(%#v) = %v, %v; want %v", c.args, got, ok, c.want)
		}
	}
	if got, ok := r.CallTimeout(nodeapi.NodeInfoArgs{}); ok {
		t.Errorf("CallTimeout(NodeInfoArgs) = %v; a call that does not wait has the client's default", got)
	}
}
