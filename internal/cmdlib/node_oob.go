package cmdlib

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/corral/corral/internal/baremetal"
	"github.com/corral/corral/internal/baremetal/states"
	"github.com/corral/corral/internal/config"
	"github.com/corral/corral/internal/ecode"
	"github.com/corral/corral/internal/engine"
	"github.com/corral/corral/internal/jobqueue"
	"github.com/corral/corral/internal/locking"
	"github.com/corral/corral/internal/opcodes"
)

// Ganeti's out-of-band commands (constants.OOB_*) and the result status
// codes of a query (constants.RS_*) OP_OOB_COMMAND answers with.
const (
	oobPowerOn     = "power-on"
	oobPowerOff    = "power-off"
	oobPowerCycle  = "power-cycle"
	oobPowerStatus = "power-status"
	oobHealth      = "health"

	rsNormal  = 0
	rsNoData  = 2
	rsUnavail = 3
)

// oobMachineTargets are the OP_MACHINE_POWER targets of the commands that
// change a node's power.
var oobMachineTargets = map[string]string{
	oobPowerOn: string(states.PowerOn), oobPowerOff: string(states.PowerOff), oobPowerCycle: string(states.Rebooting),
}

// oobCommandLU is Ganeti's LUOobCommand. Ganeti runs the node's
// oob_program; Corral has none, and reaches a node's power through the
// bare-metal machine its node parameter "machine" names, as
// OP_NODE_POWERCYCLE does: power-on, power-off and power-cycle run one
// OP_MACHINE_POWER child job per node, one after the other (power_delay
// apart for power-on), each waited for up to timeout seconds;
// power-status and health run one OP_MACHINE_POWER_SYNC job, which reads
// the BMCs, and answer from what it recorded. A node without a machine
// answers Ganeti's "unavailable" (no oob_program). The result is Ganeti's:
// per node, [[0, name], [status, data]].
type oobCommandLU struct {
	Command string    `json:"command"`
	Nodes   []oobNode `json:"nodes"`
	Timeout float64   `json:"timeout"`
	Delay   float64   `json:"power_delay"`
	// Deadlines are the times by which each submitted job must have
	// ended, fixed when it is submitted (index: the child job's).
	Deadlines []time.Time `json:"deadlines,omitempty"`
	Results   [][]any     `json:"results,omitempty"`
}

// oobNode is one node of the command and the machine it runs on ("": no
// machine link).
type oobNode struct {
	Name        string `json:"name"`
	Machine     string `json:"machine,omitempty"`
	MachineName string `json:"machine_name,omitempty"`
	// Status is the node's result status once known; Data its payload.
	Status int `json:"status"`
	Data   any `json:"data,omitempty"`
}

func (lu *oobCommandLU) Locks(p *Processor, op *opcodes.Op) []locking.Request {
	// Shared: the machine jobs take the machines' own locks once this op
	// waits for them, suspended and holding nothing.
	var uuids []string
	for _, name := range op.Strings("node_names") {
		if n, ok := p.Cfg.Node(name); ok {
			uuids = append(uuids, n.UUID)
		}
	}
	if len(uuids) == 0 {
		return []locking.Request{bgl(locking.Shared), nodeLock(locking.Shared, locking.All)}
	}
	return []locking.Request{bgl(locking.Shared), nodeLock(locking.Shared, uuids...)}
}

func (lu *oobCommandLU) Prereq(ctx context.Context, p *Processor, op *opcodes.Op) error {
	cmd := op.Str("command")
	if _, power := oobMachineTargets[cmd]; !power && cmd != oobPowerStatus && cmd != oobHealth {
		return ecode.Errorf(ecode.Inval, "Invalid out-of-band command '%s' (one of %s, %s, %s, %s, %s)", cmd, oobHealth, oobPowerCycle, oobPowerOff, oobPowerOn, oobPowerStatus)
	}
	if op.Float("power_delay") < 0 {
		return ecode.Errorf(ecode.Inval, "power_delay must not be negative")
	}
	c := p.Cfg.Cluster()
	skipMaster := cmd == oobPowerOff || cmd == oobPowerCycle
	var nodes []*config.Node
	if names := op.Strings("node_names"); len(names) > 0 {
		for _, name := range names {
			n, err := p.Cfg.MustNode(name)
			if err != nil {
				return err
			}
			if skipMaster && n.UUID == c.MasterNode {
				return ecode.Errorf(ecode.Inval, "Operating on the master node %s is not allowed for %s; %s", n.Name, cmd, lu.masterHint(p, n, cmd))
			}
			nodes = append(nodes, n)
		}
	} else {
		for _, n := range p.Cfg.Nodes() {
			if !(skipMaster && n.UUID == c.MasterNode) {
				nodes = append(nodes, n)
			}
		}
	}
	lu.Command, lu.Timeout, lu.Delay, lu.Nodes = cmd, op.Float("timeout"), op.Float("power_delay"), nil
	sort.Slice(nodes, func(i, j int) bool { return nodes[i].Name < nodes[j].Name })
	for _, n := range nodes {
		if cmd == oobPowerOff && !op.Bool("ignore_status") && !n.Offline {
			return ecode.Errorf(ecode.State, "Cannot power off node %s because it is not marked offline", n.Name)
		}
		on := oobNode{Name: n.Name, Status: rsUnavail}
		if m, err := p.nodeMachine(n); err == nil {
			on.Machine, on.MachineName, on.Status = m.UUID, m.Name, rsNormal
		} else if !errors.Is(err, errNoMachineLink) {
			p.Log.Warn("node left without out-of-band control", "node", n.Name, "err", err)
		}
		lu.Nodes = append(lu.Nodes, on)
	}
	return nil
}

// masterHint ends Ganeti's refusal to power the master off or cycle it.
func (lu *oobCommandLU) masterHint(p *Processor, n *config.Node, cmd string) string {
	if m, err := p.nodeMachine(n); err == nil {
		return fmt.Sprintf("run 'corral baremetal node power %s %s' if you want to operate on the master regardless", map[string]string{oobPowerOff: "off", oobPowerCycle: "reboot"}[cmd], m.Name)
	}
	return "it does not support out-of-band operations"
}

// linked are the indexes in Nodes of the nodes with a machine.
func (lu *oobCommandLU) linked() []int {
	var out []int
	for i, n := range lu.Nodes {
		if n.Machine != "" {
			out = append(out, i)
		}
	}
	return out
}

func (lu *oobCommandLU) Steps() []Step {
	var steps []Step
	if _, power := oobMachineTargets[lu.Command]; power {
		for k, i := range lu.linked() {
			steps = append(steps,
				Step{"power " + lu.Nodes[i].Name, func(ctx context.Context, s *StepCtx) error { return lu.submitPower(ctx, s, k, i) }},
				Step{"wait for " + lu.Nodes[i].Name, func(ctx context.Context, s *StepCtx) error { return lu.waitPower(ctx, s, k, i) }})
		}
	} else if len(lu.linked()) > 0 {
		steps = append(steps,
			Step{"read the BMCs", lu.submitSync},
			Step{"wait for the BMCs", lu.waitSync})
	}
	return append(steps, Step{"report", func(ctx context.Context, s *StepCtx) error {
		lu.Results = nil
		for _, n := range lu.Nodes {
			lu.Results = append(lu.Results, []any{[]any{rsNormal, n.Name}, []any{n.Status, n.Data}})
		}
		return nil
	}})
}

// submitPower submits the power job of the k-th linked node (Nodes[i]),
// power_delay after the previous power-on.
func (lu *oobCommandLU) submitPower(ctx context.Context, s *StepCtx, k, i int) error {
	if lu.Command == oobPowerOn && k > 0 && lu.Delay > 0 {
		select {
		case <-time.After(time.Duration(lu.Delay * float64(time.Second))):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	n := lu.Nodes[i]
	b, err := json.Marshal(map[string]any{"OP_ID": "OP_MACHINE_POWER", "machine": n.Machine, "target": oobMachineTargets[lu.Command]})
	if err != nil {
		return fmt.Errorf("encoding the power job of node %s: %w", n.Name, err)
	}
	s.Submit([]json.RawMessage{b})
	lu.Deadlines = append(lu.Deadlines[:k], time.Now().Add(time.Duration(lu.Timeout*float64(time.Second))))
	s.Logf(ctx, "Running %s on node %s through machine %s", lu.Command, n.Name, n.MachineName)
	return nil
}

// waitPower waits for the k-th power job and records its outcome for
// Nodes[i]: Ganeti's "no data" (with a warning) when it failed or did not
// end in time.
func (lu *oobCommandLU) waitPower(ctx context.Context, s *StepCtx, k, i int) error {
	ids := s.ChildJobs()
	if k >= len(ids) || k >= len(lu.Deadlines) {
		return ecode.ExecErrorf("the power job of node %s was not submitted", lu.Nodes[i].Name)
	}
	st, err := s.WaitForJob(ctx, ids[k], lu.Deadlines[k])
	switch {
	case errors.Is(err, engine.ErrJobWaitTimedOut):
		s.Logf(ctx, "Out-of-band command on node '%s' did not end within %.0f s (job %d)", lu.Nodes[i].Name, lu.Timeout, ids[k])
		lu.Nodes[i].Status = rsNoData
		return nil
	case err != nil:
		return err
	case st != jobqueue.StatusSuccess:
		s.Logf(ctx, "Out-of-band command on node '%s' failed: job %d ended %s", lu.Nodes[i].Name, ids[k], st)
		lu.Nodes[i].Status = rsNoData
	}
	return nil
}

// submitSync submits one OP_MACHINE_POWER_SYNC job over the linked nodes'
// machines.
func (lu *oobCommandLU) submitSync(ctx context.Context, s *StepCtx) error {
	var machines []any
	for _, i := range lu.linked() {
		if !slices.Contains(machines, any(lu.Nodes[i].Machine)) {
			machines = append(machines, lu.Nodes[i].Machine)
		}
	}
	b, err := json.Marshal(map[string]any{"OP_ID": "OP_MACHINE_POWER_SYNC", "machines": machines})
	if err != nil {
		return fmt.Errorf("encoding the power-sync job: %w", err)
	}
	s.Submit([]json.RawMessage{b})
	lu.Deadlines = []time.Time{time.Now().Add(time.Duration(lu.Timeout * float64(time.Second)))}
	return nil
}

// waitSync waits for the sync job, then answers each linked node from
// its machine: the power state for power-status, the BMC's reachability
// and the recorded power's agreement with it for health.
func (lu *oobCommandLU) waitSync(ctx context.Context, s *StepCtx) error {
	ids := s.ChildJobs()
	if len(ids) != 1 || len(lu.Deadlines) != 1 {
		return ecode.ExecErrorf("the power-sync job was not submitted")
	}
	st, err := s.WaitForJob(ctx, ids[0], lu.Deadlines[0])
	timedOut := errors.Is(err, engine.ErrJobWaitTimedOut)
	if err != nil && !timedOut {
		return err
	}
	for _, i := range lu.linked() {
		n := &lu.Nodes[i]
		m, ok := s.Cfg().Machine(n.Machine)
		if timedOut || st != jobqueue.StatusSuccess || !ok {
			s.Logf(ctx, "Out-of-band RPC failed on node '%s': the BMC of machine %s was not read", n.Name, n.MachineName)
			n.Status = rsNoData
			continue
		}
		reach, _ := s.Cfg().MachineStatus(m.UUID).Condition(baremetal.CondBMCReachable)
		if lu.Command == oobPowerStatus {
			if reach.Status == config.ConditionFalse || (m.PowerState != string(states.PowerOn) && m.PowerState != string(states.PowerOff)) {
				s.Logf(ctx, "Out-of-band RPC failed on node '%s': machine %s's power state is unknown (%s)", n.Name, n.MachineName, reach.Message)
				n.Status = rsNoData
				continue
			}
			n.Data = map[string]any{"powered": m.PowerState == string(states.PowerOn)}
			continue
		}
		n.Data = lu.health(ctx, s, n.Name, m, reach)
	}
	return nil
}

// health is Ganeti's health payload for a machine: [item, status] pairs.
func (lu *oobCommandLU) health(ctx context.Context, s *StepCtx, node string, m *config.Machine, reach config.Condition) []any {
	bmc, power := "OK", "OK"
	switch reach.Status {
	case config.ConditionFalse:
		bmc, power = "CRITICAL", "UNKNOWN"
	case config.ConditionTrue:
	default:
		bmc = "UNKNOWN"
	}
	if c, ok := s.Cfg().MachineStatus(m.UUID).Condition(baremetal.CondPowerInSync); ok && c.Status == config.ConditionFalse && power == "OK" {
		power = "WARNING"
	}
	if m.Maintenance && bmc == "OK" {
		bmc = "WARNING"
	}
	out := []any{[]any{"bmc", bmc}, []any{"power-sync", power}}
	for _, it := range out {
		pair := it.([]any)
		if st := pair[1].(string); st == "WARNING" || st == "CRITICAL" {
			s.Logf(ctx, "Item '%s' on node '%s' has status '%s'", pair[0], node, st)
		}
	}
	return out
}

func (lu *oobCommandLU) Result() any {
	if lu.Results == nil {
		return []any{}
	}
	return lu.Results
}

// errNoMachineLink is nodeMachine's error for a node whose ndparam
// machine is not set.
var errNoMachineLink = errors.New("no machine link")

// nodeMachine is the bare-metal machine a node runs on, through its node
// parameter machine.
func (p *Processor) nodeMachine(n *config.Node) (*config.Machine, error) {
	c := p.Cfg.Cluster()
	var g *config.NodeGroup
	if x, ok := p.Cfg.Group(n.Group); ok {
		g = x
	}
	machine, _ := NodeNDParams(c, g, n)[NDMachine].(string)
	if machine == "" {
		return nil, &ecode.Error{Kind: ecode.OpPrereqError, Class: ecode.State, Err: errNoMachineLink,
			Msg: fmt.Sprintf("Node %s has no out-of-band power control: set its node parameter %s to the bare-metal machine it runs on ('corral node modify -N %s=NAME %s')", n.Name, NDMachine, NDMachine, n.Name)}
	}
	m, ok := p.Cfg.Machine(machine)
	if !ok {
		return nil, ecode.Errorf(ecode.NoEnt, "Node %s runs on machine '%s', which the cluster does not manage", n.Name, machine)
	}
	return m, nil
}
