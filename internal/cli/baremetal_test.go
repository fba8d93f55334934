package cli

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/corral/corral/internal/config"
	"github.com/corral/corral/internal/cryptpw"
	"github.com/corral/corral/internal/ecode"
)

// fakeMachines is an in-memory corrald for the machine methods: submitted
// provision actions move the machine to a transient state with its
// target, and the path to the stable state is walked one step per query.
type fakeMachines struct {
	mu       sync.Mutex
	machines map[string]*config.Machine
	// after are the states a machine still passes through, one per query.
	after map[string][]string
	ops   []map[string]any
	ports []*config.MachinePort
}

// walks are what each target goes through in this fake: transient states
// with the target shown, then the stable state.
var walks = map[string][]string{
	"manage": {"verifying", "manageable"}, "provide": {"cleaning", "available"}, "active": {"deploying", "wait call-back", "active"},
	"rescue": {"rescuing", "rescue wait", "rescue"}, "unrescue": {"unrescuing", "active"}, "deleted": {"deleting", "cleaning", "available"},
}

var walkTargets = map[string]string{"manage": "manageable", "provide": "available", "active": "active", "rescue": "rescue", "unrescue": "active", "deleted": "available"}

func bmFake(t *testing.T) (*fakeMaster, *fakeMachines) {
	f := newFake(t)
	fm := &fakeMachines{machines: map[string]*config.Machine{}, after: map[string][]string{}}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.handle["MachineQuery"] = func(_ context.Context, args []any) (any, error) {
		fm.mu.Lock()
		defer fm.mu.Unlock()
		names, _ := argAt(args, 0).([]any)
		var out []any
		for _, n := range names {
			m := fm.find(n.(string))
			if m == nil {
				return nil, ecode.Errorf(ecode.NoEnt, "Node %s could not be found.", n)
			}
			shown := *m
			out = append(out, map[string]any{"machine": &shown})
			if rest := fm.after[m.UUID]; len(rest) > 0 {
				m.ProvisionState, fm.after[m.UUID] = rest[0], rest[1:]
				switch m.ProvisionState {
				case "manageable", "available", "active", "rescue":
					m.TargetProvisionState = ""
				case "deploy failed":
					m.LastError = "image checksum mismatch"
				}
			}
		}
		if len(names) == 0 {
			for _, m := range fm.machines {
				out = append(out, map[string]any{"machine": m})
			}
		}
		return out, nil
	}
	f.handle["MachineSubmit"] = func(_ context.Context, args []any) (any, error) {
		fm.mu.Lock()
		defer fm.mu.Unlock()
		op := argAt(args, 0).(map[string]any)
		fm.ops = append(fm.ops, op)
		return map[string]any{"job_id": len(fm.ops)}, fm.apply(op)
	}
	f.handle["MachinePortQuery"] = func(_ context.Context, args []any) (any, error) {
		fm.mu.Lock()
		defer fm.mu.Unlock()
		return fm.ports, nil
	}
	return f, fm
}

func (fm *fakeMachines) opsNow() []map[string]any {
	fm.mu.Lock()
	defer fm.mu.Unlock()
	return append([]map[string]any(nil), fm.ops...)
}

func (fm *fakeMachines) state(uuid string) string {
	fm.mu.Lock()
	defer fm.mu.Unlock()
	return fm.machines[uuid].ProvisionState
}

func (fm *fakeMachines) locked(f func()) {
	fm.mu.Lock()
	defer fm.mu.Unlock()
	f()
}

func (fm *fakeMachines) find(n string) *config.Machine {
	for _, m := range fm.machines {
		if m.UUID == n || m.Name == n {
			return m
		}
	}
	return nil
}

func (fm *fakeMachines) apply(op map[string]any) error {
	if op["OP_ID"] == "OP_MACHINE_CREATE" {
		m := &config.Machine{Driver: op["driver"].(string), ProvisionState: "enroll"}
		m.UUID, _ = op["uuid"].(string)
		m.Name, _ = op["name"].(string)
		m.DriverInfo, _ = op["driver_info"].(map[string]any)
		m.Serial = 1
		fm.machines[m.UUID] = m
		return nil
	}
	if op["OP_ID"] == "OP_MACHINE_PORT_CREATE" {
		fm.ports = append(fm.ports, &config.MachinePort{Meta: config.Meta{UUID: op["uuid"].(string)}, Address: op["address"].(string)})
		return nil
	}
	m := fm.find(op["machine"].(string))
	if m == nil {
		return ecode.Errorf(ecode.NoEnt, "Node %s could not be found.", op["machine"])
	}
	switch op["OP_ID"] {
	case "OP_MACHINE_PROVISION":
		target := op["target"].(string)
		walk := walks[target]
		if walk == nil {
			return ecode.Errorf(ecode.Inval, "The requested action %q can not be performed on node %q while it is in state %q.", target, m.UUID, m.ProvisionState)
		}
		if m.Name == "failing" {
			walk = []string{"deploying", "deploy failed"}
		}
		m.ProvisionState, m.TargetProvisionState = walk[0], walkTargets[target]
		fm.after[m.UUID] = walk[1:]
	case "OP_MACHINE_MODIFY":
		for k, v := range op["changes"].(map[string]any) {
			if k == "driver_info" {
				m.DriverInfo = v.(map[string]any)
			}
		}
	}
	return nil
}

func TestBaremetalCreateShowMasksSecrets(t *testing.T) {
	f, fm := bmFake(t)
	r := f.run(t, "baremetal", "node", "create", "--driver", "ipmi", "--name", "bm1",
		"--driver-info", "ipmi_address=10.0.0.5", "--driver-info", "ipmi_password=IPMISECRET", "-o", "json")
	if r.code != 0 {
		t.Fatalf("create: %d %s", r.code, r.stderr)
	}
	op := fm.opsNow()[0]
	if op["driver"] != "ipmi" || op["name"] != "bm1" || op["uuid"] == "" ||
		!sameJSON(t, op["driver_info"], `{"ipmi_address": "10.0.0.5", "ipmi_password": "IPMISECRET"}`) {
		t.Fatalf("create op: %v", op)
	}
	var shown map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &shown); err != nil {
		t.Fatalf("create -o json: %v\n%s", err, r.stdout)
	}
	if shown["provision_state"] != "enroll" || shown["target_provision_state"] != nil || strings.Contains(r.stdout, "IPMISECRET") ||
		!sameJSON(t, shown["driver_info"], `{"ipmi_address": "10.0.0.5", "ipmi_password": "******"}`) {
		t.Fatalf("create output: %s", r.stdout)
	}
	r = f.run(t, "baremetal", "node", "show", "bm1")
	if r.code != 0 || strings.Contains(r.stdout, "IPMISECRET") || !strings.Contains(r.stdout, `"ipmi_password":"******"`) ||
		!strings.Contains(r.stdout, "provision_state") {
		t.Fatalf("show: %d %s %s", r.code, r.stdout, r.stderr)
	}
	// set merges into the dict; unset removes one key.
	if r = f.run(t, "baremetal", "node", "set", "bm1", "--driver-info", "ipmi_address=10.0.0.7"); r.code != 0 {
		t.Fatalf("set: %s", r.stderr)
	}
	if op := fm.opsNow()[len(fm.opsNow())-1]; op["serial"] != 1.0 || !sameJSON(t, op["changes"], `{"driver_info": {"ipmi_address": "10.0.0.7", "ipmi_password": "IPMISECRET"}}`) {
		t.Fatalf("set op: %v", op)
	}
	if r = f.run(t, "baremetal", "node", "unset", "bm1", "--driver-info", "ipmi_password"); r.code != 0 {
		t.Fatalf("unset: %s", r.stderr)
	}
	if op := fm.opsNow()[len(fm.opsNow())-1]; !sameJSON(t, op["changes"], `{"driver_info": {"ipmi_address": "10.0.0.7"}}`) {
		t.Fatalf("unset op: %v", op)
	}
	if r = f.run(t, "baremetal", "node", "unset", "bm1", "--driver-info", "nope"); r.code != 2 {
		t.Fatalf("unset of a missing key: %d %s", r.code, r.stderr)
	}
	if r = f.run(t, "baremetal", "node", "create", "--name", "x"); r.code != 2 || !strings.Contains(r.stderr, "--driver is required") {
		t.Fatalf("create without driver: %d %s", r.code, r.stderr)
	}
}

func TestBaremetalListTableAndJSON(t *testing.T) {
	f, fm := bmFake(t)
	fm.locked(func() {
		fm.machines["u1"] = &config.Machine{Meta: config.Meta{UUID: "u1", Name: "bm1"}, Driver: "fake-hardware", ProvisionState: "available"}
	})
	fm.locked(func() {
		fm.machines["u2"] = &config.Machine{Meta: config.Meta{UUID: "u2"}, Driver: "fake-hardware", ProvisionState: "enroll", Maintenance: true}
	})
	r := f.run(t, "baremetal", "node", "list")
	want := "UUID Name Instance UUID Power State Provisioning State Maintenance\n" +
		"u1   bm1  -             -           available          N\n" +
		"u2   -    -             -           enroll             Y\n"
	if r.code != 0 || r.stdout != want {
		t.Fatalf("list:\n%q\nwant\n%q", r.stdout, want)
	}
	r = f.run(t, "baremetal", "node", "list", "--provision-state", "enroll", "-o", "json")
	var objs []map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &objs); err != nil || len(objs) != 1 || objs[0]["uuid"] != "u2" ||
		objs[0]["maintenance"] != true || len(objs[0]) != len(bmListDefaults) {
		t.Fatalf("list -o json: %v %s", err, r.stdout)
	}
	r = f.run(t, "baremetal", "node", "list", "--no-headers", "--separator", "|", "-o", "name,driver")
	if r.stdout != "bm1|fake-hardware\n-|fake-hardware\n" {
		t.Fatalf("list -o fields: %q", r.stdout)
	}
}

func TestBaremetalWaitFollowsToStableState(t *testing.T) {
	f, fm := bmFake(t)
	fm.locked(func() {
		fm.machines["u1"] = &config.Machine{Meta: config.Meta{UUID: "u1", Name: "bm1"}, Driver: "fake-hardware", ProvisionState: "available"}
	})
	tweak := func(e *Env) { e.bmPoll = time.Millisecond }
	r := f.runEnv(t, tweak, "baremetal", "node", "deploy", "bm1", "--wait")
	want := "bm1: active accepted (job 1)\nbm1: deploying (target active)\nbm1: wait call-back (target active)\nbm1: active\n"
	if r.code != 0 || r.stdout != want {
		t.Fatalf("deploy --wait: %d %q %s", r.code, r.stdout, r.stderr)
	}
	// Without --wait, the command returns at acceptance.
	fm.locked(func() { fm.machines["u1"].ProvisionState = "active" })
	r = f.runEnv(t, tweak, "baremetal", "node", "undeploy", "bm1")
	if r.code != 0 || r.stdout != "bm1: deleted accepted (job 2)\n" || fm.state("u1") != "deleting" {
		t.Fatalf("undeploy: %d %q", r.code, r.stdout)
	}
	// A failure state ends the wait with an error; so does a stable state
	// other than the one waited for.
	fm.locked(func() { fm.machines["u1"].ProvisionState = "available" })
	fm.locked(func() {
		fm.machines["u2"] = &config.Machine{Meta: config.Meta{UUID: "u2", Name: "failing"}, Driver: "fake-hardware", ProvisionState: "available"}
	})
	r = f.runEnv(t, tweak, "baremetal", "node", "deploy", "failing", "--wait", "60")
	if r.code == 0 || !strings.Contains(r.stdout, "failing: deploy failed (target active)\n") ||
		!strings.Contains(r.stderr, "Node u2 failed to reach state active. It's in state deploy failed. Last error: image checksum mismatch") {
		t.Fatalf("deploy of a failing machine: %d %q %s", r.code, r.stdout, r.stderr)
	}
	if err := provisionOutcome(&config.Machine{Meta: config.Meta{UUID: "u1"}, ProvisionState: "deploy failed", TargetProvisionState: "active", LastError: "boom"}, "active"); err == nil ||
		!strings.Contains(err.Error(), "failed to reach state active. It's in state deploy failed. Last error: boom") {
		t.Fatalf("failed state: %v", err)
	}
	if err := provisionOutcome(&config.Machine{Meta: config.Meta{UUID: "u1"}, ProvisionState: "available"}, "active"); err == nil ||
		!strings.Contains(err.Error(), "unexpected stable state available") {
		t.Fatalf("unexpected stable state: %v", err)
	}
	if err := provisionOutcome(&config.Machine{ProvisionState: "cleaning", TargetProvisionState: "available"}, "available"); err != nil {
		t.Fatalf("transient state: %v", err)
	}
	// An invalid transition is the op's error, with exit status 2 (Inval).
	r = f.runEnv(t, tweak, "baremetal", "node", "inspect", "bm1", "--wait", "5")
	if r.code != 2 || !strings.Contains(r.stderr, `can not be performed on node "u1"`) {
		t.Fatalf("invalid transition: %d %s", r.code, r.stderr)
	}
}

func TestBaremetalRescueHashesThePassword(t *testing.T) {
	f, fm := bmFake(t)
	fm.locked(func() {
		fm.machines["u1"] = &config.Machine{Meta: config.Meta{UUID: "u1", Name: "bm1"}, Driver: "fake-hardware", ProvisionState: "active"}
	})
	dir := t.TempDir()
	keys := filepath.Join(dir, "keys.pub")
	os.WriteFile(keys, []byte("# mine\nssh-ed25519 AAAAC3Nza k1@host\n\nssh-rsa AAAAB3Nza k2@host\n"), 0o600)
	const clear = "Cl3ar-rescue"
	r := f.run(t, "baremetal", "node", "rescue", "bm1", "--rescue-password", clear, "--hash", "sha512", "--ssh-public-key", keys)
	if r.code != 0 {
		t.Fatalf("rescue: %d %s", r.code, r.stderr)
	}
	op := fm.opsNow()[0]
	raw, _ := json.Marshal(op)
	hash, _ := op["rescue_password_hash"].(string)
	if strings.Contains(string(raw), clear) || !strings.HasPrefix(hash, "$6$") || !cryptpw.Verify(hash, clear) ||
		!sameJSON(t, op["ssh_public_keys"], `["ssh-ed25519 AAAAC3Nza k1@host", "ssh-rsa AAAAB3Nza k2@host"]`) {
		t.Fatalf("rescue op: %s", raw)
	}
	// From a file (first line), default sha256.
	pwFile := filepath.Join(dir, "pw")
	os.WriteFile(pwFile, []byte(clear+"\nignored\n"), 0o600)
	fm.locked(func() { fm.machines["u1"].ProvisionState = "active" })
	if r = f.run(t, "baremetal", "node", "rescue", "bm1", "--rescue-password-file", pwFile); r.code != 0 {
		t.Fatalf("rescue from file: %s", r.stderr)
	}
	if h := fm.opsNow()[1]["rescue_password_hash"].(string); !strings.HasPrefix(h, "$5$") || !cryptpw.Verify(h, clear) {
		t.Fatalf("hash from file: %s", h)
	}
	// From standard input.
	fm.locked(func() { fm.machines["u1"].ProvisionState = "active" })
	r = f.runEnv(t, func(e *Env) { e.Stdin = strings.NewReader(clear + "\n") }, "baremetal", "node", "rescue", "bm1", "--rescue-password-file", "-")
	if r.code != 0 || !cryptpw.Verify(fm.opsNow()[2]["rescue_password_hash"].(string), clear) {
		t.Fatalf("rescue from stdin: %d %s", r.code, r.stderr)
	}
	n := len(fm.opsNow())
	for _, args := range [][]string{
		{"--rescue-password", " \t"}, // whitespace only
		{},                           // none and no terminal to ask on
		{"--rescue-password", "x", "--hash", "md5"},
		{"--rescue-password", "x", "--rescue-password-file", pwFile},
		{"--rescue-password", "x", "--ssh-public-key", pwFile}, // not a key file
	} {
		r = f.run(t, append([]string{"baremetal", "node", "rescue", "bm1"}, args...)...)
		if r.code != 2 || strings.Contains(r.stderr, clear) {
			t.Errorf("rescue %v: %d %s", args, r.code, r.stderr)
		}
	}
	if len(fm.opsNow()) != n {
		t.Fatalf("a refused rescue reached the master: %v", fm.opsNow()[n:])
	}
}

func TestBaremetalWaitFlagParsing(t *testing.T) {
	f, fm := bmFake(t)
	fm.locked(func() {
		fm.machines["u1"] = &config.Machine{Meta: config.Meta{UUID: "u1", Name: "bm1"}, Driver: "fake-hardware", ProvisionState: "enroll"}
	})
	tweak := func(e *Env) { e.bmPoll = time.Millisecond }
	// --wait SECONDS after the node, and --wait alone before it.
	if r := f.runEnv(t, tweak, "baremetal", "node", "manage", "bm1", "--wait", "30"); r.code != 0 || !strings.HasSuffix(r.stdout, "bm1: manageable\n") {
		t.Fatalf("manage --wait 30: %d %q %s", r.code, r.stdout, r.stderr)
	}
	if r := f.runEnv(t, tweak, "baremetal", "node", "provide", "--wait", "bm1"); r.code != 0 || !strings.HasSuffix(r.stdout, "bm1: available\n") {
		t.Fatalf("provide --wait: %d %q %s", r.code, r.stdout, r.stderr)
	}
	if r := f.run(t, "baremetal", "node", "abort", "bm1", "--wait"); r.code != 2 {
		t.Fatalf("abort takes no --wait: %d", r.code)
	}
	if r := f.run(t, "baremetal", "node", "power", "off", "--soft", "bm1"); r.code != 0 || fm.opsNow()[len(fm.opsNow())-1]["target"] != "soft power off" {
		t.Fatalf("power off --soft: %d %v", r.code, fm.opsNow()[len(fm.opsNow())-1])
	}
	if r := f.run(t, "baremetal", "node", "maintenance", "set", "bm1", "--reason", "disk"); r.code != 0 ||
		!sameJSON(t, fm.opsNow()[len(fm.opsNow())-1], `{"OP_ID": "OP_MACHINE_MAINTENANCE", "machine": "bm1", "maintenance": true, "maintenance_reason": "disk"}`) {
		t.Fatalf("maintenance set: %d %v", r.code, fm.opsNow()[len(fm.opsNow())-1])
	}
	if r := f.run(t, "baremetal", "node", "show", "nope"); r.code != 3 || !strings.Contains(r.stderr, "Node nope could not be found.") {
		t.Fatalf("unknown node: %d %s", r.code, r.stderr)
	}
}
