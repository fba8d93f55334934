package cmdlib

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"testing"

	"github.com/corral/corral/internal/config"
	"github.com/corral/corral/internal/ecode"
	"github.com/corral/corral/internal/nodeapi"
)

// oobEnv is a two-node cluster whose node n2 runs on machine bm1; this
// package's engine has no bare-metal units, so bm1's jobs fail.
func oobEnv(t *testing.T) *env {
	t.Helper()
	node := newNodeDouble()
	// The BMC answers that the machine is on, as recorded.
	node.replies = map[string]any{nodeapi.MachinePower: nodeapi.MachinePowerReply{PowerState: "power on"}}
	e := openEnv(t, filepath.Join(t.TempDir(), "s.db"), node, true)
	tx := e.cfg.Begin()
	tx.PutMachine(&config.Machine{Meta: config.Meta{UUID: config.NewUUID(), Name: "bm1"}, PowerState: "power on"})
	if err := e.cfg.Commit(context.Background(), tx); err != nil {
		t.Fatal(err)
	}
	for _, op := range []map[string]any{
		{"OP_ID": "OP_NODE_ADD", "node_name": "n2", "primary_ip": "127.0.0.3"},
		{"OP_ID": "OP_NODE_SET_PARAMS", "node_name": "n2", "ndparams": map[string]any{"machine": "bm1"}},
	} {
		if st, res := e.run(t, op); st != "success" {
			t.Fatalf("%v: %s %v", op["OP_ID"], st, res)
		}
	}
	return e
}

func TestOOBCommandRefusals(t *testing.T) {
	e := oobEnv(t)
	defer e.close()
	for _, tc := range []struct {
		op    map[string]any
		class ecode.Class
		want  string
	}{
		{map[string]any{"command": "power-cycle", "node_names": []any{"n1"}}, ecode.Inval, "Operating on the master node n1 is not allowed for power-cycle; it does not support out-of-band operations"},
		{map[string]any{"command": "power-off", "node_names": []any{"n2"}}, ecode.State, "Cannot power off node n2 because it is not marked offline"},
		{map[string]any{"command": "reboot", "node_names": []any{"n2"}}, ecode.Inval, "Invalid out-of-band command 'reboot'"},
		{map[string]any{"command": "power-on", "node_names": []any{"n9"}}, ecode.NoEnt, "n9"},
	} {
		tc.op["OP_ID"] = "OP_OOB_COMMAND"
		st, res := e.run(t, tc.op)
		checkErr(t, st, res, tc.class, tc.want)
	}
}

// A node without a machine answers "unavailable" (Ganeti's node without
// oob_program); one whose machine answers gives its power state or health,
// and one whose BMC fails answers "no data"; the result is Ganeti's
// per-node [[0, name], [status, data]], by name.
func TestOOBCommandResultShape(t *testing.T) {
	e := oobEnv(t)
	defer e.close()
	run := func(cmd string, names ...any) string {
		t.Helper()
		op := map[string]any{"OP_ID": "OP_OOB_COMMAND", "command": cmd, "power_delay": 0}
		if len(names) > 0 {
			op["node_names"] = names
		}
		st, res := e.run(t, op)
		if st != "success" {
			t.Fatalf("%s: %s %v", cmd, st, res)
		}
		b, _ := json.Marshal(res[0])
		return string(b)
	}
	for _, tc := range [][2]string{
		{"power-status", `[[[0,"n1"],[3,null]],[[0,"n2"],[0,{"powered":true}]]]`},
		{"health", `[[[0,"n1"],[3,null]],[[0,"n2"],[0,[["bmc","OK"],["power-sync","OK"]]]]]`},
		{"power-on", `[[[0,"n1"],[3,null]],[[0,"n2"],[0,null]]]`},
	} {
		if got := run(tc[0], "n2", "n1"); got != tc[1] {
			t.Errorf("%s: result %s, want %s", tc[0], got, tc[1])
		}
	}
	// Without names: every node but the master for power-cycle.
	if got := run("power-cycle"); got != `[[[0,"n2"],[0,null]]]` {
		t.Errorf("power-cycle of every node: %s", got)
	}
	e.node.mu.Lock()
	e.node.fail = map[string]error{nodeapi.MachinePower: errors.New("BMC unreachable")}
	e.node.mu.Unlock()
	for _, tc := range [][2]string{
		{"power-status", `[[[0,"n2"],[2,null]]]`},
		{"health", `[[[0,"n2"],[0,[["bmc","CRITICAL"],["power-sync","UNKNOWN"]]]]]`},
		{"power-on", `[[[0,"n2"],[2,null]]]`},
	} {
		if got := run(tc[0], "n2"); got != tc[1] {
			t.Errorf("%s with the BMC failing: result %s, want %s", tc[0], got, tc[1])
		}
	}
}
