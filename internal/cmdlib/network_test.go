package cmdlib

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/corral/corral/internal/ecode"
	"github.com/corral/corral/internal/exportcfg"
	"github.com/corral/corral/internal/ippool"
	"github.com/corral/corral/internal/nodeapi"
)

func netOp(id string, kv ...any) map[string]any {
	op := map[string]any{"OP_ID": id}
	for i := 0; i+1 < len(kv); i += 2 {
		op[kv[i].(string)] = kv[i+1]
	}
	return op
}

func mustRun(t *testing.T, e *env, op map[string]any) {
	t.Helper()
	if st, res := e.run(t, op); st != "success" {
		b, _ := json.Marshal(res)
		t.Fatalf("%s: %s %s", op["OP_ID"], st, b)
	}
}

func mustFail[C ~string](t *testing.T, e *env, op map[string]any, class C, msg string) {
	t.Helper()
	st, res := e.run(t, op)
	b, _ := json.Marshal(res)
	if st != "error" || !strings.Contains(string(b), string(class)) || !strings.Contains(string(b), msg) {
		t.Fatalf("%s: got %s %.400s, want %s %q", op["OP_ID"], st, b, class, msg)
	}
}

// TestNetworkPoolThroughInstances walks a network's life: add with
// reservations, connect, two instances taking pool addresses in their
// create, an explicit address reserved and a clash refused, remove
// giving addresses back, and Ganeti's refusals to remove or disconnect a
// network in use.
func TestNetworkPoolThroughInstances(t *testing.T) {
	e := openEnv(t, filepath.Join(t.TempDir(), "s.db"), newNodeDouble(), true)
	defer e.close()
	mustRun(t, e, netOp("OP_NETWORK_ADD", "network_name", "net1", "network", "10.9.0.0/29",
		"gateway", "10.9.0.1", "add_reserved_ips", []any{"10.9.0.2"}, "mac_prefix", "AA:BB:CC", "tags", []any{"t1"}))
	n, ok := e.cfg.Network("net1")
	if !ok || n.ExtReservations != "11100001" || n.MACPrefix != "aa:bb:cc" || n.Tags[0] != "t1" {
		t.Fatalf("network %+v", n)
	}
	mustFail(t, e, netOp("OP_NETWORK_ADD", "network_name", "net1", "network", "10.8.0.0/24"), ecode.Exists, "Desired network name 'net1' already exists as a network")
	mustFail(t, e, netOp("OP_NETWORK_ADD", "network_name", "big", "network", "10.0.0.0/8"), "OpExecError", "Cannot create IP address pool for network 'big': A big network")
	// Not connected yet: a NIC on it has no group parameters.
	nic := func(ip string) map[string]any {
		return map[string]any{"nics": []any{map[string]any{"network": "net1", "ip": ip}}}
	}
	mustFail(t, e, create("a", nic("pool")), ecode.Inval, "No netparams found for network net1. Probably not connected to node's n1 nodegroup")
	mustFail(t, e, netOp("OP_NETWORK_CONNECT", "network_name", "net1", "group_name", "default", "network_mode", "bridged", "network_link", "br9", "network_vlan", "100"),
		ecode.Inval, "Network VLANs are not available in this version")
	mustFail(t, e, netOp("OP_NETWORK_CONNECT", "network_name", "net1", "group_name", "default", "network_mode", "openvswitch", "network_link", "br9"),
		ecode.Inval, "NIC mode 'openvswitch' is not available in this version")
	mustRun(t, e, netOp("OP_NETWORK_CONNECT", "network_name", "net1", "group_name", "default", "network_mode", "bridged", "network_link", "br9"))
	mustRun(t, e, create("a", nic("pool")))
	mustRun(t, e, create("b", nic("pool")))
	a, _ := e.cfg.Instance("a")
	b, _ := e.cfg.Instance("b")
	if a.NICs[0].IP != "10.9.0.3" || b.NICs[0].IP != "10.9.0.4" {
		t.Fatalf("pool addresses %s %s", a.NICs[0].IP, b.NICs[0].IP)
	}
	if a.NICs[0].Mode != "bridged" || a.NICs[0].Link != "br9" || a.NICs[0].VLAN != "" || !strings.HasPrefix(a.NICs[0].MAC, "aa:bb:cc:") {
		t.Fatalf("NIC from the group connection: %+v", a.NICs[0])
	}
	// Nodes learn the network for the OS scripts' NIC_0_NETWORK_* values,
	// and the instance's data names it as Ganeti's does.
	if nw := e.proc.Spec(a).NICs[0].Network; nw == nil || nw.Name != "net1" || nw.Gateway != "10.9.0.1" || nw.Subnet != "10.9.0.0/29" || nw.MACPrefix != "aa:bb:cc" {
		t.Fatalf("node spec network %+v", nw)
	}
	st, res := e.run(t, netOp("OP_INSTANCE_QUERY_DATA", "instances", []any{"a"}, "static", true))
	if b, _ := json.Marshal(res); st != "success" || !strings.Contains(string(b), `"10.9.0.3","`+a.NICs[0].MAC+`","bridged","br9","","`+a.NICs[0].Network+`",{`) {
		t.Fatalf("query data NICs: %s %s", st, b)
	}
	mustRun(t, e, create("c", nic("10.9.0.6")))
	mustFail(t, e, create("d", nic("10.9.0.6")), ecode.NotUnique, "IP address 10.9.0.6 already in use or does not belong to network net1")
	mustFail(t, e, create("d", nic("10.9.0.2")), ecode.NotUnique, "already in use")
	mustFail(t, e, create("d", map[string]any{"nics": []any{map[string]any{"ip": "10.9.0.5"}}}), ecode.State, "The requested IP address (10.9.0.5) belongs to network net1, but the target NIC does not.")
	mustFail(t, e, create("d", map[string]any{"nics": []any{map[string]any{"network": "net1", "mode": "routed"}}}), ecode.Inval, "If network is given, no mode or link is allowed to be passed")
	mustFail(t, e, create("d", map[string]any{"nics": []any{map[string]any{"ip": "pool"}}}), ecode.Inval, "if ip=pool, parameter network must be passed too")
	mustRun(t, e, create("d", nic("pool")))
	mustFail(t, e, create("e", nic("pool")), ecode.State, "Unable to get a free IP for NIC 0 from the address pool")
	pool := openPool(t, e)
	if pool.FreeCount() != 0 {
		t.Fatalf("free %d, map %s", pool.FreeCount(), pool.Map())
	}
	mustFail(t, e, netOp("OP_NETWORK_DISCONNECT", "network_name", "net1", "group_name", "default"), ecode.State, "Conflicting IP addresses found")
	mustFail(t, e, netOp("OP_NETWORK_REMOVE", "network_name", "net1"), ecode.State, "Network still connected")
	mustRun(t, e, netOp("OP_INSTANCE_REMOVE", "instance_name", "a"))
	if ok, _ := openPool(t, e).IsReserved("10.9.0.3", false); ok {
		t.Fatal("removed instance's address still reserved")
	}
	mustRun(t, e, create("e", nic("pool")))
	if i, _ := e.cfg.Instance("e"); i.NICs[0].IP != "10.9.0.3" {
		t.Fatalf("released address not reused: %s", i.NICs[0].IP)
	}
	// Modify: gateway and reservations at once are refused; reservations
	// change the external map; tags work on networks.
	mustFail(t, e, netOp("OP_NETWORK_SET_PARAMS", "network_name", "net1", "gateway", "10.9.0.2", "add_reserved_ips", []any{"10.9.0.3"}), ecode.Inval, "Cannot modify gateway and reserved ips at once")
	mustRun(t, e, netOp("OP_NETWORK_SET_PARAMS", "network_name", "net1", "remove_reserved_ips", []any{"10.9.0.2"}, "network6", "2001:db8::/64"))
	if n, _ := e.cfg.Network("net1"); n.ExtReservations != "11000001" || n.Network6 != "2001:db8::/64" {
		t.Fatalf("after modify %+v", n)
	}
	mustRun(t, e, netOp("OP_TAGS_SET", "kind", "network", "name", "net1", "tags", []any{"t2"}))
	if n, _ := e.cfg.Network("net1"); strings.Join(n.Tags, ",") != "t1,t2" {
		t.Fatalf("tags %v", n.Tags)
	}
	for _, i := range []string{"b", "c", "d", "e"} {
		mustRun(t, e, netOp("OP_INSTANCE_REMOVE", "instance_name", i))
	}
	if p := openPool(t, e); p.Map() != "XX.....X" {
		t.Fatalf("map after removing every instance: %s", p.Map())
	}
	mustRun(t, e, netOp("OP_NETWORK_DISCONNECT", "network_name", "net1", "group_name", "default"))
	mustRun(t, e, netOp("OP_NETWORK_REMOVE", "network_name", "net1"))
	if len(e.cfg.Networks()) != 0 {
		t.Fatal("network not removed")
	}
}

func openPool(t *testing.T, e *env) *ippool.Pool {
	t.Helper()
	n, ok := e.cfg.Network("net1")
	if !ok {
		t.Fatal("net1 gone")
	}
	p, err := ippool.Open(n)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestVerifyReportsNetworkClashes has cluster verify find what a damaged
// configuration holds: an address used twice, one outside its network,
// one reserved externally as well, one not marked in the pool, and a
// reservation no NIC holds.
func TestVerifyReportsNetworkClashes(t *testing.T) {
	e := openEnv(t, filepath.Join(t.TempDir(), "s.db"), newNodeDouble(), true)
	defer e.close()
	mustRun(t, e, netOp("OP_NETWORK_ADD", "network_name", "net1", "network", "10.9.0.0/28", "gateway", "10.9.0.1"))
	mustRun(t, e, netOp("OP_NETWORK_CONNECT", "network_name", "net1", "group_name", "default", "network_mode", "bridged", "network_link", "br9"))
	for _, n := range []string{"a", "b", "c", "d"} {
		mustRun(t, e, create(n, map[string]any{"nics": []any{map[string]any{"network": "net1", "ip": "pool"}}}))
	}
	verify := func() string {
		st, res := e.run(t, map[string]any{"OP_ID": "OP_CLUSTER_VERIFY"})
		if st != "success" {
			t.Fatalf("verify: %s %v", st, res)
		}
		b, _ := json.Marshal(res)
		return string(b)
	}
	if out := verify(); strings.Contains(out, "net1") || strings.Contains(out, "multiple owners") {
		t.Fatalf("clean configuration reported: %s", out)
	}
	// b takes a's address, c an address outside, d the gateway; and a
	// reservation of a's old address in the pool stays without owner.
	a, _ := e.cfg.Instance("a")
	b, _ := e.cfg.Instance("b")
	c, _ := e.cfg.Instance("c")
	d, _ := e.cfg.Instance("d")
	b.NICs[0].IP = a.NICs[0].IP
	c.NICs[0].IP = "10.9.1.1"
	d.NICs[0].IP = "10.9.0.1"
	tx := e.cfg.Begin()
	tx.PutInstance(b)
	tx.PutInstance(c)
	tx.PutInstance(d)
	if err := e.cfg.Commit(context.Background(), tx); err != nil {
		t.Fatal(err)
	}
	out := verify()
	for _, want := range []string{
		"IP address bridge:br9/10.9.0.2/" + a.NICs[0].Network + " is used by multiple owners: instance:a/nic:0, instance:b/nic:0",
		"instance c: NIC 0 address 10.9.1.1 is outside the pool of network net1 (10.9.0.0/28)",
		"instance d: NIC 0 address 10.9.0.1 is not reserved in the pool of network net1",
		"instance d: NIC 0 address 10.9.0.1 is also reserved externally in network net1",
		"network net1: addresses marked used by instances that no NIC holds: 10.9.0.3, 10.9.0.4, 10.9.0.5",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("verify lacks %q:\n%s", want, out)
		}
	}
}

// TestConcurrentCreatesGetDistinctPoolAddresses submits creates on one
// network at once, placed by the allocator: each takes its address in its
// own reserve step (creates serialise there on the node-allocation lock
// and the network's), so none fails on a conflicting commit and no address
// is given twice.
func TestConcurrentCreatesGetDistinctPoolAddresses(t *testing.T) {
	e := openEnv(t, filepath.Join(t.TempDir(), "s.db"), newNodeDouble(), true)
	defer e.close()
	mustRun(t, e, netOp("OP_NETWORK_ADD", "network_name", "net1", "network", "10.9.0.0/27"))
	mustRun(t, e, netOp("OP_NETWORK_CONNECT", "network_name", "net1", "group_name", "default", "network_mode", "routed", "network_link", "100"))
	const n = 8
	ids := make([]int64, n)
	for k := range n {
		op := create(fmt.Sprintf("p%d", k), map[string]any{"nics": []any{map[string]any{"network": "net1", "ip": "pool"}}})
		raw, _ := json.Marshal(op)
		id, err := e.q.Submit(context.Background(), []json.RawMessage{raw})
		if err != nil {
			t.Fatal(err)
		}
		ids[k] = id
	}
	seen := map[string]string{}
	for k, id := range ids {
		if st, res := e.wait(t, id); st != "success" {
			t.Fatalf("create p%d: %s %v", k, st, res)
		}
		i, _ := e.cfg.Instance(fmt.Sprintf("p%d", k))
		ip := i.NICs[0].IP
		if other, dup := seen[ip]; dup || !strings.HasPrefix(ip, "10.9.0.") {
			t.Fatalf("p%d got %s (also %s)", k, ip, other)
		}
		seen[ip] = i.Name
	}
	if p := openPool(t, e); p.ReservedCount() != n+2 {
		t.Fatalf("pool holds %d reservations, want %d: %s", p.ReservedCount(), n+2, p.Map())
	}
}

// TestImportKeepsNICNetwork imports an export whose NIC was on a network
// (config.ini names its uuid, as Ganeti writes it): the new NIC is on the
// network again, with the group's mode and link, and its address is
// reserved in the pool.
func TestImportKeepsNICNetwork(t *testing.T) {
	node := newNodeDouble()
	e := openEnv(t, filepath.Join(t.TempDir(), "s.db"), node, true)
	defer e.close()
	mustRun(t, e, netOp("OP_NETWORK_ADD", "network_name", "net1", "network", "10.9.0.0/28"))
	mustRun(t, e, netOp("OP_NETWORK_CONNECT", "network_name", "net1", "group_name", "default", "network_mode", "bridged", "network_link", "br9"))
	n, _ := e.cfg.Network("net1")
	exp := &exportcfg.Export{Name: "old1", OS: "tiny+default", Hypervisor: "fake", DiskTemplate: "file",
		Disks: []exportcfg.Disk{{Index: 0, SizeMiB: 100, Dump: "disk0.raw"}},
		NICs:  []exportcfg.NIC{{MAC: "aa:00:00:12:34:56", IP: "10.9.0.5", Mode: "routed", Link: "100", Network: n.UUID}}}
	parsed, err := exportcfg.Parse(exp.Marshal())
	if err != nil || parsed.NICs[0].Network != n.UUID {
		t.Fatalf("config.ini round trip: %+v %v", parsed, err)
	}
	node.replies = map[string]any{
		nodeapi.ExportInfo:   nodeapi.ExportInfoReply{Path: "/exports/old1", Config: string(exp.Marshal())},
		nodeapi.ImportStart:  nodeapi.ImportStartReply{Name: "import-1", Host: "127.0.0.2", Port: 1234},
		nodeapi.ExportStart:  nodeapi.ExportStartReply{Name: "export-1"},
		nodeapi.ImpExpStatus: nodeapi.ImpExpStatusReply{Status: []nodeapi.TransferStatus{{Known: true, Done: true, OK: true, Bytes: 100 << 20}}},
	}
	mustRun(t, e, create("new1", map[string]any{"mode": "import", "src_node": "n1", "src_path": "old1",
		"disks": []any{}, "nics": []any{}, "os_type": nil, "start": false}))
	i, _ := e.cfg.Instance("new1")
	if nic := i.NICs[0]; nic.Network != n.UUID || nic.IP != "10.9.0.5" || nic.Mode != "bridged" || nic.Link != "br9" {
		t.Fatalf("imported NIC %+v", nic)
	}
	if used, _ := openPool(t, e).IsReserved("10.9.0.5", false); !used {
		t.Fatal("imported NIC's address not reserved")
	}
}
