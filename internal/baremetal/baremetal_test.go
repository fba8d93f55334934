package baremetal

import (
	"context"
	"encoding/json"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/corral/corral/internal/baremetal/states"
	"github.com/corral/corral/internal/confdb"
	"github.com/corral/corral/internal/config"
	"github.com/corral/corral/internal/engine"
	"github.com/corral/corral/internal/jobqueue"
	"github.com/corral/corral/internal/locking"
	"github.com/corral/corral/internal/machinewire"
	"github.com/corral/corral/internal/nodeapi"
	"github.com/corral/corral/internal/opcodes"
	"github.com/corral/corral/internal/store/boltstore"
)

// fakeConductor plays corral-node for the agent-driven flows: it records
// every call, keeps the power state, and answers agent commands.
type fakeConductor struct {
	mu       sync.Mutex
	calls    []string
	power    string
	commands []nodeapi.MachineAgentCommandArgs
}

func (f *fakeConductor) Call(ctx context.Context, n *config.Node, method, opID string, args, reply any) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	switch a := args.(type) {
	case nodeapi.MachinePowerArgs:
		f.calls = append(f.calls, method+":"+a.Action)
		if a.Action != "" {
			f.power = string(states.Power(a.Action).EndsIn())
		}
		if r, ok := reply.(*nodeapi.MachinePowerReply); ok {
			r.PowerState = f.power
		}
	case nodeapi.MachineAgentCommandArgs:
		f.calls = append(f.calls, method+":"+a.Name)
		f.commands = append(f.commands, a)
		if r, ok := reply.(*nodeapi.MachineAgentCommandReply); ok {
			r.Status = "SUCCEEDED"
		}
	default:
		f.calls = append(f.calls, method)
	}
	return nil
}

type env struct {
	t    *testing.T
	cfg  *confdb.DB
	q    *jobqueue.Queue
	deps *Deps
	node *fakeConductor
}

func newEnv(t *testing.T, timeouts Timeouts) *env {
	t.Helper()
	st, err := boltstore.Open(filepath.Join(t.TempDir(), "s.db"), boltstore.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	ctx := context.Background()
	cfg, err := confdb.Bootstrap(ctx, st, &config.Cluster{Meta: config.Meta{Name: "c"}, ClusterName: "c"},
		&config.NodeGroup{Meta: config.Meta{Name: "default"}}, &config.Node{Meta: config.Meta{Name: "n1"}})
	if err != nil {
		t.Fatal(err)
	}
	fc := &fakeConductor{power: "power off"}
	reg := engine.NewRegistry(opcodes.Default())
	var proc *engine.Processor
	d := &Deps{Cfg: cfg, RPC: fc, Timeouts: timeouts, AgentAPIURL: "https://api.test:6385",
		Notify: func(ev string) error { return proc.Notify(ev) }}
	Register(reg, d)
	proc = engine.NewProcessor(cfg, locking.New(), fc, reg, slog.New(slog.DiscardHandler))
	q, err := jobqueue.New(jobqueue.Options{Store: st, Runner: proc, Summary: reg.Table().Summary})
	if err != nil {
		t.Fatal(err)
	}
	proc.Wake = q.Notify
	if err := q.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { q.Stop() })
	return &env{t: t, cfg: cfg, q: q, deps: d, node: fc}
}

// run submits op and waits for the job's end; it returns the op's error.
func (e *env) run(op map[string]any) (int64, error) {
	e.t.Helper()
	id := e.submit(op)
	return id, e.wait(id)
}

func (e *env) submit(op map[string]any) int64 {
	e.t.Helper()
	raw, _ := json.Marshal(op)
	id, err := e.q.Submit(context.Background(), []json.RawMessage{raw})
	if err != nil {
		e.t.Fatal(err)
	}
	return id
}

func (e *env) wait(id int64) error {
	e.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		rows, err := e.q.Query(context.Background(), []int64{id}, []string{"status", "opresult"})
		if err != nil {
			e.t.Fatal(err)
		}
		switch rows[0][0] {
		case "success":
			return nil
		case "error", "canceled":
			res, _ := rows[0][1].([]any)
			raw, _ := json.Marshal(res)
			return &jobError{string(raw)}
		}
		time.Sleep(2 * time.Millisecond)
	}
	e.t.Fatalf("job %d never ended", id)
	return nil
}

type jobError struct{ s string }

func (j *jobError) Error() string { return j.s }

func (e *env) machine(ident string) *config.Machine {
	e.t.Helper()
	m, ok := e.cfg.Machine(ident)
	if !ok {
		e.t.Fatalf("no machine %s", ident)
	}
	return m
}

func (e *env) expect(ident, state, target string) {
	e.t.Helper()
	m := e.machine(ident)
	if m.ProvisionState != state || m.TargetProvisionState != target || m.Reservation != "" {
		e.t.Fatalf("machine %s: %q -> %q reserved %q; want %q -> %q free (last error %q)",
			ident, m.ProvisionState, m.TargetProvisionState, m.Reservation, state, target, m.LastError)
	}
}

func provision(machine, target string, extra ...any) map[string]any {
	op := map[string]any{"OP_ID": "OP_MACHINE_PROVISION", "machine": machine, "target": target}
	for i := 0; i+1 < len(extra); i += 2 {
		op[extra[i].(string)] = extra[i+1]
	}
	return op
}

// TestFakeHardwareWalk walks a fake-hardware machine through every
// action the real client's walk uses, and checks the refusals.
func TestFakeHardwareWalk(t *testing.T) {
	e := newEnv(t, Timeouts{})
	if _, err := e.run(map[string]any{"OP_ID": "OP_MACHINE_CREATE", "driver": "fake-hardware", "name": "m1"}); err != nil {
		t.Fatal(err)
	}
	e.expect("m1", "enroll", "")
	m := e.machine("m1")
	if m.Interfaces.Rescue != "fake" || m.Interfaces.Deploy != "fake" {
		t.Fatalf("interfaces not defaulted: %+v", m.Interfaces)
	}
	if _, err := e.run(provision("m1", "rescue", "rescue_password_hash", "$5$x$y")); err == nil ||
		!strings.Contains(err.Error(), `can not be performed on node \"m1\" while it is in state \"enroll\"`) {
		t.Fatalf("rescue from enroll: %v", err)
	}
	for _, step := range []struct{ target, state string }{
		{"manage", "manageable"}, {"provide", "available"}, {"active", "active"},
	} {
		if _, err := e.run(provision("m1", step.target)); err != nil {
			t.Fatalf("%s: %v", step.target, err)
		}
		e.expect("m1", step.state, "")
	}
	if _, err := e.run(provision("m1", "rescue")); err == nil || !strings.Contains(err.Error(), "rescue_password") {
		t.Fatalf("rescue without a password: %v", err)
	}
	if _, err := e.run(provision("m1", "rescue", "rescue_password_hash", "$5$salt$hash")); err != nil {
		t.Fatal(err)
	}
	e.expect("m1", "rescue", "")
	if _, ok := e.machine("m1").InstanceInfo[keyRescueHash]; ok {
		t.Fatal("the rescue password hash stayed after the rescue")
	}
	for _, step := range []struct{ target, state string }{{"unrescue", "active"}, {"deleted", "available"}} {
		if _, err := e.run(provision("m1", step.target)); err != nil {
			t.Fatalf("%s: %v", step.target, err)
		}
		e.expect("m1", step.state, "")
	}
	if _, err := e.run(map[string]any{"OP_ID": "OP_MACHINE_POWER", "machine": "m1", "target": "power on"}); err != nil {
		t.Fatal(err)
	}
	if ps := e.machine("m1").PowerState; ps != "power on" {
		t.Fatalf("power state %q", ps)
	}
	if _, err := e.run(map[string]any{"OP_ID": "OP_MACHINE_REMOVE", "machine": "m1"}); err != nil {
		t.Fatal(err)
	}
	if _, ok := e.cfg.Machine("m1"); ok {
		t.Fatal("machine still there")
	}
	if len(e.node.calls) != 0 {
		t.Fatalf("fake hardware called a node: %v", e.node.calls)
	}
}

// agentMachine enrolls an ipmi machine with a port and brings it to
// active through fake deploy, so that its rescue runs through the agent.
func (e *env) agentMachine() *config.Machine {
	e.t.Helper()
	_, err := e.run(map[string]any{"OP_ID": "OP_MACHINE_CREATE", "driver": "ipmi", "name": "bm",
		"deploy_interface": "fake", "boot_interface": "fake",
		"driver_info": map[string]any{"ipmi_address": "127.0.0.1", "ipmi_password": "secret-pw"}})
	if err != nil {
		e.t.Fatal(err)
	}
	m := e.machine("bm")
	if _, err := e.run(map[string]any{"OP_ID": "OP_MACHINE_PORT_CREATE", "machine": "bm", "address": "52:54:00:12:34:56"}); err != nil {
		e.t.Fatal(err)
	}
	for _, target := range []string{"manage", "provide", "active"} {
		if _, err := e.run(provision("bm", target)); err != nil {
			e.t.Fatalf("%s: %v", target, err)
		}
	}
	e.expect("bm", "active", "")
	return m
}

// waitState waits for the machine to reach state.
func (e *env) waitState(ident, state string) *config.Machine {
	e.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if m := e.machine(ident); m.ProvisionState == state {
			return m
		}
		time.Sleep(2 * time.Millisecond)
	}
	e.t.Fatalf("machine %s never reached %q (is %q)", ident, state, e.machine(ident).ProvisionState)
	return nil
}

// TestAgentRescue runs a rescue through the agent: the job parks in
// rescue wait holding no lock, the agent's lookup gets the token once,
// its heartbeat wakes the job, which finalizes the rescue with the hash.
func TestAgentRescue(t *testing.T) {
	e := newEnv(t, Timeouts{RescueCallback: time.Minute, DeployCallback: time.Minute, CleanCallback: time.Minute})
	m := e.agentMachine()
	id := e.submit(provision("bm", "rescue", "rescue_password_hash", "$5$salt$hash", "ssh_public_keys", []any{"ssh-ed25519 AAAA k"}))
	e.waitState("bm", "rescue wait")
	if got := e.machine("bm").TargetProvisionState; got != "rescue" {
		t.Fatalf("target in rescue wait: %q", got)
	}
	ctx := context.Background()
	if _, err := e.deps.Lookup(ctx, machinewire.LookupArgs{Addresses: []string{"00:00:00:00:00:01"}}); err == nil {
		t.Fatal("lookup by an unknown MAC answered")
	}
	r, err := e.deps.Lookup(ctx, machinewire.LookupArgs{Addresses: []string{"52:54:00:12:34:56"}})
	if err != nil || len(r.Token) != 64 {
		t.Fatalf("first lookup: %v %+v", err, r)
	}
	r2, err := e.deps.Lookup(ctx, machinewire.LookupArgs{UUID: m.UUID})
	if err != nil || r2.Token != maskedToken {
		t.Fatalf("second lookup gave the token again: %v %q", err, r2.Token)
	}
	if err := e.deps.Heartbeat(ctx, machinewire.HeartbeatArgs{Machine: "bm", CallbackURL: "http://x:9999", Token: "wrong"}); err == nil {
		t.Fatal("heartbeat with a wrong token accepted")
	}
	if err := e.deps.Heartbeat(ctx, machinewire.HeartbeatArgs{Machine: "bm", CallbackURL: "http://x:9999", Token: r.Token}); err != nil {
		t.Fatal(err)
	}
	if err := e.wait(id); err != nil {
		t.Fatal(err)
	}
	e.expect("bm", "rescue", "")
	if len(e.node.commands) != 1 {
		t.Fatalf("agent commands %+v", e.node.commands)
	}
	c := e.node.commands[0]
	if c.Name != "rescue.finalize_rescue" || c.Params["rescue_password"] != "$5$salt$hash" || c.URL != "http://x:9999" || c.Token != r.Token {
		t.Fatalf("finalize_rescue call %+v", c)
	}
	if rec, _, _ := e.cfg.AgentRecord(ctx, m.UUID); rec != nil {
		t.Fatal("the agent record outlived the rescue")
	}
	if _, ok := e.machine("bm").InstanceInfo[keyRescueHash]; ok {
		t.Fatal("the password hash outlived the rescue")
	}
	if _, err := e.run(provision("bm", "unrescue")); err != nil {
		t.Fatal(err)
	}
	e.expect("bm", "active", "")
	if p := e.node.power; p != "power on" {
		t.Fatalf("after unrescue the machine is %q", p)
	}
}

// TestAgentNeverCallsBack fails a rescue whose agent never heartbeats,
// after the callback timeout, with the password removed; and an abort
// ends a parked rescue at once.
func TestAgentNeverCallsBack(t *testing.T) {
	e := newEnv(t, Timeouts{RescueCallback: 1500 * time.Millisecond, DeployCallback: time.Minute, CleanCallback: time.Minute})
	e.agentMachine()
	_, err := e.run(provision("bm", "rescue", "rescue_password_hash", "$5$salt$hash"))
	if err == nil || !strings.Contains(err.Error(), "Timeout reached while waiting for callback") {
		t.Fatalf("rescue without an agent: %v", err)
	}
	m := e.machine("bm")
	if m.ProvisionState != "rescue failed" || m.TargetProvisionState != "rescue" || m.Reservation != "" || m.LastError == "" {
		t.Fatalf("after the timeout: %q -> %q reserved %q error %q", m.ProvisionState, m.TargetProvisionState, m.Reservation, m.LastError)
	}
	if _, ok := m.InstanceInfo[keyRescueHash]; ok {
		t.Fatal("the password hash outlived the failed rescue")
	}
	id := e.submit(provision("bm", "rescue", "rescue_password_hash", "$5$salt$hash2"))
	e.waitState("bm", "rescue wait")
	if _, err := e.run(provision("bm", "abort")); err != nil {
		t.Fatalf("abort: %v", err)
	}
	if err := e.wait(id); err == nil {
		t.Fatal("the aborted rescue's job succeeded")
	}
	e.expect("bm", "rescue failed", "rescue")
	if _, ok := e.machine("bm").InstanceInfo[keyRescueHash]; ok {
		t.Fatal("the password hash outlived the abort")
	}

	// A cancel of the parked job (rather than an abort) also ends the
	// rescue as failed and gives the machine back: nothing stays reserved.
	id = e.submit(provision("bm", "rescue", "rescue_password_hash", "$5$salt$hash3"))
	e.waitState("bm", "rescue wait")
	if ok, msg, err := e.q.Cancel(context.Background(), id, false); !ok || err != nil {
		t.Fatalf("cancel: %v %q %v", ok, msg, err)
	}
	if err := e.wait(id); err == nil {
		t.Fatal("the canceled rescue's job succeeded")
	}
	m = e.machine("bm")
	if m.ProvisionState != "rescue failed" || m.Reservation != "" || m.LastError != "the job was canceled" {
		t.Fatalf("after the cancel: %q -> %q reserved %q error %q", m.ProvisionState, m.TargetProvisionState, m.Reservation, m.LastError)
	}
	if _, ok := m.InstanceInfo[keyRescueHash]; ok {
		t.Fatal("the password hash outlived the cancel")
	}
}

// TestPowerSyncRecordsDrift changes a machine's power behind Corral's
// back: the sync records the BMC's state and a PowerInSync condition that
// says it drifted, and skips reserved and maintenance machines.
func TestPowerSyncRecordsDrift(t *testing.T) {
	e := newEnv(t, Timeouts{RescueCallback: time.Minute, DeployCallback: time.Minute, CleanCallback: time.Minute})
	m := e.agentMachine()
	if _, err := e.run(map[string]any{"OP_ID": "OP_MACHINE_POWER", "machine": "bm", "target": "power on"}); err != nil {
		t.Fatal(err)
	}
	e.node.mu.Lock()
	e.node.power = "power off" // someone pressed the button
	e.node.mu.Unlock()
	if _, err := e.run(map[string]any{"OP_ID": "OP_MACHINE_POWER_SYNC", "machines": []any{m.UUID}}); err != nil {
		t.Fatal(err)
	}
	if ps := e.machine("bm").PowerState; ps != "power off" {
		t.Fatalf("power state after the sync: %q", ps)
	}
	st := e.cfg.MachineStatus(m.UUID)
	c, ok := st.Condition(CondPowerInSync)
	if !ok || c.Status != "False" || c.Reason != "PowerStateDrifted" || !strings.Contains(c.Message, `"power on"`) {
		t.Fatalf("condition %+v (status %+v)", c, st)
	}
	if _, err := e.run(map[string]any{"OP_ID": "OP_MACHINE_MAINTENANCE", "machine": "bm", "maintenance": true}); err != nil {
		t.Fatal(err)
	}
	if got := SyncCandidates(e.cfg.Machines()); len(got) != 0 {
		t.Fatalf("a machine in maintenance is synced: %v", got)
	}
}
