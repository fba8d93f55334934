package k8sprocess

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/corral/corral/internal/coe/driver"
	"github.com/corral/corral/internal/config"
	"github.com/corral/corral/internal/ecode"
	"github.com/corral/corral/internal/nodeapi"
)

// TestPlaceThreeMastersOnDifferentNodes: three masters go to three
// different undrained nodes, each reserving its ports there; the first is
// the API address, all are master_addresses; placed again (after a
// restart, through the store's JSON) they stay; fewer nodes than masters
// is a NoRes error naming both counts.
func TestPlaceThreeMastersOnDifferentNodes(t *testing.T) {
	ctx := context.Background()
	d := testDriver(t)
	e := &testEnv{nodes: []*config.Node{node("n1", "192.0.2.1"), node("n2", "192.0.2.2"), node("n3", "192.0.2.3"), node("n4", "192.0.2.4")},
		ports: nodeapi.COEControlPlanePorts{APIServer: 7001, EtcdClient: 7002, EtcdPeer: 7003}}
	e.nodes[3].Drained = true
	c := testCluster(3)
	if err := d.place(ctx, e, c); err != nil {
		t.Fatal(err)
	}
	ms, err := mastersOf(c)
	if err != nil || len(ms) != 3 {
		t.Fatalf("masters %v %v", ms, err)
	}
	seen := map[string]bool{}
	for _, m := range ms {
		if seen[m.Node] || m.Node == "uuid-n4" {
			t.Fatalf("masters on %v", ms)
		}
		seen[m.Node] = true
	}
	if c.APIAddress != "https://"+ms[0].Bind+":7001" || len(c.MasterAddresses) != 3 || c.MasterAddresses[1] != ms[1].Bind ||
		len(c.MasterGroup().NodeAddresses) != 3 {
		t.Fatalf("api %s masters %v", c.APIAddress, c.MasterAddresses)
	}
	if len(e.calls) != 3 {
		t.Fatalf("calls %v", e.calls)
	}
	// Through the store and placed again: the same nodes, in order.
	b, _ := json.Marshal(c.Placement)
	c.Placement = nil
	if err := json.Unmarshal(b, &c.Placement); err != nil {
		t.Fatal(err)
	}
	e.nodes[3].Drained = false
	if err := d.place(ctx, e, c); err != nil {
		t.Fatal(err)
	}
	again, _ := mastersOf(c)
	for i := range ms {
		if again[i] != ms[i] {
			t.Fatalf("placed again %v, first %v", again, ms)
		}
	}
	// A master's node offline: the step says which.
	var rest []*config.Node
	for _, n := range e.nodes {
		if n.UUID != ms[1].Node {
			rest = append(rest, n)
		}
	}
	if err := d.place(ctx, &testEnv{nodes: rest}, c); ecode.ClassOf(err) != ecode.Environ || !strings.Contains(err.Error(), ms[1].NodeName) {
		t.Fatalf("master's node gone: %v", err)
	}
	// Another count for a placed cluster is refused.
	c.MasterGroup().NodeCount = 5
	if err := d.place(ctx, e, c); ecode.ClassOf(err) != ecode.Inval {
		t.Fatalf("master_count changed: %v", err)
	}
	// Two nodes for three masters.
	err = d.place(ctx, &testEnv{nodes: e.nodes[:2]}, testCluster(3))
	if ecode.ClassOf(err) != ecode.NoRes || !strings.Contains(err.Error(), "3 masters") || !strings.Contains(err.Error(), "only 2") {
		t.Fatalf("too few nodes: %v", err)
	}
}

// TestChooseMasterNodesSpreads: the choice is n different nodes, stable
// for a cluster, and clusters start at different nodes.
func TestChooseMasterNodesSpreads(t *testing.T) {
	cs := []*config.Node{node("a", "192.0.2.1"), node("b", "192.0.2.2"), node("c", "192.0.2.3")}
	starts := map[string]bool{}
	for _, uuid := range []string{"u1", "u2", "u3", "u4", "u5", "u6", "u7", "u8"} {
		got, err := chooseMasterNodes(cs, uuid, uuid, 3)
		if err != nil {
			t.Fatal(err)
		}
		again, _ := chooseMasterNodes(cs, uuid, uuid, 3)
		names := map[string]bool{}
		for i, n := range got {
			names[n.Name] = true
			if again[i] != n {
				t.Fatalf("%s: choice not stable", uuid)
			}
		}
		if len(names) != 3 {
			t.Fatalf("%s: masters share nodes: %v", uuid, names)
		}
		starts[got[0].Name] = true
	}
	if len(starts) < 2 {
		t.Fatalf("every cluster's first master on %v", starts)
	}
}

// TestMastersArgsNameEveryMember: each master's start names its own
// member, every member's peer and client URL in placement order, and only
// the first runs kwok; one master sends nothing (it runs as before).
func TestMastersArgsNameEveryMember(t *testing.T) {
	ms := []masterPlace{{Bind: "192.0.2.1", EtcdClient: 1, EtcdPeer: 2}, {Bind: "192.0.2.2", EtcdClient: 3, EtcdPeer: 4},
		{Bind: "192.0.2.3", EtcdClient: 5, EtcdPeer: 6}}
	for i := range ms {
		a := mastersArgs(ms, i)
		if a.Member != memberName(i) || a.Kwok != (i == 0) || len(a.Members) != 3 {
			t.Fatalf("master %d: %+v", i, a)
		}
		if a.Members[2] != (nodeapi.COEEtcdMember{Name: "master-2", PeerURL: "https://192.0.2.3:6", ClientURL: "https://192.0.2.3:5"}) {
			t.Fatalf("member 2: %+v", a.Members[2])
		}
	}
	if mastersArgs(ms[:1], 0) != nil {
		t.Fatal("one master has masters args")
	}
}

// TestStartSendsOneServiceAccountKeyToEveryMaster: the three masters get
// the same bundle and the cluster's kept service account key, the same
// again when the step runs again.
func TestStartSendsOneServiceAccountKeyToEveryMaster(t *testing.T) {
	ctx := context.Background()
	d := testDriver(t)
	e := &testEnv{nodes: []*config.Node{node("n1", "192.0.2.1"), node("n2", "192.0.2.2"), node("n3", "192.0.2.3")},
		ports: nodeapi.COEControlPlanePorts{APIServer: 7001, EtcdClient: 7002, EtcdPeer: 7003}}
	c := testCluster(3)
	steps := d.CreateCluster(driver.Params{})
	for _, s := range steps[:3] {
		if err := s.Run(ctx, e, c); err != nil {
			t.Fatal(err)
		}
	}
	if err := steps[2].Run(ctx, e, c); err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, a := range e.args {
		if s, ok := a.(nodeapi.COEControlPlaneStartArgs); ok {
			if s.Masters == nil || len(s.Masters.Members) != 3 {
				t.Fatalf("start without the members: %+v", s.Masters)
			}
			keys = append(keys, s.Certs.ServiceAccount.Key)
		}
	}
	if len(keys) != 6 {
		t.Fatalf("%d starts", len(keys))
	}
	for _, k := range keys {
		if k != keys[0] || k == "" {
			t.Fatal("the masters got different service account keys")
		}
	}
}

// TestUpgradeRollsOneMasterPerBatch: a master batch's first step stops
// only the batch's master and starts the control plane again everywhere
// (the node leaves running masters be); its second step waits for that
// master's API server.
func TestUpgradeRollsOneMasterPerBatch(t *testing.T) {
	ctx := context.Background()
	d := testDriver(t)
	e := &testEnv{nodes: []*config.Node{node("n1", "192.0.2.1"), node("n2", "192.0.2.2"), node("n3", "192.0.2.3")},
		ports: nodeapi.COEControlPlanePorts{APIServer: 7001, EtcdClient: 7002, EtcdPeer: 7003}}
	c := testCluster(3)
	for _, s := range d.CreateCluster(driver.Params{})[:3] {
		if err := s.Run(ctx, e, c); err != nil {
			t.Fatal(err)
		}
	}
	ms, _ := mastersOf(c)
	plan := driver.UpgradePlan{Groups: []driver.UpgradeGroup{{Name: "default-master", Role: config.COERoleMaster,
		Batches: [][]string{{ms[0].Bind}, {ms[1].Bind}, {ms[2].Bind}}}}}
	steps := d.UpgradeCluster(driver.Params{}, driver.Params{KubeTag: "v9"}, plan)
	if len(steps) != 6 {
		t.Fatalf("%d steps for three masters", len(steps))
	}
	e.calls = nil
	if err := steps[2].Run(ctx, e, c); err != nil {
		t.Fatal(err)
	}
	var stops, starts []string
	for _, call := range e.calls {
		name, method, _ := strings.Cut(call, " ")
		switch method {
		case nodeapi.COEControlPlaneStop:
			stops = append(stops, name)
		case nodeapi.COEControlPlaneStart:
			starts = append(starts, name)
		}
	}
	if len(stops) != 1 || stops[0] != ms[1].NodeName || len(starts) != 3 {
		t.Fatalf("stopped %v started %v, want %s stopped", stops, starts, ms[1].NodeName)
	}
	if c.MasterGroup().Version != "v9" {
		t.Fatalf("group version %q", c.MasterGroup().Version)
	}
	// Nothing answers at the master's address: the wait parks.
	if err := steps[3].Run(ctx, e, c); !errors.Is(err, errParked) {
		t.Fatalf("wait for a master that does not answer: %v", err)
	}
}

// TestDeleteStopsEveryMasterAndNamesAnOfflineOne: the delete purges the
// cluster on every online node and fails naming a master whose node is
// offline.
func TestDeleteStopsEveryMasterAndNamesAnOfflineOne(t *testing.T) {
	ctx := context.Background()
	d := testDriver(t)
	e := &testEnv{nodes: []*config.Node{node("n1", "192.0.2.1"), node("n2", "192.0.2.2"), node("n3", "192.0.2.3")},
		ports: nodeapi.COEControlPlanePorts{APIServer: 7001, EtcdClient: 7002, EtcdPeer: 7003}}
	c := testCluster(3)
	if err := d.place(ctx, e, c); err != nil {
		t.Fatal(err)
	}
	ms, _ := mastersOf(c)
	del := d.DeleteCluster(driver.Params{})[0]
	e.calls = nil
	if err := del.Run(ctx, e, c); err != nil {
		t.Fatal(err)
	}
	purged := map[string]bool{}
	for i, call := range e.calls {
		if strings.HasSuffix(call, nodeapi.COEControlPlaneStop) && e.args[len(e.args)-len(e.calls)+i].(nodeapi.COEControlPlaneStopArgs).Purge {
			name, _, _ := strings.Cut(call, " ")
			purged[name] = true
		}
	}
	if len(purged) != 3 {
		t.Fatalf("purged on %v", purged)
	}
	var rest []*config.Node
	for _, n := range e.nodes {
		if n.UUID != ms[2].Node {
			rest = append(rest, n)
		}
	}
	if err := del.Run(ctx, &testEnv{nodes: rest}, c); ecode.ClassOf(err) != ecode.Environ || !strings.Contains(err.Error(), ms[2].NodeName) {
		t.Fatalf("a master's node offline: %v", err)
	}
}
