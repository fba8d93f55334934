package engine

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/corral/corral/internal/locking"
	"github.com/corral/corral/internal/opcodes"
)

// emptyUnit does nothing; the registry tests only build it.
type emptyUnit struct{}

func (emptyUnit) Locks(*opcodes.Op) []locking.Request       { return nil }
func (emptyUnit) Prereq(context.Context, *opcodes.Op) error { return nil }
func (emptyUnit) Steps() []Step                             { return nil }
func (emptyUnit) Result() any                               { return nil }

func newEmpty() Unit { return emptyUnit{} }

func twoOpTable() *opcodes.Table {
	return opcodes.NewTable([]opcodes.Def{{ID: "OP_A"}, {ID: "OP_B"}})
}

// checkText is Check's error as text, "" for none.
func checkText(r *Registry) string {
	if err := r.Check(); err != nil {
		return err.Error()
	}
	return ""
}

func TestCheckAcceptsEveryOpcodeWithOneUnit(t *testing.T) {
	r := NewRegistry(twoOpTable())
	r.Register(Op{ID: "OP_A", New: newEmpty}, Op{ID: "OP_B", New: newEmpty})
	if err := r.Check(); err != nil {
		t.Fatal(err)
	}
	if got := r.IDs(); len(got) != 2 || got[0] != "OP_A" || got[1] != "OP_B" {
		t.Fatalf("IDs = %v", got)
	}
}

func TestCheckReportsAnOpcodeWithNoUnit(t *testing.T) {
	r := NewRegistry(twoOpTable())
	r.Register(Op{ID: "OP_A", New: newEmpty})
	if got := checkText(r); !strings.Contains(got, "opcodes with no unit: [OP_B]") {
		t.Fatalf("Check = %q", got)
	}
	op, err := r.Table().Decode([]byte(`{"OP_ID":"OP_B"}`))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.newUnit(op); err == nil || !strings.Contains(err.Error(), "OP_B has no logical unit") {
		t.Fatalf("newUnit(OP_B) = %v", err)
	}
}

func TestCheckReportsAUnitWithNoOpcode(t *testing.T) {
	r := NewRegistry(twoOpTable())
	r.Register(Op{ID: "OP_A", New: newEmpty}, Op{ID: "OP_B", New: newEmpty}, Op{ID: "OP_C", New: newEmpty})
	if got := checkText(r); !strings.Contains(got, "OP_C, which is not in the opcode table") {
		t.Fatalf("Check = %q", got)
	}
}

func TestCheckReportsDuplicatesAndMissingFactories(t *testing.T) {
	r := NewRegistry(twoOpTable())
	r.Register(Op{ID: "OP_A", New: newEmpty}, Op{ID: "OP_A", New: newEmpty}, Op{ID: "OP_B"})
	r.RegisterCallTimeout(time.Duration(0), func(any) time.Duration { return time.Second })
	r.RegisterCallTimeout(time.Duration(0), func(any) time.Duration { return time.Second })
	got := checkText(r)
	for _, want := range []string{"OP_A registered twice", "OP_B registered without a factory", "time.Duration registered twice"} {
		if !strings.Contains(got, want) {
			t.Errorf("Check = %q, want it to mention %q", got, want)
		}
	}
}

type sleepArgs struct{ Seconds int }

func TestCallTimeoutByArgumentType(t *testing.T) {
	r := NewRegistry(twoOpTable())
	r.RegisterCallTimeout(sleepArgs{}, func(a any) time.Duration { return time.Duration(a.(sleepArgs).Seconds)*time.Second + time.Minute })
	if d, ok := r.CallTimeout(sleepArgs{Seconds: 5}); !ok || d != time.Minute+5*time.Second {
		t.Fatalf("CallTimeout(sleepArgs) = %v, %v", d, ok)
	}
	if d, ok := r.CallTimeout(&sleepArgs{}); ok {
		t.Fatalf("CallTimeout(*sleepArgs) = %v; only the registered type has one", d)
	}
	if _, ok := r.CallTimeout(nil); ok {
		t.Fatal("CallTimeout(nil) found a timeout")
	}
}
