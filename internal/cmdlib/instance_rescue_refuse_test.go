package cmdlib

import (
	"errors"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/corral/corral/internal/config"
	"github.com/corral/corral/internal/nodeapi"
)

// rescuedEnv is a cluster whose instance i1 runs and is then rescued.
func rescuedEnv(t *testing.T) (*env, *config.Instance) {
	t.Helper()
	node := newNodeDouble()
	node.replies = map[string]any{nodeapi.InstanceRescuePrepare: nodeapi.InstanceRescuePrepareReply{
		KernelPath: "/ramdisk/vmlinuz", InitrdPath: "/state/instance-rescue/u.initrd"}}
	e := openEnv(t, filepath.Join(t.TempDir(), "s.db"), node, true)
	t.Cleanup(e.close)
	if st, res := e.run(t, create("i1", nil)); st != "success" {
		t.Fatalf("create: %s %v", st, res)
	}
	if st, res := e.run(t, map[string]any{"OP_ID": "OP_INSTANCE_STARTUP", "instance_name": "i1"}); st != "success" {
		t.Fatalf("startup: %s %v", st, res)
	}
	if st, res := e.run(t, rescueOp("i1")); st != "success" {
		t.Fatalf("rescue: %s %v", st, res)
	}
	inst, _ := e.cfg.Instance("i1")
	return e, inst
}

func rescueOp(name string) map[string]any {
	return map[string]any{"OP_ID": "OP_INSTANCE_RESCUE", "instance_name": name, "rescue_password_hash": testRescueHash}
}

// opsThatWouldEndARescue are the ops refused while an instance is in
// rescue, each with what the refusal names.
func opsThatWouldEndARescue(name string) []struct {
	op   map[string]any
	what string
} {
	return []struct {
		op   map[string]any
		what string
	}{
		{map[string]any{"OP_ID": "OP_INSTANCE_STARTUP", "instance_name": name}, "cannot start it"},
		{map[string]any{"OP_ID": "OP_INSTANCE_REBOOT", "instance_name": name, "reboot_type": "soft"}, "cannot reboot it"},
		{map[string]any{"OP_ID": "OP_INSTANCE_REBOOT", "instance_name": name, "reboot_type": "full"}, "cannot reboot it"},
		{map[string]any{"OP_ID": "OP_INSTANCE_REINSTALL", "instance_name": name}, "cannot reinstall it"},
		{map[string]any{"OP_ID": "OP_INSTANCE_SET_PARAMS", "instance_name": name, "hvparams": map[string]any{"migration_downtime": "40"}},
			"cannot change its hypervisor parameters"},
		{map[string]any{"OP_ID": "OP_BACKUP_EXPORT", "instance_name": name, "mode": "local", "target_node": "n1", "shutdown": true},
			"cannot export it"},
	}
}

// TestInstanceRescueRefusesWhatWouldEndIt: while an instance is in rescue,
// a start, a reboot of any kind, a reinstall, new hypervisor parameters,
// an export and a second rescue are refused with ECODE_STATE and "unrescue
// it first", reaching no node beyond the running check and changing
// nothing; other parameters can change. After unrescue the same ops work.
func TestInstanceRescueRefusesWhatWouldEndIt(t *testing.T) {
	e, inst := rescuedEnv(t)
	before := e.cfg.InstanceStatus(inst.UUID)
	cases := append(opsThatWouldEndARescue("i1"), struct {
		op   map[string]any
		what string
	}{rescueOp("i1"), "is in state rescue"})
	for _, c := range cases {
		e.node.mu.Lock()
		e.node.calls = nil
		e.node.mu.Unlock()
		st, res := e.run(t, c.op)
		msg := fmtResult(res)
		if st != "error" || !strings.Contains(msg, "wrong_state") || !strings.Contains(msg, "unrescue it first") || !strings.Contains(msg, c.what) {
			t.Errorf("%v in rescue: %s %s", c.op, st, msg)
		}
		for _, m := range rescueTestMethods(e.node) {
			if m != nodeapi.InstanceList {
				t.Errorf("%v in rescue reached the node with %s", c.op["OP_ID"], m)
			}
		}
	}
	after, _ := e.cfg.Instance("i1")
	if after.HVParams["kernel_path"] != nil || after.Serial != inst.Serial {
		t.Fatalf("a refused op changed the instance: %v, serial %d -> %d", after.HVParams, inst.Serial, after.Serial)
	}
	if s := e.cfg.InstanceStatus(inst.UUID); s.State != before.State || !InRescue(s) {
		t.Fatalf("a refused op changed the status: %+v", s)
	}
	// Not every change is refused: the back-end parameters apply at the
	// next start of its own system.
	if st, res := e.run(t, map[string]any{"OP_ID": "OP_INSTANCE_SET_PARAMS", "instance_name": "i1", "beparams": map[string]any{"vcpus": 2}}); st != "success" {
		t.Fatalf("beparams in rescue: %s %v", st, res)
	}

	if st, res := e.run(t, map[string]any{"OP_ID": "OP_INSTANCE_UNRESCUE", "instance_name": "i1"}); st != "success" {
		t.Fatalf("unrescue: %s %v", st, res)
	}
	for _, op := range []map[string]any{
		{"OP_ID": "OP_INSTANCE_REBOOT", "instance_name": "i1", "reboot_type": "soft"},
		{"OP_ID": "OP_INSTANCE_SET_PARAMS", "instance_name": "i1", "hvparams": map[string]any{"migration_downtime": "40"}},
		{"OP_ID": "OP_INSTANCE_SHUTDOWN", "instance_name": "i1"},
		{"OP_ID": "OP_INSTANCE_REINSTALL", "instance_name": "i1"},
		{"OP_ID": "OP_INSTANCE_STARTUP", "instance_name": "i1"},
	} {
		if st, res := e.run(t, op); st != "success" {
			t.Fatalf("%v after unrescue: %s %v", op["OP_ID"], st, res)
		}
	}
}

// TestInstanceRescueShutdownThenUnrescue: a rescued instance can be shut
// down; it stays in rescue (the watcher leaves it alone, a start is still
// refused), and unrescue starts its own system.
func TestInstanceRescueShutdownThenUnrescue(t *testing.T) {
	e, inst := rescuedEnv(t)
	if st, res := e.run(t, map[string]any{"OP_ID": "OP_INSTANCE_SHUTDOWN", "instance_name": "i1"}); st != "success" {
		t.Fatalf("shutdown in rescue: %s %v", st, res)
	}
	if after, _ := e.cfg.Instance("i1"); after.AdminState != config.AdminDown || e.node.isRunning(inst.UUID) {
		t.Fatalf("after shutdown: admin state %s, running %v", after.AdminState, e.node.isRunning(inst.UUID))
	}
	if !InRescue(e.cfg.InstanceStatus(inst.UUID)) {
		t.Fatal("the shutdown ended the rescue in the status")
	}
	if st, res := e.run(t, map[string]any{"OP_ID": "OP_INSTANCE_STARTUP", "instance_name": "i1"}); st != "error" || !strings.Contains(fmtResult(res), "unrescue it first") {
		t.Fatalf("startup of a rescued instance that was shut down: %s %v", st, res)
	}
	e.node.mu.Lock()
	e.node.calls = nil
	e.node.mu.Unlock()
	if st, res := e.run(t, map[string]any{"OP_ID": "OP_INSTANCE_UNRESCUE", "instance_name": "i1"}); st != "success" {
		t.Fatalf("unrescue after shutdown: %s %v", st, res)
	}
	// Nothing to stop: the list, the clean-up and its own system's start.
	if got := strings.Join(rescueTestMethods(e.node), ","); got != "instance_list,instance_rescue_cleanup,instance_start" {
		t.Fatalf("unrescue calls %s", got)
	}
	after, _ := e.cfg.Instance("i1")
	if after.AdminState != config.AdminUp || !e.node.isRunning(inst.UUID) || InRescue(e.cfg.InstanceStatus(inst.UUID)) {
		t.Fatalf("after unrescue: admin state %s, running %v, status %+v", after.AdminState, e.node.isRunning(inst.UUID), e.cfg.InstanceStatus(inst.UUID))
	}
}

// TestInstanceRescueRetriesAFailedRescue: a rescue that failed half-way
// leaves the instance in rescuing, where a start is refused like in
// rescue; a second rescue is what may finish it, and unrescue what ends
// it. In unrescuing (an unrescue that failed) a rescue is refused.
func TestInstanceRescueRetriesAFailedRescue(t *testing.T) {
	node := newNodeDouble()
	node.replies = map[string]any{nodeapi.InstanceRescuePrepare: nodeapi.InstanceRescuePrepareReply{
		KernelPath: "/ramdisk/vmlinuz", InitrdPath: "/state/instance-rescue/u.initrd"}}
	node.fail = map[string]error{nodeapi.InstanceRescuePrepare: errors.New("node n1 has no rescue ramdisk")}
	e := openEnv(t, filepath.Join(t.TempDir(), "s.db"), node, true)
	defer e.close()
	if st, res := e.run(t, create("i1", map[string]any{"start": true})); st != "success" {
		t.Fatalf("create: %s %v", st, res)
	}
	inst, _ := e.cfg.Instance("i1")
	if st, res := e.run(t, rescueOp("i1")); st != "error" || !strings.Contains(fmtResult(res), "no rescue ramdisk") {
		t.Fatalf("rescue without a ramdisk: %s %v", st, res)
	}
	if s := e.cfg.InstanceStatus(inst.UUID); !InRescue(s) || s.State != StateRescuing {
		t.Fatalf("status after a failed rescue %+v", s)
	}
	if st, res := e.run(t, map[string]any{"OP_ID": "OP_INSTANCE_STARTUP", "instance_name": "i1"}); st != "error" ||
		!strings.Contains(fmtResult(res), "is in rescue (state rescuing), cannot start it: unrescue it first") {
		t.Fatalf("startup in rescuing: %s %v", st, res)
	}
	node.mu.Lock()
	node.fail = nil
	node.mu.Unlock()
	if st, res := e.run(t, rescueOp("i1")); st != "success" {
		t.Fatalf("second rescue after a failed one: %s %v", st, res)
	}
	if s := e.cfg.InstanceStatus(inst.UUID); s.State != StateRescue {
		t.Fatalf("status after the second rescue %+v", s)
	}

	node.mu.Lock()
	node.fail = map[string]error{nodeapi.InstanceRescueCleanup: errors.New("read-only file system")}
	node.mu.Unlock()
	if st, res := e.run(t, map[string]any{"OP_ID": "OP_INSTANCE_UNRESCUE", "instance_name": "i1"}); st != "error" {
		t.Fatalf("unrescue with a failing clean-up: %s %v", st, res)
	}
	if s := e.cfg.InstanceStatus(inst.UUID); s.State != StateUnrescuing {
		t.Fatalf("status after a failed unrescue %+v", s)
	}
	if st, res := e.run(t, rescueOp("i1")); st != "error" || !strings.Contains(fmtResult(res), "unrescue it first") {
		t.Fatalf("rescue in unrescuing: %s %v", st, res)
	}
}

// TestInstanceRemoveDropsTheRescueInitrd: removing a rescued instance
// removes its rescue initrd (it holds the password's hash) from its node;
// removing an instance that is not in rescue asks the node for nothing of
// the sort.
func TestInstanceRemoveDropsTheRescueInitrd(t *testing.T) {
	e, inst := rescuedEnv(t)
	var mu sync.Mutex
	var cleaned []string
	e.node.mu.Lock()
	e.node.withArgs = func(method string, args any) {
		if a, ok := args.(nodeapi.InstanceRescueCleanupArgs); ok {
			mu.Lock()
			cleaned = append(cleaned, a.InstanceUUID)
			mu.Unlock()
		}
	}
	e.node.mu.Unlock()
	cleanups := func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), cleaned...)
	}
	if st, res := e.run(t, map[string]any{"OP_ID": "OP_INSTANCE_REMOVE", "instance_name": "i1"}); st != "success" {
		t.Fatalf("remove in rescue: %s %v", st, res)
	}
	if c := cleanups(); len(c) != 1 || c[0] != inst.UUID {
		t.Fatalf("rescue clean-ups %v, want one for %s", c, inst.UUID)
	}
	if st, res := e.run(t, create("i2", nil)); st != "success" {
		t.Fatalf("create: %s %v", st, res)
	}
	if st, res := e.run(t, map[string]any{"OP_ID": "OP_INSTANCE_REMOVE", "instance_name": "i2"}); st != "success" {
		t.Fatalf("remove: %s %v", st, res)
	}
	if c := cleanups(); len(c) != 1 {
		t.Fatalf("removing an instance not in rescue cleaned up a rescue: %v", c)
	}
}

func (n *nodeDouble) isRunning(uuid string) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.running[uuid]
}
