package cmdlib

import (
	"context"
	"path/filepath"
	"testing"
)

// TestModifyGivesPortlessInstanceAPort: an instance without a network port
// (older kvm instances had none) gets the lowest free one when a modify moves its console to TCP,
// keeps it across later modifies, and frees it on removal.
func TestModifyGivesPortlessInstanceAPort(t *testing.T) {
	e := openEnv(t, filepath.Join(t.TempDir(), "s.db"), newNodeDouble(), true)
	defer e.close()
	mustRun := func(op map[string]any) {
		t.Helper()
		if st, res := e.run(t, op); st != "success" {
			t.Fatalf("%v: %s %v", op, st, res)
		}
	}
	port := func(name string) int {
		t.Helper()
		i, ok := e.cfg.Instance(name)
		if !ok {
			t.Fatalf("instance %s missing", name)
		}
		return i.NetworkPort
	}
	modifyHV := func(name string, hv map[string]any) {
		t.Helper()
		mustRun(map[string]any{"OP_ID": "OP_INSTANCE_SET_PARAMS", "instance_name": name, "hvparams": hv})
	}
	for i, n := range []string{"a", "b", "c"} {
		mustRun(create(n, map[string]any{"pnode": "n1", "nics": []any{}, "hypervisor": "kvm"}))
		if p := port(n); p != 11000+i {
			t.Fatalf("kvm instance %s got port %d at creation, want %d", n, p, 11000+i)
		}
	}
	// As instances made before ports were allocated, they have none.
	tx := e.cfg.Begin()
	for _, n := range []string{"a", "b", "c"} {
		i, _ := e.cfg.Instance(n)
		i = i.Clone()
		i.NetworkPort = 0
		tx.PutInstance(i)
	}
	if err := e.cfg.Commit(context.Background(), tx); err != nil {
		t.Fatal(err)
	}
	modifyHV("a", map[string]any{"kernel_args": "ro"})
	if p := port("a"); p != 0 {
		t.Fatalf("a modify that puts no console on TCP gave port %d", p)
	}
	modifyHV("a", map[string]any{"vnc_bind_address": "127.0.0.1"})
	modifyHV("b", map[string]any{"spice_bind": "127.0.0.1"})
	if pa, pb := port("a"), port("b"); pa != 11000 || pb != 11001 {
		t.Fatalf("ports a=%d b=%d, want 11000 and 11001", pa, pb)
	}
	modifyHV("a", map[string]any{"kernel_args": "rw"})
	if p := port("a"); p != 11000 {
		t.Fatalf("a later modify moved a's port to %d", p)
	}
	mustRun(map[string]any{"OP_ID": "OP_INSTANCE_REMOVE", "instance_name": "a"})
	modifyHV("c", map[string]any{"vnc_bind_address": "0.0.0.0"})
	if p := port("c"); p != 11000 {
		t.Fatalf("c got %d, want the port a freed (11000)", p)
	}
}
