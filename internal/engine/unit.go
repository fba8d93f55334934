// Package engine runs opcodes as units of resumable steps. It is the job
// queue's OpRunner: it decodes an opcode, builds its unit from the
// Registry, takes the unit's locks in level order, runs its checks once,
// then its steps. Each step's configuration writes, the child jobs it
// submits and the job's step cursor (with the unit's plan, serialised)
// commit in one store transaction, so a restarted master resumes the op at
// its next step with the same decisions instead of failing it.
//
// The engine knows no opcode. The packages that own units (cmdlib for
// Ganeti's) register them; each brings its own dependencies in the unit's
// factory.
package engine

import (
	"context"

	"github.com/corral/corral/internal/config"
	"github.com/corral/corral/internal/locking"
	"github.com/corral/corral/internal/opcodes"
)

// NodeRPC calls a node daemon. opID makes the call idempotent on the node:
// a retried operation is answered from the node's record.
type NodeRPC interface {
	Call(ctx context.Context, node *config.Node, method, opID string, args, reply any) error
}

// Unit is a logical unit: what one opcode does. Its JSON encoding is its
// plan: it is saved with every committed step and restored when the op
// resumes.
type Unit interface {
	// Locks lists what the unit needs. Called before Prereq, and again on resume.
	Locks(op *opcodes.Op) []locking.Request
	// Prereq checks the request against the configuration and fills the plan.
	// It runs once, before the first step; it must not change anything.
	Prereq(ctx context.Context, op *opcodes.Op) error
	// Steps are run in order; each is committed before the next starts.
	Steps() []Step
	// Result is the opcode result once every step ran.
	Result() any
}

// NameResolver is implemented by units whose opcode names objects by both
// name and uuid: ResolveNames checks the pair (or fills the name) before
// the first step, unlocked, before Locks is computed from the names. A
// resumed op skips it: it may have renamed or removed its object itself.
type NameResolver interface {
	ResolveNames(op *opcodes.Op) error
}

// Releaser is implemented by units that can give back some lock levels
// once a step has committed (Ganeti drops the node-allocation lock once the
// node is chosen and reserved).
type Releaser interface {
	ReleaseAfter(step int) []locking.Level
}

// Reverter is implemented by units that can undo a partly done change when a
// step fails (for example a create that leaves disks behind).
type Reverter interface {
	Revert(ctx context.Context, s *StepCtx, failed error)
}

// Step is one resumable piece of a unit. A step is run again when the
// master stops before it commits, so by default it must be safe to repeat:
// its configuration writes commit with it, and its node RPCs carry an
// operation id the node answers from its record. A step that is not safe
// is declared by its unit (see UnsafeSteps).
type Step struct {
	Name string
	Run  func(ctx context.Context, s *StepCtx) error
}

// UnsafeSteps is implemented by units with a step that is unsafe to repeat:
// one with a side effect that no node operation record covers and that can
// be neither checked nor undone, so that running it a second time after a
// master restart could do it twice (an external call without an operation
// id, a script whose outcome the node does not record). Before such a step
// runs, the processor durably records that it began; an op found later with
// that step begun and not committed fails with a message naming the step
// instead of running it again. The declaration lives on the unit, not on
// Step, so that Step stays a two-field literal.
//
// A step declared unsafe cannot suspend its op (StepCtx.Suspend refuses):
// the op would be run again at that step and fail as interrupted.
type UnsafeSteps interface {
	// UnsafeToRepeat returns, for step i of op, what an operator should
	// check to learn whether the step took effect; "" for a safe step.
	UnsafeToRepeat(op *opcodes.Op, i int) string
}
