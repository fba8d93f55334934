package cmdlib

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/corral/corral/internal/ecode"
	"github.com/corral/corral/internal/engine"
	"github.com/corral/corral/internal/locking"
	"github.com/corral/corral/internal/opcodes"
)

// NDMachine is the node parameter naming the bare-metal machine (a
// machine of this cluster's conductor) a node runs on: the link through
// which the node's power is controlled.
const NDMachine = "machine"

func (p *Processor) nodePowerUnits() []engine.Op {
	return []engine.Op{p.unit("OP_NODE_POWERCYCLE", func() LU { return &nodePowercycleLU{} }),
		p.unit("OP_OOB_COMMAND", func() LU { return &oobCommandLU{} })}
}

// nodePowercycleLU power cycles a node through its machine: one child job,
// OP_MACHINE_POWER to "rebooting", which the bare-metal conductor runs
// with the machine's own reservation and driver. Ganeti asks the node's
// own daemon to reboot its machine; Corral does not reboot a machine it
// has no out-of-band control of, so a node without ndparam machine is
// refused. The result is a message naming the job.
type nodePowercycleLU struct {
	Node    string            `json:"node"`
	Machine string            `json:"machine"`
	Job     []json.RawMessage `json:"job"`
	ID      int64             `json:"id,omitempty"`
}

func (lu *nodePowercycleLU) Locks(p *Processor, op *opcodes.Op) []locking.Request {
	reqs := []locking.Request{bgl(locking.Shared)}
	if n, ok := p.Cfg.Node(op.Str("node_name")); ok {
		reqs = append(reqs, nodeLock(locking.Shared, n.UUID))
	}
	return reqs
}

func (lu *nodePowercycleLU) Prereq(ctx context.Context, p *Processor, op *opcodes.Op) error {
	n, err := p.Cfg.MustNode(op.Str("node_name"))
	if err != nil {
		return err
	}
	if u := op.Str("node_uuid"); u != "" && u != n.UUID {
		return ecode.Errorf(ecode.Inval, "Node name '%s' and UUID '%s' do not match", n.Name, u)
	}
	if n.UUID == p.Cfg.Cluster().MasterNode && !op.Bool("force") {
		return ecode.Errorf(ecode.Inval, "The node is the master and the force parameter was not set")
	}
	m, err := p.nodeMachine(n)
	if err != nil {
		return err
	}
	b, err := json.Marshal(map[string]any{"OP_ID": "OP_MACHINE_POWER", "machine": m.UUID, "target": "rebooting"})
	if err != nil {
		return fmt.Errorf("encoding the power job: %w", err)
	}
	lu.Node, lu.Machine, lu.Job = n.Name, m.Name, []json.RawMessage{b}
	return nil
}

func (lu *nodePowercycleLU) Steps() []Step {
	return []Step{
		{"submit-power-job", func(ctx context.Context, s *StepCtx) error {
			s.Submit(lu.Job)
			s.Logf(ctx, "Rebooting machine %s of node %s", lu.Machine, lu.Node)
			return nil
		}},
		{"report", func(ctx context.Context, s *StepCtx) error {
			if ids := s.ChildJobs(); len(ids) == 1 {
				lu.ID = ids[0]
			}
			return nil
		}},
	}
}

func (lu *nodePowercycleLU) Result() any {
	return fmt.Sprintf("Node %s: job %d reboots machine %s", lu.Node, lu.ID, lu.Machine)
}
