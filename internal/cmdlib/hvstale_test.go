package cmdlib

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
)

// TestStaleHVParamCanBeReset: a fake instance holding a kvm parameter (set
// when the fake hypervisor shared kvm's table) cannot set it again, but can
// reset it to the default, which removes it.
func TestStaleHVParamCanBeReset(t *testing.T) {
	e := openEnv(t, filepath.Join(t.TempDir(), "s.db"), newNodeDouble(), true)
	defer e.close()
	if st, res := e.run(t, create("old1", map[string]any{"start": false})); st != "success" {
		t.Fatalf("create: %s %v", st, res)
	}
	i, _ := e.cfg.Instance("old1")
	i = i.Clone()
	i.HVParams = map[string]any{"kernel_path": "/boot/old"}
	tx := e.cfg.Begin()
	tx.PutInstance(i)
	if err := e.cfg.Commit(context.Background(), tx); err != nil {
		t.Fatal(err)
	}
	st, res := e.run(t, map[string]any{"OP_ID": "OP_INSTANCE_SET_PARAMS", "instance_name": "old1", "hvparams": map[string]any{"kernel_path": "/boot/new"}})
	if b, _ := json.Marshal(res); st != "error" || !strings.Contains(string(b), "Unknown hypervisor parameter 'kernel_path' for fake") {
		t.Fatalf("setting a kvm parameter on a fake instance: %s %s", st, b)
	}
	if st, res := e.run(t, map[string]any{"OP_ID": "OP_INSTANCE_SET_PARAMS", "instance_name": "old1", "hvparams": map[string]any{"kernel_path": "default"}}); st != "success" {
		t.Fatalf("resetting the stale parameter: %s %v", st, res)
	}
	if i, _ := e.cfg.Instance("old1"); len(i.HVParams) != 0 {
		t.Fatalf("after the reset the instance holds %v", i.HVParams)
	}
	st, res = e.run(t, map[string]any{"OP_ID": "OP_INSTANCE_SET_PARAMS", "instance_name": "old1", "hvparams": map[string]any{"kernel_path": "default"}})
	if b, _ := json.Marshal(res); st != "error" || !strings.Contains(string(b), "Unknown hypervisor parameter") {
		t.Fatalf("resetting a parameter neither known nor held: %s %s", st, b)
	}
}
