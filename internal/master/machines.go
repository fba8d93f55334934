package master

import (
	"context"
	"encoding/json"
	"github.com/corral/corral/internal/coe"
	"github.com/corral/corral/internal/coe/driver"
	"github.com/corral/corral/internal/coe/driver/fake"
	"github.com/corral/corral/internal/coe/driver/k8sbm"
	"github.com/corral/corral/internal/coe/driver/k8sprocess"
	"slices"
	"strings"
	"time"

	"github.com/corral/corral/internal/baremetal"
	"github.com/corral/corral/internal/cmdlib"
	"github.com/corral/corral/internal/config"
	"github.com/corral/corral/internal/ecode"
	"github.com/corral/corral/internal/engine"
	"github.com/corral/corral/internal/jobqueue"
	"github.com/corral/corral/internal/machinewire"
)

// namedOrAll reads a query's optional list of names (argument 0): every
// object when it is empty, else each named one in order, failing on the
// first unknown name.
func namedOrAll[T any](args []json.RawMessage, all func() []T, must func(string) (T, error)) ([]T, error) {
	names, err := optArg[[]string](args, 0, nil)
	if err != nil {
		return nil, err
	}
	if len(names) == 0 {
		return all(), nil
	}
	out := make([]T, 0, len(names))
	for _, n := range names {
		obj, err := must(n)
		if err != nil {
			return nil, err
		}
		out = append(out, obj)
	}
	return out, nil
}

// machineSubmitWait bounds how long MachineSubmit waits for an action to
// be accepted; a busy queue answers with the job id before it.
const machineSubmitWait = 30 * time.Second

func (h *luxiHandler) luxiMachineQuery(ctx context.Context, args []json.RawMessage) (any, error) {
	cfg := h.d.cfg
	ms, err := namedOrAll(args, cfg.Machines, cfg.MustMachine)
	if err != nil {
		return nil, err
	}
	out := make([]machinewire.Record, len(ms))
	for i, m := range ms {
		out[i] = machinewire.Record{Machine: m, Status: cfg.MachineStatus(m.UUID)}
		if n, err := h.d.machines.Conductor(m); err == nil {
			out[i].ConductorNode = n.Name
		}
	}
	return out, nil
}

func (h *luxiHandler) luxiMachinePorts(ctx context.Context, args []json.RawMessage) (any, error) {
	f, err := optArg[machinewire.PortFilter](args, 0, machinewire.PortFilter{})
	if err != nil {
		return nil, err
	}
	cfg := h.d.cfg
	machine := ""
	if f.Machine != "" {
		m, err := cfg.MustMachine(f.Machine)
		if err != nil {
			return nil, err
		}
		machine = m.UUID
	}
	out := []*config.MachinePort{}
	for _, p := range cfg.Ports(machine) {
		if f.Address != "" && !strings.EqualFold(p.Address, f.Address) {
			continue
		}
		if len(f.UUIDs) > 0 && !slices.Contains(f.UUIDs, p.UUID) {
			continue
		}
		out = append(out, p)
	}
	return out, nil
}

func (h *luxiHandler) luxiMachineDrivers(ctx context.Context, args []json.RawMessage) (any, error) {
	hosts := []string{}
	for _, n := range h.d.cfg.Nodes() {
		if !n.Offline {
			hosts = append(hosts, n.Name)
		}
	}
	out := baremetal.HardwareTypes()
	for i := range out {
		out[i].Hosts = hosts
	}
	return out, nil
}

func (h *luxiHandler) luxiMachineLookup(ctx context.Context, args []json.RawMessage) (any, error) {
	a, err := arg[machinewire.LookupArgs](args, 0, "lookup")
	if err != nil {
		return nil, err
	}
	return h.d.machines.Lookup(ctx, a)
}

func (h *luxiHandler) luxiMachineHeartbeat(ctx context.Context, args []json.RawMessage) (any, error) {
	a, err := arg[machinewire.HeartbeatArgs](args, 0, "heartbeat")
	if err != nil {
		return nil, err
	}
	return nil, h.d.machines.Heartbeat(ctx, a)
}

// luxiMachineSubmit submits one OP_MACHINE_* op and waits until the
// action is accepted (the machine reserved by the job), the job ended, or
// machineSubmitWait passed; a failed op answers with its error.
func (h *luxiHandler) luxiMachineSubmit(ctx context.Context, args []json.RawMessage) (any, error) {
	raw, err := arg[json.RawMessage](args, 0, "op")
	if err != nil {
		return nil, err
	}
	var head struct {
		ID      string `json:"OP_ID"`
		Machine string `json:"machine"`
	}
	if err := json.Unmarshal(raw, &head); err != nil || !strings.HasPrefix(head.ID, "OP_MACHINE_") {
		return nil, ecode.Errorf(ecode.Inval, "MachineSubmit takes one OP_MACHINE_* opcode")
	}
	q := h.d.queue
	id, err := q.Submit(ctx, []json.RawMessage{raw})
	if err != nil {
		return nil, err
	}
	reply := machinewire.SubmitReply{JobID: id}
	sub, err := q.Subscribe(id)
	if err != nil {
		return reply, nil // ended and gone already: nothing to wait for
	}
	defer sub.Close()
	timer := time.NewTimer(machineSubmitWait)
	defer timer.Stop()
	for {
		changed := h.d.cfg.Changed()
		done, err := h.d.machineJobOutcome(ctx, id)
		if done || err != nil {
			return reply, err
		}
		if m, ok := h.d.cfg.Machine(head.Machine); ok && m.Reservation == baremetal.Reservation(id) {
			return reply, nil
		}
		select {
		case <-changed:
		case <-sub.C:
		case <-timer.C:
			return reply, nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// machineJobOutcome reports whether job id ended, and its op's error.
func (d *Daemon) machineJobOutcome(ctx context.Context, id int64) (bool, error) {
	rows, err := d.queue.Query(ctx, []int64{id}, []string{"status", "opresult"})
	if err != nil || len(rows) == 0 || len(rows[0]) < 2 {
		return false, err
	}
	switch st, _ := rows[0][0].(string); jobqueue.Status(st) {
	case jobqueue.StatusSuccess:
		return true, nil
	case jobqueue.StatusError, jobqueue.StatusCanceled:
		res, _ := rows[0][1].([]any)
		if len(res) > 0 && res[0] != nil {
			return true, ecode.Decode(wireValue(res[0]))
		}
		return true, ecode.ExecErrorf("job %d %s", id, st)
	}
	return false, nil
}

// wireValue is v as JSON decodes it: the queue may hold an op's result
// still encoded (json.RawMessage), which ecode.Decode would print as
// bytes instead of reading the error in it.
func wireValue(v any) any {
	var raw []byte
	switch x := v.(type) {
	case json.RawMessage:
		raw = x
	case []byte:
		raw = x
	default:
		return v
	}
	var out any
	if err := json.Unmarshal(raw, &out); err != nil {
		return v
	}
	return out
}

// registerUnits registers the units of every package that owns some:
// Ganeti's (cmdlib), the bare-metal conductor's and the COE clusters'.
func registerUnits(r *engine.Registry, proc *cmdlib.Processor, machines *baremetal.Deps, clusters *coe.Deps) {
	proc.Register(r)
	baremetal.Register(r, machines)
	coe.Register(r, clusters)
}

// coeDrivers are the COE drivers corrald offers: k8s_process (real
// control planes with kwok nodes, for templates of the image or
// cluster_distro "kwok"), k8s_bm (the same control planes, workers on
// bare-metal machines: server_type bm) and fake (in memory,
// cluster_distro "fake").
func coeDrivers(keys k8sprocess.Keys) *driver.Registry {
	return driver.NewRegistry(fake.New(), k8sprocess.New(keys), k8sbm.New(keys))
}

// planPowerSync is the machine-power-sync reconciler's plan: one job
// reading every machine with a real power interface that no action holds.
func (d *Daemon) planPowerSync(ctx context.Context) (map[string]any, error) {
	ids := baremetal.SyncCandidates(d.cfg.Machines())
	if len(ids) == 0 {
		return nil, nil
	}
	return map[string]any{"OP_ID": "OP_MACHINE_POWER_SYNC", "machines": ids}, nil
}
