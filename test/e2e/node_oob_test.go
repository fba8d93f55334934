package e2e

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/corral/corral/internal/bmc/bmctest"
)

// TestNodePowerThroughBMCEmulator runs out-of-band commands
// (OP_OOB_COMMAND) on a node linked to a machine behind the project's
// Redfish BMC emulator, whose power is a real qemu process: Ganeti's own
// gnt-node power status and health (drop-in mode), corral node power on
// and off, and the op over LUXI. A node without a machine answers
// "(unavail)", and the master is never powered off.
func TestNodePowerThroughBMCEmulator(t *testing.T) {
	requireRoot(t)
	bmctest.NeedTools(t, "qemu-system-x86_64")
	bin := bmctest.CorralBMC(t)
	m := bmctest.NewMachine(t, "oob1")
	rf := bmctest.StartRedfish(t, bin, m)
	c := newDropinCluster(t, 1)
	c.mustSucceed(map[string]any{"OP_ID": "OP_MACHINE_CREATE", "name": "bm-oob", "driver": "redfish",
		"driver_info": map[string]any{"redfish_address": rf.URL, "redfish_system_id": "/redfish/v1/Systems/oob1",
			"redfish_username": rf.User, "redfish_password": rf.Password, "redfish_verify_ca": rf.CAFile}})
	if out, err := c.corral("node", "modify", "node2", "-N", "machine=bm-oob"); err != nil {
		t.Fatalf("node modify -N machine=bm-oob: %v\n%s", err, out)
	}

	if out := c.mustGnt("gnt-node", "power", "status", "node2"); !strings.Contains(out, "node2") || !strings.Contains(out, "unpowered") {
		t.Errorf("gnt-node power status of the machine off:\n%s", out)
	}
	if out, err := c.corral("node", "power", "on", "--power-delay", "0", "node2"); err != nil || !strings.Contains(out, "invoked") {
		t.Fatalf("corral node power on node2: %v\n%s", err, out)
	}
	bmctest.WaitPower(t, m, true, 30*time.Second)
	if out := c.mustGnt("gnt-node", "power", "status", "node2"); !strings.Contains(out, "powered") || strings.Contains(out, "unpowered") {
		t.Errorf("gnt-node power status of the machine on:\n%s", out)
	}
	if out := c.mustGnt("gnt-node", "health", "node2"); !strings.Contains(out, "bmc=OK") || !strings.Contains(out, "power-sync=OK") {
		t.Errorf("gnt-node health:\n%s", out)
	}
	// node1 has no machine: Ganeti's node without an oob_program.
	if out, code := c.gnt("gnt-node", "power", "status", "node1"); code == 0 || !strings.Contains(out, "unavail") {
		t.Errorf("gnt-node power status of a node without a machine: exit %d\n%s", code, out)
	}
	if out, err := c.corral("node", "power", "cycle", "--yes-do-it", "node1"); err == nil || !strings.Contains(out, "Operating on the master node node1 is not allowed for power-cycle") {
		t.Errorf("power cycle of the master: %v\n%s", err, out)
	}

	// power off marks the node offline first, in the same job.
	if out, err := c.corral("node", "power", "off", "--yes-do-it", "node2"); err != nil || !strings.Contains(out, "invoked") {
		t.Fatalf("corral node power off node2: %v\n%s", err, out)
	}
	bmctest.WaitPower(t, m, false, 30*time.Second)
	rows, err := c.luxi.QueryNodes(context.Background(), []string{"node2", "node1"}, []string{"offline", "powered"}, false)
	if b, _ := json.Marshal(rows); err != nil || string(b) != `[[true,false],[false,true]]` {
		t.Errorf("node2 and node1 (offline, powered) after powering node2 off: %s %v", b, err)
	}
	res := c.mustSucceed(map[string]any{"OP_ID": "OP_OOB_COMMAND", "command": "power-status", "node_names": []any{"node2", "node1"}})
	if b, _ := json.Marshal(res[0]); string(b) != `[[[0,"node1"],[3,null]],[[0,"node2"],[0,{"powered":false}]]]` {
		t.Errorf("power-status over LUXI: %s", b)
	}
}
