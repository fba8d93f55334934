package cmdlib

import (
	"encoding/json"
	"path/filepath"
	"sort"
	"testing"

	"github.com/corral/corral/internal/ecode"
)

// multiAllocResult reads Ganeti's InstanceMultiAllocResponse.
func multiAllocResult(t *testing.T, res []any) (ids []int64, allocatable, failed []string) {
	t.Helper()
	b, _ := json.Marshal(res[0])
	var m struct {
		Jobs        [][2]any `json:"jobs"`
		Allocatable []string `json:"allocatable"`
		Failed      []string `json:"failed"`
	}
	if err := json.Unmarshal(b, &m); err != nil || m.Allocatable == nil || m.Failed == nil || m.Jobs == nil {
		t.Fatalf("result %s is not {jobs, allocatable, failed}: %v", b, err)
	}
	for _, j := range m.Jobs {
		if j[0] != true {
			t.Fatalf("job entry %v is not [true, id]", j)
		}
		ids = append(ids, int64(j[1].(float64)))
	}
	return ids, m.Allocatable, m.Failed
}

func multiAllocEnv(t *testing.T) *env {
	t.Helper()
	e := openEnv(t, filepath.Join(t.TempDir(), "s.db"), newNodeDouble(), true)
	for _, op := range []map[string]any{
		{"OP_ID": "OP_NODE_ADD", "node_name": "n2", "primary_ip": "127.0.0.3"},
		{"OP_ID": "OP_NODE_ADD", "node_name": "n3", "primary_ip": "127.0.0.4"},
	} {
		if st, res := e.run(t, op); st != "success" {
			t.Fatalf("%v: %s %v", op["OP_ID"], st, res)
		}
	}
	return e
}

// bigDiskless is a stopped diskless creation whose memory fills most of a
// node of the double (4096 MiB): one fits on each node.
func bigDiskless(name string) map[string]any {
	return create(name, map[string]any{"disk_template": "diskless", "disks": []any{}, "start": false,
		"beparams": map[string]any{"maxmem": 3000, "minmem": 3000}})
}

func TestMultiAllocPlacesWhatFitsAndSubmitsOneJobEach(t *testing.T) {
	e := multiAllocEnv(t)
	defer e.close()
	instances := []any{bigDiskless("a1"), bigDiskless("a2"), bigDiskless("a3"), bigDiskless("a4")}
	// A dry run places them and submits nothing.
	st, res := e.run(t, map[string]any{"OP_ID": "OP_INSTANCE_MULTI_ALLOC", "instances": instances, "dry_run": true})
	if st != "success" {
		t.Fatalf("dry run: %s %v", st, res)
	}
	if ids, alloc, failed := multiAllocResult(t, res); len(ids) != 0 || len(alloc) != 3 || len(failed) != 1 {
		t.Fatalf("dry run: jobs %v allocatable %v failed %v, want no jobs, 3 placed and 1 failed", ids, alloc, failed)
	}
	if n := len(e.cfg.Instances()); n != 0 {
		t.Fatalf("a dry run made %d instances", n)
	}
	st, res = e.run(t, map[string]any{"OP_ID": "OP_INSTANCE_MULTI_ALLOC", "instances": instances})
	if st != "success" {
		t.Fatalf("multi-alloc: %s %v", st, res)
	}
	ids, alloc, failed := multiAllocResult(t, res)
	if len(ids) != 3 || len(alloc) != 3 || len(failed) != 1 {
		t.Fatalf("jobs %v allocatable %v failed %v, want 3 jobs, 3 placed and 1 failed", ids, alloc, failed)
	}
	e.runChildren(t, ids)
	prim := e.primaries()
	if _, made := prim[failed[0]]; made || len(prim) != 3 {
		t.Fatalf("instances %v: want the 3 placed ones, not %s", prim, failed[0])
	}
	var nodes []string
	for _, name := range alloc {
		nodes = append(nodes, prim[name])
	}
	sort.Strings(nodes)
	if nodes[0] != "n1" || nodes[1] != "n2" || nodes[2] != "n3" {
		t.Errorf("placed on %v, want one instance on each node", nodes)
	}
}

func TestMultiAllocWithNodesGiven(t *testing.T) {
	e := multiAllocEnv(t)
	defer e.close()
	a := bigDiskless("b1")
	a["pnode"] = "n2"
	b := bigDiskless("b2")
	b["pnode"] = "n3"
	st, res := e.run(t, map[string]any{"OP_ID": "OP_INSTANCE_MULTI_ALLOC", "instances": []any{a, b}})
	if st != "success" {
		t.Fatalf("multi-alloc: %s %v", st, res)
	}
	ids, alloc, failed := multiAllocResult(t, res)
	if len(ids) != 2 || len(alloc) != 2 || len(failed) != 0 {
		t.Fatalf("jobs %v allocatable %v failed %v", ids, alloc, failed)
	}
	e.runChildren(t, ids)
	if p := e.primaries(); p["b1"] != "n2" || p["b2"] != "n3" {
		t.Errorf("primaries %v, want b1 on n2 and b2 on n3", p)
	}
}

func TestMultiAllocRefusals(t *testing.T) {
	e := multiAllocEnv(t)
	defer e.close()
	withNode := bigDiskless("c1")
	withNode["pnode"] = "n1"
	unknownNode := bigDiskless("c7")
	unknownNode["pnode"] = "n9"
	withAlloc := bigDiskless("c3")
	withAlloc["iallocator"] = "hail"
	tests := []struct {
		name      string
		instances []any
		want      string
	}{
		{"some nodes", []any{withNode, bigDiskless("c2")}, "providing pnode/snode while others do not"},
		{"duplicates", []any{bigDiskless("c4"), bigDiskless("c4")}, "duplicate instance names: c4"},
		{"iallocator inside", []any{withAlloc}, "iallocator are not allowed"},
		{"not a creation", []any{map[string]any{"OP_ID": "OP_INSTANCE_STARTUP", "instance_name": "c5"}}, "not OP_INSTANCE_CREATE"},
		{"bad creation", []any{map[string]any{"OP_ID": "OP_INSTANCE_CREATE", "instance_name": "c6"}}, "required parameter"},
	}
	for _, tc := range tests {
		st, res := e.run(t, map[string]any{"OP_ID": "OP_INSTANCE_MULTI_ALLOC", "instances": tc.instances})
		checkErr(t, st, res, ecode.Inval, tc.want)
	}
	st, res := e.run(t, map[string]any{"OP_ID": "OP_INSTANCE_MULTI_ALLOC", "instances": []any{unknownNode}})
	checkErr(t, st, res, ecode.NoEnt, "Node 'n9' not known")
	if n := len(e.cfg.Instances()); n != 0 {
		t.Errorf("refused allocations made %d instances", n)
	}
}
