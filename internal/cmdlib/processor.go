// Package cmdlib holds Ganeti's logical units: each opcode becomes an
// ordered list of named steps, run by the engine (package engine). The
// Processor here is what those units share: the configuration, the node
// RPC, the cluster's secrets and certificates, the built-in allocator.
// Register hands the units to an engine registry.
package cmdlib

import (
	"context"
	"encoding/json"
	"log/slog"

	"github.com/corral/corral/internal/confdb"
	"github.com/corral/corral/internal/config"
	"github.com/corral/corral/internal/engine"
	"github.com/corral/corral/internal/locking"
	"github.com/corral/corral/internal/opcodes"
	"github.com/corral/corral/internal/secret"
	"github.com/corral/corral/internal/store"
)

// NodeRPC calls a node daemon (see engine.NodeRPC).
type NodeRPC = engine.NodeRPC

// LU is a Ganeti logical unit. Its exported fields are its plan: they are
// saved with every committed step and restored when the op resumes.
type LU interface {
	// Locks lists what the unit needs. Called before Prereq, and again on resume.
	Locks(p *Processor, op *opcodes.Op) []locking.Request
	// Prereq checks the request against the configuration and fills the plan.
	// It runs once, before the first step; it must not change anything.
	Prereq(ctx context.Context, p *Processor, op *opcodes.Op) error
	// Steps are run in order; each is committed before the next starts.
	Steps() []Step
	// Result is the opcode result once every step ran.
	Result() any
}

// Releaser is implemented by units that can give back some lock levels
// once a step has committed (see engine.Releaser).
type Releaser = engine.Releaser

// UnsafeSteps is implemented by units with a step that is unsafe to
// repeat (see engine.UnsafeSteps).
type UnsafeSteps = engine.UnsafeSteps

// Reverter is implemented by units that can undo a partly done change when a
// step fails (for example a create that leaves disks behind).
type Reverter interface {
	Revert(ctx context.Context, s *StepCtx, failed error)
}

// Step is one resumable piece of a unit (see engine.Step).
type Step struct {
	Name string
	Run  func(ctx context.Context, s *StepCtx) error
}

// StepCtx is what a step works with: the engine's step context and the
// units' shared Processor.
type StepCtx struct {
	*engine.StepCtx
	p *Processor
}

// Processor is what Ganeti's units share.
type Processor struct {
	Cfg    *confdb.DB
	RPC    NodeRPC
	Log    *slog.Logger
	Master *config.Node // the node corrald runs on (for on_master work)
	// SelfNode names the node this corrald runs on when it knows it (an
	// elected master's candidate name): the node that holds the cluster
	// IP. "" or a name that is no node: the configuration's master node.
	SelfNode string
	// StoreHealth reports the members of a replicated store (etcd) for
	// cluster verify; nil for the embedded store.
	StoreHealth func(ctx context.Context) ([]store.MemberHealth, error)
	// Etcd changes the members of a store on etcd as master candidates
	// come and go; nil for the embedded store.
	Etcd *EtcdMembership
	// Secrets holds the cluster domain secret, the HMAC key of moves
	// between clusters; nil when the master has none.
	Secrets DomainSecrets
	// Certs signs node certificates and renews corrald's own (certrenew.go);
	// nil when the master cannot.
	Certs ClusterCerts
	// IAllocatorSearchPath is where named allocators (-I hail) are looked
	// up; nil: Ganeti's search path (iallocator.SearchPath).
	IAllocatorSearchPath []string
	// RewriteSsconf checks every ssconf file of drop-in mode on disk and
	// rewrites those that differ from the configuration (Ganeti's
	// redist-conf); it reports false when the cluster is not in drop-in
	// mode. nil: no files to write.
	RewriteSsconf func(ctx context.Context) (bool, error)
}

// DomainSecrets reads and replaces the cluster domain secret. It is read
// on each use, so a replaced secret applies without a restart.
type DomainSecrets interface {
	DomainSecret() (secret.Secret, error)
	// StagedDomainSecret is the secret an operator staged on the master
	// for OP_CLUSTER_RENEW_CRYPTO to install.
	StagedDomainSecret() (secret.Secret, error)
	// SetDomainSecret replaces the secret, for every master candidate,
	// and drops the staged one.
	SetDomainSecret(context.Context, secret.Secret) error
}

// NewProcessor wires what the units share.
func NewProcessor(cfg *confdb.DB, rpc NodeRPC, log *slog.Logger) *Processor {
	return &Processor{Cfg: cfg, RPC: rpc, Log: log}
}

// Register adds Ganeti's units, and the timeouts of the node calls they
// make that wait on purpose, to r.
func (p *Processor) Register(r *engine.Registry) {
	for _, area := range [][]engine.Op{p.coreUnits(), p.tagUnits(), p.groupUnits(), p.diskUnits(), p.osUnits(), p.cryptoUnits(), p.backupUnits(), p.housekeepingUnits(), p.rescueUnits(), p.evacuateUnits(), p.migrateUnits(), p.maintDiskUnits(), p.maintCommandUnits(), p.masterIPUnits(), p.nodePowerUnits(), p.networkUnits(), p.moveUnits(), p.multiAllocUnits(), p.storageUnits()} {
		r.Register(area...)
	}
	registerCallTimeouts(r)
}

// unit registers the unit newLU builds for opcode id.
func (p *Processor) unit(id string, newLU func() LU) engine.Op {
	return engine.Op{ID: id, New: func() engine.Unit { return &boundLU{lu: newLU(), p: p} }}
}

// boundLU is a Ganeti unit bound to the Processor it runs with, as the
// engine sees it. Its plan is the unit's own.
type boundLU struct {
	lu LU
	p  *Processor
}

func (b *boundLU) Locks(op *opcodes.Op) []locking.Request { return b.lu.Locks(b.p, op) }

func (b *boundLU) Prereq(ctx context.Context, op *opcodes.Op) error {
	return b.lu.Prereq(ctx, b.p, op)
}

func (b *boundLU) Steps() []engine.Step {
	steps := b.lu.Steps()
	out := make([]engine.Step, len(steps))
	for i, st := range steps {
		out[i] = engine.Step{Name: st.Name, Run: func(ctx context.Context, s *engine.StepCtx) error {
			return st.Run(ctx, &StepCtx{StepCtx: s, p: b.p})
		}}
	}
	return out
}

func (b *boundLU) Result() any { return b.lu.Result() }

// ResolveNames checks the uuids an opcode carries beside its names.
func (b *boundLU) ResolveNames(op *opcodes.Op) error { return b.p.resolveUUIDs(op) }

func (b *boundLU) ReleaseAfter(step int) []locking.Level {
	if r, ok := b.lu.(Releaser); ok {
		return r.ReleaseAfter(step)
	}
	return nil
}

func (b *boundLU) Revert(ctx context.Context, s *engine.StepCtx, failed error) {
	if r, ok := b.lu.(Reverter); ok {
		r.Revert(ctx, &StepCtx{StepCtx: s, p: b.p}, failed)
	}
}

func (b *boundLU) UnsafeToRepeat(op *opcodes.Op, i int) string {
	if u, ok := b.lu.(UnsafeSteps); ok {
		return u.UnsafeToRepeat(op, i)
	}
	return ""
}

func (b *boundLU) MarshalJSON() ([]byte, error) { return json.Marshal(b.lu) }

func (b *boundLU) UnmarshalJSON(data []byte) error { return json.Unmarshal(data, b.lu) }
