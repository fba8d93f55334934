package engine

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sort"
	"time"

	"github.com/corral/corral/internal/ecode"
	"github.com/corral/corral/internal/opcodes"
)

// Op registers the unit of one opcode. The opcode's definition stays in
// the opcode table (package opcodes), which the CLI and corral-rapi read to
// validate and redact jobs without linking any unit; the registration
// names it by ID, and the registry refuses an ID the table lacks.
type Op struct {
	// ID is the opcode's OP_ID; it must be in the registry's table.
	ID string
	// New builds a fresh unit for one run of the opcode, with the
	// dependencies of the package that owns it.
	New func() Unit
}

// CallTimeout is how long the master waits for one kind of node call,
// by its arguments, for calls that wait on purpose (a guest's clean
// shutdown, an OS install, a test delay).
type CallTimeout func(args any) time.Duration

// Registry maps every opcode of a table to the unit that runs it, and node
// call arguments to their timeouts. Packages register at start-up, before
// the processor runs; it is read-only afterwards.
type Registry struct {
	table    *opcodes.Table
	ops      map[string]func() Unit
	timeouts map[reflect.Type]CallTimeout
	problems []error
}

// NewRegistry starts an empty registry over an opcode table.
func NewRegistry(table *opcodes.Table) *Registry {
	return &Registry{table: table, ops: map[string]func() Unit{}, timeouts: map[reflect.Type]CallTimeout{}}
}

// Table is the opcode table units are registered against.
func (r *Registry) Table() *opcodes.Table { return r.table }

// Register adds the units of ops. An opcode missing from the table, one
// registered twice or a registration without a factory is a mistake Check
// reports.
func (r *Registry) Register(ops ...Op) {
	for _, o := range ops {
		_, ok := r.table.Lookup(o.ID)
		switch {
		case !ok:
			r.problems = append(r.problems, fmt.Errorf("unit registered for %s, which is not in the opcode table", o.ID))
		case o.New == nil:
			r.problems = append(r.problems, fmt.Errorf("unit of %s registered without a factory", o.ID))
		default:
			if _, dup := r.ops[o.ID]; dup {
				r.problems = append(r.problems, fmt.Errorf("unit of %s registered twice", o.ID))
				continue
			}
			r.ops[o.ID] = o.New
		}
	}
}

// RegisterCallTimeout sets the timeout of the node calls whose arguments
// have the type of args. Calls with no registered timeout get the RPC
// client's default.
func (r *Registry) RegisterCallTimeout(args any, timeout CallTimeout) {
	t := reflect.TypeOf(args)
	if _, dup := r.timeouts[t]; dup {
		r.problems = append(r.problems, fmt.Errorf("timeout of node calls with %s registered twice", t))
		return
	}
	r.timeouts[t] = timeout
}

// CallTimeout is the registered timeout of a node call with args; false
// when none is registered.
func (r *Registry) CallTimeout(args any) (time.Duration, bool) {
	f, ok := r.timeouts[reflect.TypeOf(args)]
	if !ok {
		return 0, false
	}
	return f(args), true
}

// Check reports every registration mistake and every opcode of the table
// with no unit: the master refuses to start with either, rather than fail
// the first job that uses the opcode.
func (r *Registry) Check() error {
	errs := slices.Clone(r.problems)
	var missing []string
	for _, id := range r.table.IDs() {
		if _, ok := r.ops[id]; !ok {
			missing = append(missing, id)
		}
	}
	if len(missing) > 0 {
		sort.Strings(missing)
		errs = append(errs, fmt.Errorf("opcodes with no unit: %v", missing))
	}
	return errors.Join(errs...)
}

// IDs lists the opcodes that have a unit, sorted.
func (r *Registry) IDs() []string {
	ids := make([]string, 0, len(r.ops))
	for id := range r.ops {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

// newUnit builds the unit of a decoded opcode.
func (r *Registry) newUnit(op *opcodes.Op) (Unit, error) {
	newUnit, ok := r.ops[op.ID]
	if !ok {
		return nil, &ecode.Error{Kind: ecode.OpCodeUnknown, Class: ecode.Inval, Msg: fmt.Sprintf("opcode %s has no logical unit", op.ID)}
	}
	return newUnit(), nil
}
