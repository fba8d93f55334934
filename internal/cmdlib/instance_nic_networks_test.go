package cmdlib

import (
	"path/filepath"
	"testing"

	"github.com/corral/corral/internal/ecode"
)

// TestModifyNICsOnNetworks adds, modifies and removes NICs on a network
// through OP_INSTANCE_SET_PARAMS: each change takes and gives back pool
// addresses with the instance's change, and a modify that fails, in its
// checks or when it commits, leaves the pool as it was.
func TestModifyNICsOnNetworks(t *testing.T) {
	e := openEnv(t, filepath.Join(t.TempDir(), "s.db"), newNodeDouble(), true)
	defer e.close()
	// 10.9.0.0/29: .0, .1 (gateway), .2 and .7 reserved; .3-.6 free.
	mustRun(t, e, netOp("OP_NETWORK_ADD", "network_name", "net1", "network", "10.9.0.0/29",
		"gateway", "10.9.0.1", "add_reserved_ips", []any{"10.9.0.2"}))
	mustRun(t, e, netOp("OP_NETWORK_CONNECT", "network_name", "net1", "group_name", "default", "network_mode", "bridged", "network_link", "br9"))
	mustRun(t, e, create("m", map[string]any{"start": false}))
	modify := func(nics ...any) map[string]any {
		return netOp("OP_INSTANCE_SET_PARAMS", "instance_name", "m", "nics", nics)
	}
	check := func(free int, ips ...string) {
		t.Helper()
		if p := openPool(t, e); p.FreeCount() != free {
			t.Errorf("pool free %d (map %s), want %d", p.FreeCount(), p.Map(), free)
		}
		inst, _ := e.cfg.Instance("m")
		if len(inst.NICs) != len(ips) {
			t.Fatalf("NICs %+v, want addresses %v", inst.NICs, ips)
		}
		for i, ip := range ips {
			if inst.NICs[i].IP != ip {
				t.Errorf("NIC %d has address %q, want %q (%+v)", i, inst.NICs[i].IP, ip, inst.NICs[i])
			}
		}
	}
	check(4, "")

	mustRun(t, e, modify([]any{"add", -1, map[string]any{"network": "net1", "ip": "pool"}}))
	check(3, "", "10.9.0.3")
	inst, _ := e.cfg.Instance("m")
	if n := inst.NICs[1]; n.Mode != "bridged" || n.Link != "br9" || n.Network == "" {
		t.Errorf("added NIC %+v: want the group connection's mode and link", n)
	}
	// Another address in the same network: .3 back, .6 taken.
	mustRun(t, e, modify([]any{"modify", 1, map[string]any{"ip": "10.9.0.6"}}))
	check(3, "", "10.9.0.6")
	if ok, _ := openPool(t, e).IsReserved("10.9.0.3", false); ok {
		t.Error("the NIC's old address is still reserved")
	}
	// NIC 0 joins the network with a pool address.
	mustRun(t, e, modify([]any{"modify", 0, map[string]any{"network": "net1", "ip": "pool"}}))
	check(2, "10.9.0.3", "10.9.0.6")

	// Refused in the checks: nothing changes.
	mustFail(t, e, modify([]any{"add", -1, map[string]any{"network": "net1", "ip": "10.9.0.6"}}), ecode.NotUnique, "IP address 10.9.0.6 already in use or does not belong to network net1")
	mustFail(t, e, modify([]any{"add", -1, map[string]any{"ip": "pool"}}), ecode.Inval, "if ip=pool, parameter network must be passed too")
	mustFail(t, e, modify([]any{"modify", 0, map[string]any{"network": "none", "ip": "pool"}}), ecode.Inval, "If ip=pool, parameter network cannot be none")
	mustFail(t, e, modify([]any{"modify", 0, map[string]any{"network": "net1", "link": "br0"}}), ecode.Inval, "If network is given, no mode or link is allowed to be passed")
	mustFail(t, e, modify([]any{"add", -1, map[string]any{"network": "nope", "ip": "pool"}}), ecode.NoEnt, "nope")
	check(2, "10.9.0.3", "10.9.0.6")
	// Three pool addresses with two free: each passes the checks alone,
	// the commit runs out, and nothing of the change stays.
	pool := []any{"add", -1, map[string]any{"network": "net1", "ip": "pool"}}
	mustFail(t, e, modify(pool, pool, pool), ecode.State, "Unable to get a free IP for NIC 4 from the address pool")
	check(2, "10.9.0.3", "10.9.0.6")

	// Off the network: the address goes back with it.
	mustRun(t, e, modify([]any{"modify", 1, map[string]any{"network": "none"}}))
	check(3, "10.9.0.3", "")
	inst, _ = e.cfg.Instance("m")
	if inst.NICs[1].Network != "" {
		t.Errorf("NIC 1 still on network %s", inst.NICs[1].Network)
	}
	mustRun(t, e, modify([]any{"remove", 0, map[string]any{}}))
	check(4, "")
	if p := openPool(t, e); p.Map() != "XXX....X" {
		t.Errorf("pool map %s after every NIC left", p.Map())
	}
}
