package cmdlib

import (
	"strings"
	"testing"
	"time"

	"github.com/corral/corral/internal/engine"
	"github.com/corral/corral/internal/nodeapi"
	"github.com/corral/corral/internal/opcodes"
)

// TestGanetiUnitsRegister fails when cmdlib registers a unit for an
// opcode the table lacks, or twice. That every opcode has a unit, across
// the packages that own units, is internal/master's
// TestEveryOpcodeHasAUnit.
func TestGanetiUnitsRegister(t *testing.T) {
	r := engine.NewRegistry(opcodes.Default())
	(&Processor{}).Register(r)
	if err := r.Check(); err != nil && !strings.Contains(err.Error(), "no unit") {
		t.Fatal(err)
	}
	for _, id := range r.IDs() {
		if strings.HasPrefix(id, "OP_MACHINE_") {
			t.Errorf("cmdlib registers %s, a bare-metal opcode", id)
		}
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
