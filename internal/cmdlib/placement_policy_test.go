package cmdlib

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/corral/corral/internal/nodeapi"
)

// TestAllocPolicyPlacement: the built-in allocator never places on a node
// of an unallocable group, prefers preferred groups to last_resort ones,
// and says why when no group may take the instance.
func TestAllocPolicyPlacement(t *testing.T) {
	e := openEnv(t, filepath.Join(t.TempDir(), "s.db"), newNodeDouble(), true)
	defer e.close()
	mustRun := func(op map[string]any) {
		t.Helper()
		if st, res := e.run(t, op); st != "success" {
			t.Fatalf("%v: %s %v", op["OP_ID"], st, res)
		}
	}
	mustRun(map[string]any{"OP_ID": "OP_NODE_ADD", "node_name": "n2", "primary_ip": "127.0.0.3"})
	mustRun(groupOp("OP_GROUP_ADD", "rack2", map[string]any{"alloc_policy": "unallocable"}))
	mustRun(groupOp("OP_GROUP_ASSIGN_NODES", "rack2", map[string]any{"nodes": []any{"n2"}}))
	n1, _ := e.cfg.Node("n1")
	n2, _ := e.cfg.Node("n2")
	// n2 has the most free memory from the second instance on: only its
	// group's policy keeps the allocator off it.
	for _, name := range []string{"a1", "a2", "a3"} {
		mustRun(create(name, map[string]any{"start": false}))
		if i, _ := e.cfg.Instance(name); i.PrimaryNode != n1.UUID {
			t.Fatalf("%s placed on %s, in an unallocable group", name, i.PrimaryNode)
		}
	}
	mustRun(groupOp("OP_GROUP_SET_PARAMS", "rack2", map[string]any{"alloc_policy": "last_resort"}))
	mustRun(create("a4", map[string]any{"start": false}))
	if i, _ := e.cfg.Instance("a4"); i.PrimaryNode != n1.UUID {
		t.Fatal("a last_resort group was chosen while a preferred one had room")
	}
	mustRun(groupOp("OP_GROUP_SET_PARAMS", "default", map[string]any{"alloc_policy": "unallocable"}))
	mustRun(create("a5", map[string]any{"start": false}))
	if i, _ := e.cfg.Instance("a5"); i.PrimaryNode != n2.UUID {
		t.Fatal("the last_resort group was not used when it was the only allocable one")
	}
	mustRun(groupOp("OP_GROUP_SET_PARAMS", "rack2", map[string]any{"alloc_policy": "unallocable"}))
	st, res := e.run(t, create("a6", nil))
	if j := mustJSON(res); st != "error" || !strings.Contains(j, "n1: node group default is unallocable") || !strings.Contains(j, "n2: node group rack2 is unallocable") {
		t.Fatalf("every group unallocable: %s %s", st, j)
	}
	// A node named by the caller is used whatever its group's policy, as
	// in Ganeti.
	mustRun(create("a7", map[string]any{"start": false, "pnode": "n2"}))
}

// TestGroupIPolicyEnforced: a group's own instance policy is checked in
// full on create (disk template, disk sizes, counts) with Ganeti's text,
// ignore_ipolicy overrides it, a change of beparams is held to it, and
// cluster verify warns about instances outside it.
func TestGroupIPolicyEnforced(t *testing.T) {
	e := openEnv(t, filepath.Join(t.TempDir(), "s.db"), newNodeDouble(), true)
	defer e.close()
	if st, res := e.run(t, create("small", map[string]any{"start": false})); st != "success" {
		t.Fatalf("create under the default policy (only memory, CPUs and spindles checked): %s %v", st, res)
	}
	g, _ := e.cfg.Group("default")
	if st, res := e.run(t, groupOp("OP_GROUP_SET_PARAMS", "default", map[string]any{"ipolicy": map[string]any{
		"disk-templates": []any{"diskless"},
		"minmax": []any{map[string]any{
			"min": map[string]any{"cpu-count": 1, "disk-count": 1, "disk-size": 200, "memory-size": 64, "nic-count": 1, "spindle-use": 0},
			"max": map[string]any{"cpu-count": 4, "disk-count": 1, "disk-size": 1000, "memory-size": 4096, "nic-count": 1, "spindle-use": 4}}},
	}})); st != "success" {
		t.Fatalf("group ipolicy: %s %v", st, res)
	}
	st, res := e.run(t, create("big", map[string]any{"disks": []any{map[string]any{"size": 100}, map[string]any{"size": 300}}}))
	want := "Instance allocation to group " + g.UUID + " (default) violates policy: Disk template file is not allowed (allowed templates: diskless), " +
		"disk-size/0 value 100 is not in range [200, 1000], disk-count value 2 is not in range [1, 1]"
	if st != "error" || !strings.Contains(mustJSON(res), want) {
		t.Fatalf("create outside the group policy: %s %s\nwant %s", st, mustJSON(res), want)
	}
	if st, res := e.run(t, create("big", map[string]any{"pnode": "n1", "ignore_ipolicy": true, "start": false,
		"disks": []any{map[string]any{"size": 100}, map[string]any{"size": 300}}})); st != "success" {
		t.Fatalf("ignore_ipolicy: %s %v", st, res)
	}
	st, res = e.run(t, map[string]any{"OP_ID": "OP_INSTANCE_SET_PARAMS", "instance_name": "small", "beparams": map[string]any{"vcpus": 5}})
	if st != "error" || !strings.Contains(mustJSON(res), "(default) violates policy: cpu-count value 5 is not in range [1, 4]") {
		t.Fatalf("modify outside the policy: %s %v", st, res)
	}

	p := &Processor{Cfg: e.cfg}
	lu := &clusterVerifyLU{}
	lu.verifyInstancePolicies(p)
	msgs := strings.Join(lu.Messages, "\n")
	if lu.Warnings != 2 || !strings.Contains(msgs, "W: instance big: Disk template file is not allowed (allowed templates: diskless), disk-size/0 value 100 is not in range [200, 1000], disk-count value 2 is not in range [1, 1]") ||
		!strings.Contains(msgs, "W: instance small: Disk template file is not allowed") {
		t.Fatalf("verify: %d warnings\n%s", lu.Warnings, msgs)
	}
}

// TestVerifyNodeOS: the OS lists of the nodes are compared with the
// reference node's, os_version included, with Ganeti's messages.
func TestVerifyNodeOS(t *testing.T) {
	deb := nodeapi.OSInfo{Name: "deb", Path: "/os/deb", Valid: true, Variants: []string{"a", "b"}, Parameters: [][2]string{{"p", "d"}},
		APIVersions: []int{20}, Trusted: true, Version: "1.0"}
	ref := map[string]nodeapi.OSInfo{"deb": deb, "noop": {Name: "noop", Path: "/os/noop", Valid: true, APIVersions: []int{10}, Trusted: true}}
	lu := &clusterVerifyLU{}
	lu.compareNodeOS("n1", ref, "n1", ref)
	if lu.Errors != 0 {
		t.Fatalf("the reference against itself: %v", lu.Messages)
	}
	other := deb
	other.Version, other.Variants, other.APIVersions = "1.1", []string{"a"}, []int{15, 20}
	bad := nodeapi.OSInfo{Name: "broken", Path: "/os/broken", Error: "missing create"}
	lu.compareNodeOS("n2", map[string]nodeapi.OSInfo{"deb": other, "broken": bad}, "n1", ref)
	msgs := strings.Join(lu.Messages, "\n")
	for _, want := range []string{
		"E: node n2: Invalid OS broken (located at /os/broken): missing create",
		"E: node n2: Extra OS broken not present on reference node (n1)",
		"E: node n2: OS API version for deb differs from reference node n1: [15, 20] vs. [20]",
		"E: node n2: OS variants list for deb differs from reference node n1: [a] vs. [a, b]",
		"E: node n2: OS version for deb differs from reference node n1: 1.1 vs. 1.0",
		"E: node n2: OSes present on reference node n1 but missing on this node: noop",
	} {
		if !strings.Contains(msgs, want) {
			t.Errorf("missing %q in\n%s", want, msgs)
		}
	}
	if lu.Errors != 6 {
		t.Errorf("%d errors, want 6:\n%s", lu.Errors, msgs)
	}
}

// TestClusterIPolicy: the cluster's own policy (OP_CLUSTER_SET_PARAMS
// ipolicy) is shown by ClusterIPolicy, applies to groups without their own
// entries, checks its std against its minmax and refuses a policy its
// default backend parameters would violate.
func TestClusterIPolicy(t *testing.T) {
	e := openEnv(t, filepath.Join(t.TempDir(), "s.db"), newNodeDouble(), true)
	defer e.close()
	set := func(pol map[string]any) (string, []any) {
		return e.run(t, map[string]any{"OP_ID": "OP_CLUSTER_SET_PARAMS", "ipolicy": pol})
	}
	minmax := func(maxCPU int) []any {
		return []any{map[string]any{
			"min": map[string]any{"cpu-count": 1, "disk-count": 1, "disk-size": 50, "memory-size": 64, "nic-count": 0, "spindle-use": 0},
			"max": map[string]any{"cpu-count": maxCPU, "disk-count": 4, "disk-size": 2048, "memory-size": 4096, "nic-count": 4, "spindle-use": 4}}}
	}
	if st, res := set(map[string]any{"minmax": minmax(2), "std": map[string]any{"cpu-count": 2}, "vcpu-ratio": 2.0}); st != "success" {
		t.Fatalf("set cluster ipolicy: %s %v", st, res)
	}
	pol := ClusterIPolicy(e.cfg.Cluster())
	if pol["vcpu-ratio"] != 2.0 || pol["std"].(map[string]any)["cpu-count"] != 2.0 || pol["std"].(map[string]any)["memory-size"] != int64(128) {
		t.Fatalf("cluster ipolicy view: %v", pol)
	}
	g, _ := e.cfg.Group("default")
	st, res := e.run(t, create("c1", map[string]any{"beparams": map[string]any{"vcpus": 3}, "pnode": "n1"}))
	if want := "Instance allocation to group " + g.UUID + " (default) violates policy: cpu-count value 3 is not in range [1, 2]"; st != "error" || !strings.Contains(mustJSON(res), want) {
		t.Fatalf("create outside the cluster policy: %s %v", st, res)
	}
	if st, res := set(map[string]any{"std": map[string]any{"cpu-count": 5}}); st != "error" || !strings.Contains(mustJSON(res), "standard spec is outside its min/max specs: cpu-count value 5 is not in range [1, 2]") {
		t.Fatalf("std outside minmax: %s %v", st, res)
	}
	if st, res := set(map[string]any{"minmax": []any{map[string]any{
		"min": map[string]any{"cpu-count": 1, "disk-count": 1, "disk-size": 50, "memory-size": 1024, "nic-count": 0, "spindle-use": 0},
		"max": map[string]any{"cpu-count": 2, "disk-count": 4, "disk-size": 2048, "memory-size": 4096, "nic-count": 4, "spindle-use": 4}}},
		"std": map[string]any{"memory-size": 1024}}); st != "error" ||
		!strings.Contains(mustJSON(res), "default backend parameters would violate the new instance policy") {
		t.Fatalf("policy the defaults violate: %s %v", st, res)
	}
	if st, res := set(map[string]any{"minmax": "default", "std": "default", "vcpu-ratio": "default"}); st != "success" {
		t.Fatalf("reset: %s %v", st, res)
	}
	if len(e.cfg.Cluster().IPolicy) != 0 {
		t.Fatalf("reset left %v", e.cfg.Cluster().IPolicy)
	}
}
