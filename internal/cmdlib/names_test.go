package cmdlib

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/corral/corral/internal/ecode"
	"github.com/corral/corral/internal/nodeapi"
)

// TestInstanceNamesIgnoreCase: as in Ganeti and DNS, an instance name
// differing from another only in case is taken (create and rename), and
// ops find an instance by its name in any case.
func TestInstanceNamesIgnoreCase(t *testing.T) {
	e := openEnv(t, filepath.Join(t.TempDir(), "s.db"), newNodeDouble(), true)
	defer e.close()
	for _, n := range []string{"web1", "db1"} {
		if st, res := e.run(t, create(n, nil)); st != "success" {
			t.Fatalf("create %s: %s %v", n, st, res)
		}
	}
	refused := []struct {
		op  map[string]any
		msg string
	}{
		{create("Web1", nil), "Instance 'Web1' is already in the cluster as 'web1'"},
		{create("WEB1", map[string]any{"pnode": "N1"}), "Instance 'WEB1' is already in the cluster as 'web1'"},
		{map[string]any{"OP_ID": "OP_INSTANCE_RENAME", "instance_name": "db1", "new_name": "wEb1"}, "Instance 'wEb1' is already in the cluster as 'web1'"},
	}
	for _, c := range refused {
		st, res := e.run(t, c.op)
		b, _ := json.Marshal(res)
		if st != "error" || !strings.Contains(string(b), string(ecode.Exists)) || !strings.Contains(string(b), c.msg) {
			t.Errorf("%v: got %s %s, want %s error %q", c.op, st, b, ecode.Exists, c.msg)
		}
	}
	if got := len(e.cfg.Instances()); got != 2 {
		t.Fatalf("%d instances, want 2", got)
	}
	if st, res := e.run(t, map[string]any{"OP_ID": "OP_INSTANCE_SHUTDOWN", "instance_name": "WEB1"}); st != "success" {
		t.Fatalf("shutdown WEB1: %s %v", st, res)
	}
	if i, _ := e.cfg.Instance("web1"); i.AdminState != "down" {
		t.Fatalf("web1 is %s after shutting down WEB1", i.AdminState)
	}
	// A rename that only changes case is a rename of the same instance.
	if st, res := e.run(t, map[string]any{"OP_ID": "OP_INSTANCE_RENAME", "instance_name": "WEB1", "new_name": "Web1"}); st != "success" {
		t.Fatalf("rename web1 to Web1: %s %v", st, res)
	}
	if i, ok := e.cfg.Instance("web1"); !ok || i.Name != "Web1" {
		t.Fatalf("after the case-only rename: %v %v", i, ok)
	}
}

// TestInstanceRenameToOwnName: Ganeti allows a rename to the instance's own
// name (burnin's "rename to own name" step) and runs the OS rename script.
func TestInstanceRenameToOwnName(t *testing.T) {
	nd := newNodeDouble()
	e := openEnv(t, filepath.Join(t.TempDir(), "s.db"), nd, true)
	defer e.close()
	if st, res := e.run(t, create("web1", nil)); st != "success" {
		t.Fatalf("create: %s %v", st, res)
	}
	if st, res := e.run(t, map[string]any{"OP_ID": "OP_INSTANCE_SHUTDOWN", "instance_name": "web1"}); st != "success" {
		t.Fatalf("shutdown: %s %v", st, res)
	}
	nd.mu.Lock()
	nd.calls = nil
	nd.mu.Unlock()
	st, res := e.run(t, map[string]any{"OP_ID": "OP_INSTANCE_RENAME", "instance_name": "web1", "new_name": "web1"})
	if st != "success" {
		t.Fatalf("rename web1 to web1: %s %v", st, res)
	}
	if i, ok := e.cfg.Instance("web1"); !ok || i.Name != "web1" {
		t.Fatalf("after the rename to its own name: %v %v", i, ok)
	}
	nd.mu.Lock()
	calls := strings.Join(nd.calls, "\n")
	nd.mu.Unlock()
	if !strings.Contains(calls, nodeapi.OSRename) {
		t.Fatalf("the OS rename script did not run; calls:\n%s", calls)
	}
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
