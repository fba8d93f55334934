package cmdlib

import (
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/corral/corral/internal/config"
	"github.com/corral/corral/internal/hypervisor"
	"github.com/corral/corral/internal/nodeapi"
)

const testRescueHash = "$5$saltsalt$0123456789012345678901234567890123456789012"

// TestInstanceRescueAndUnrescue: rescue stops the running instance, writes
// its rescue initrd and starts it with the node's kernel and initrd for
// that start only; the status says rescue; unrescue stops it, removes the
// initrd and starts it with its own parameters; the status is gone.
func TestInstanceRescueAndUnrescue(t *testing.T) {
	node := newNodeDouble()
	node.replies = map[string]any{nodeapi.InstanceRescuePrepare: nodeapi.InstanceRescuePrepareReply{
		KernelPath: "/ramdisk/vmlinuz", InitrdPath: "/state/instance-rescue/u.initrd"}}
	var mu sync.Mutex
	var starts []nodeapi.InstanceSpec
	var prepared []nodeapi.InstanceRescuePrepareArgs
	e := openEnv(t, filepath.Join(t.TempDir(), "s.db"), node, true)
	defer e.close()
	if st, res := e.run(t, create("i1", nil)); st != "success" {
		t.Fatalf("create: %s %v", st, res)
	}
	inst, _ := e.cfg.Instance("i1")
	if st, res := e.run(t, map[string]any{"OP_ID": "OP_INSTANCE_STARTUP", "instance_name": "i1"}); st != "success" {
		t.Fatalf("startup: %s %v", st, res)
	}
	node.mu.Lock()
	node.calls = nil
	node.withArgs = func(method string, args any) {
		mu.Lock()
		defer mu.Unlock()
		switch a := args.(type) {
		case nodeapi.InstanceArgs:
			if method == nodeapi.InstanceStart {
				starts = append(starts, a.Instance)
			}
		case nodeapi.InstanceRescuePrepareArgs:
			prepared = append(prepared, a)
		}
	}
	node.mu.Unlock()

	st, res := e.run(t, map[string]any{"OP_ID": "OP_INSTANCE_RESCUE", "instance_name": "i1",
		"rescue_password_hash": testRescueHash, "ssh_public_keys": []any{"ssh-ed25519 AAAA k@h"}})
	if st != "success" {
		t.Fatalf("rescue: %s %v", st, res)
	}
	if got := rescueTestMethods(node); strings.Join(got, ",") != "instance_list,instance_shutdown,instance_rescue_prepare,instance_start" {
		t.Fatalf("rescue calls %v", got)
	}
	mu.Lock()
	if len(prepared) != 1 || prepared[0].InstanceUUID != inst.UUID || prepared[0].RescuePasswordHash != testRescueHash ||
		len(prepared[0].SSHPublicKeys) != 1 {
		t.Fatalf("prepare %+v", prepared)
	}
	hv := starts[0].HVParams
	if hv[hypervisor.ParamKernelPath] != "/ramdisk/vmlinuz" || hv[hypervisor.ParamInitrdPath] != "/state/instance-rescue/u.initrd" ||
		hv[hypervisor.ParamKernelArgs] != "corral.rescue=offline" || hv[hypervisor.ParamRootPath] != "" {
		t.Fatalf("rescue start hvparams %v", hv)
	}
	mu.Unlock()
	after, _ := e.cfg.Instance("i1")
	if after.HVParams[hypervisor.ParamKernelPath] != nil || after.AdminState != config.AdminUp {
		t.Fatalf("the instance's configuration changed: %v %s", after.HVParams, after.AdminState)
	}
	s := e.cfg.InstanceStatus(inst.UUID)
	c, ok := s.Condition(CondRescue)
	if !InRescue(s) || s.State != StateRescue || !ok || c.Status != config.ConditionTrue || c.Reason != "Rescued" {
		t.Fatalf("status after rescue %+v", s)
	}
	if strings.Contains(s.State+c.Message+s.LastError, testRescueHash) {
		t.Fatal("the status shows the hash")
	}
	// A second rescue is refused while rescued.
	if st, res := e.run(t, map[string]any{"OP_ID": "OP_INSTANCE_RESCUE", "instance_name": "i1", "rescue_password_hash": testRescueHash}); st != "error" ||
		!strings.Contains(fmtResult(res), "unrescue it first") {
		t.Fatalf("second rescue: %s %v", st, res)
	}

	node.mu.Lock()
	node.calls = nil
	node.mu.Unlock()
	mu.Lock()
	starts = nil
	mu.Unlock()
	if st, res := e.run(t, map[string]any{"OP_ID": "OP_INSTANCE_UNRESCUE", "instance_name": "i1"}); st != "success" {
		t.Fatalf("unrescue: %s %v", st, res)
	}
	if got := rescueTestMethods(node); strings.Join(got, ",") != "instance_list,instance_shutdown,instance_rescue_cleanup,instance_start" {
		t.Fatalf("unrescue calls %v", got)
	}
	mu.Lock()
	if hv := starts[0].HVParams; hv[hypervisor.ParamKernelPath] == "/ramdisk/vmlinuz" || hv[hypervisor.ParamKernelArgs] == "corral.rescue=offline" {
		t.Fatalf("unrescue starts with the rescue's hvparams %v", hv)
	}
	mu.Unlock()
	if s := e.cfg.InstanceStatus(inst.UUID); InRescue(s) || !s.Empty() {
		t.Fatalf("status after unrescue %+v", s)
	}
	if st, res := e.run(t, map[string]any{"OP_ID": "OP_INSTANCE_UNRESCUE", "instance_name": "i1"}); st != "error" ||
		!strings.Contains(fmtResult(res), "not in rescue") {
		t.Fatalf("unrescue of an instance not in rescue: %s %v", st, res)
	}
}

// TestInstanceRescueRefusesAClearPassword: only a crypt hash is accepted.
func TestInstanceRescueRefusesAClearPassword(t *testing.T) {
	e := openEnv(t, filepath.Join(t.TempDir(), "s.db"), newNodeDouble(), true)
	defer e.close()
	if st, res := e.run(t, create("i1", nil)); st != "success" {
		t.Fatalf("create: %s %v", st, res)
	}
	st, res := e.run(t, map[string]any{"OP_ID": "OP_INSTANCE_RESCUE", "instance_name": "i1", "rescue_password_hash": "clear"})
	if st != "error" || !strings.Contains(fmtResult(res), "crypt") {
		t.Fatalf("%s %v", st, res)
	}
	if e.node.count(nodeapi.InstanceRescuePrepare) != 0 {
		t.Fatal("a refused rescue reached the node")
	}
}

// rescueTestMethods lists the methods the node was called with, in order.
func rescueTestMethods(n *nodeDouble) []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	var m []string
	for _, c := range n.calls {
		f := strings.Fields(c)
		m = append(m, f[1])
	}
	return m
}
