package cmdlib

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/corral/corral/internal/ecode"
)

// refusal is an op that must fail with class and a message containing msg.
type refusal struct {
	name  string
	op    map[string]any
	class ecode.Class
	msg   string
}

func (e *env) expectRefusals(t *testing.T, cases []refusal) {
	t.Helper()
	for _, c := range cases {
		st, res := e.run(t, c.op)
		b, _ := json.Marshal(res)
		if st != "error" || !strings.Contains(string(b), `"`+string(c.class)+`"`) || !strings.Contains(string(b), c.msg) {
			t.Errorf("%s: got %s %s, want %s error containing %q", c.name, st, b, c.class, c.msg)
		}
	}
}

func be(kv ...any) map[string]any {
	m := map[string]any{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i].(string)] = kv[i+1]
	}
	return m
}

func createBE(name string, beparams map[string]any, extra ...any) map[string]any {
	op := create(name, map[string]any{"beparams": beparams, "pnode": "n1"})
	for i := 0; i+1 < len(extra); i += 2 {
		op[extra[i].(string)] = extra[i+1]
	}
	return op
}

// TestCreateBEParamsValidated: vcpus and memory sizes are positive
// integers, minmem is not above maxmem, the values are within the instance
// policy (Ganeti's defaults: memory 128..32768 MiB, 1..8 vcpus), and vcpus
// are within the node's CPUs (4 in the node double) times the vcpu-ratio.
func TestCreateBEParamsValidated(t *testing.T) {
	e := openEnv(t, filepath.Join(t.TempDir(), "s.db"), newNodeDouble(), true)
	defer e.close()
	const inval, nores = ecode.Inval, ecode.NoRes
	e.expectRefusals(t, []refusal{
		{"vcpus=0", createBE("x", be("vcpus", 0)), inval, "Backend parameter 'vcpus' must be a positive integer, got 0"},
		{"vcpus=-2", createBE("x", be("vcpus", -2)), inval, "Backend parameter 'vcpus' must be a positive integer, got -2"},
		{"vcpus=1.5", createBE("x", be("vcpus", 1.5)), inval, "Backend parameter 'vcpus' must be a positive integer, got 1.5"},
		{"vcpus=NaN", createBE("x", be("vcpus", "NaN")), inval, "Backend parameter 'vcpus' must be a positive integer, got NaN"},
		{"vcpus=1e308", createBE("x", be("vcpus", "1e308")), inval, "Backend parameter 'vcpus' must be a positive integer, got 1e308"},
		{"memory=0", createBE("x", be("memory", 0)), inval, "Backend parameter 'memory' must be a positive integer, got 0"},
		{"maxmem=0", createBE("x", be("maxmem", 0)), inval, "Backend parameter 'maxmem' must be a positive integer, got 0"},
		{"minmem=0", createBE("x", be("minmem", 0)), inval, "Backend parameter 'minmem' must be a positive integer, got 0"},
		{"spindle_use=-1", createBE("x", be("spindle_use", -1)), inval, "Backend parameter 'spindle_use' must be a non-negative integer, got -1"},
		{"minmem>maxmem", createBE("x", be("maxmem", 256, "minmem", 512)), inval, "minmem (512 MiB) is larger than maxmem (256 MiB)"},
		{"minmem>default maxmem", createBE("x", be("minmem", 512)), inval, "minmem (512 MiB) is larger than maxmem (128 MiB)"},
		{"vcpus=1000000", createBE("x", be("vcpus", 1000000)), inval,
			"violates policy: cpu-count value 1000000 is not in range [1, 8]"},
		{"vcpus=9", createBE("x", be("vcpus", 9)), inval, "cpu-count value 9 is not in range [1, 8]"},
		{"memory=64", createBE("x", be("memory", 64)), inval, "memory-size value 64 is not in range [128, 32768]"},
		{"memory=65536", createBE("x", be("memory", 65536)), inval, "memory-size value 65536 is not in range [128, 32768]"},
		{"spindle_use=13", createBE("x", be("spindle_use", 13)), inval, "spindle-use value 13 is not in range [1, 12]"},
		{"allocator vcpus=1000000", create("x", map[string]any{"beparams": be("vcpus", 1000000)}), nores,
			"cpu-count value 1000000 is not in range [1, 8]"},
		{"ignore_ipolicy vcpus=17", createBE("x", be("vcpus", 17), "ignore_ipolicy", true), nores,
			"vcpus value 17 is above what node n1 can give an instance: 4 physical CPUs times the group default's vcpu-ratio 4 is 16"},
	})
	if n := len(e.cfg.Instances()); n != 0 {
		t.Fatalf("refused creates left %d instances", n)
	}
	for name, op := range map[string]map[string]any{
		"ok1": createBE("ok1", be("vcpus", 8, "memory", 1024)),
		"ok2": createBE("ok2", be("vcpus", "2", "maxmem", "512", "minmem", "256", "spindle_use", 2)),
		"ok3": createBE("ok3", be("vcpus", 16, "memory", 64), "ignore_ipolicy", true),
		"ok4": create("ok4", nil),
	} {
		if st, res := e.run(t, op); st != "success" {
			t.Errorf("%s: %s %v", name, st, res)
		}
	}
	// A group may widen the policy, and narrow the vcpu-ratio.
	if st, res := e.run(t, map[string]any{"OP_ID": "OP_GROUP_SET_PARAMS", "group_name": "default", "ipolicy": map[string]any{
		"vcpu-ratio": 1.5,
		"minmax": []any{map[string]any{
			"min": map[string]any{"cpu-count": 1, "disk-count": 1, "disk-size": 1, "memory-size": 64, "nic-count": 0, "spindle-use": 0},
			"max": map[string]any{"cpu-count": 64, "disk-count": 16, "disk-size": 1 << 20, "memory-size": 1 << 20, "nic-count": 8, "spindle-use": 12}}},
	}}); st != "success" {
		t.Fatalf("group ipolicy: %s %v", st, res)
	}
	e.expectRefusals(t, []refusal{
		{"vcpus=7 at ratio 1.5", createBE("x", be("vcpus", 7)), nores,
			"vcpus value 7 is above what node n1 can give an instance: 4 physical CPUs times the group default's vcpu-ratio 1.5 is 6"},
		{"vcpus=65", createBE("x", be("vcpus", 65)), inval, "cpu-count value 65 is not in range [1, 64]"},
	})
	if st, res := e.run(t, createBE("ok5", be("vcpus", 6, "memory", 64))); st != "success" {
		t.Errorf("ok5 under the group's policy: %s %v", st, res)
	}
}

// TestModifyBEParamsValidated: the same checks on a change, with minmem
// checked against the policy too, as Ganeti's set-params does.
func TestModifyBEParamsValidated(t *testing.T) {
	e := openEnv(t, filepath.Join(t.TempDir(), "s.db"), newNodeDouble(), true)
	defer e.close()
	if st, res := e.run(t, createBE("web1", be("memory", 256))); st != "success" {
		t.Fatalf("create: %s %v", st, res)
	}
	modify := func(beparams map[string]any, extra ...any) map[string]any {
		op := map[string]any{"OP_ID": "OP_INSTANCE_SET_PARAMS", "instance_name": "web1", "beparams": beparams}
		for i := 0; i+1 < len(extra); i += 2 {
			op[extra[i].(string)] = extra[i+1]
		}
		return op
	}
	const inval, nores = ecode.Inval, ecode.NoRes
	e.expectRefusals(t, []refusal{
		{"vcpus=0", modify(be("vcpus", 0)), inval, "Backend parameter 'vcpus' must be a positive integer, got 0"},
		{"memory=0", modify(be("memory", 0)), inval, "Backend parameter 'memory' must be a positive integer, got 0"},
		{"maxmem=0", modify(be("maxmem", 0)), inval, "Backend parameter 'maxmem' must be a positive integer, got 0"},
		{"vcpus=1000000", modify(be("vcpus", 1000000)), inval,
			"violates policy: cpu-count value 1000000 is not in range [1, 8]"},
		{"vcpus=1000000 forced", modify(be("vcpus", 1000000), "force", true), inval, "cpu-count value 1000000 is not in range [1, 8]"},
		{"maxmem<minmem", modify(be("maxmem", 200)), inval, "minmem (256 MiB) is larger than maxmem (200 MiB)"},
		{"minmem=64", modify(be("minmem", 64)), inval, "memory-size value 64 is not in range [128, 32768]"},
		{"memory=40000", modify(be("memory", 40000)), inval, "memory-size value 40000 is not in range [128, 32768]"},
		{"memory=8192 on 4096", modify(be("memory", 8192)), nores, "Not enough memory on node n1"},
		{"vcpus=17 ignoring the policy", modify(be("vcpus", 17), "ignore_ipolicy", true), nores,
			"vcpus value 17 is above what node n1 can give an instance: 4 physical CPUs times the group default's vcpu-ratio 4 is 16"},
	})
	if i, _ := e.cfg.Instance("web1"); len(i.BEParams) != 2 || i.BEParams["maxmem"] != 256.0 {
		t.Fatalf("refused changes changed beparams: %v", i.BEParams)
	}
	for _, ok := range []map[string]any{
		modify(be("vcpus", 8)), modify(be("memory", 512, "vcpus", "2")), modify(be("vcpus", 12), "ignore_ipolicy", true),
	} {
		if st, res := e.run(t, ok); st != "success" {
			t.Errorf("%v: %s %v", ok["beparams"], st, res)
		}
	}
}

// TestClusterBEParamsValidated: the defaults every instance inherits obey
// the same rules and the cluster's policy.
func TestClusterBEParamsValidated(t *testing.T) {
	e := openEnv(t, filepath.Join(t.TempDir(), "s.db"), newNodeDouble(), true)
	defer e.close()
	set := func(beparams map[string]any) map[string]any {
		return map[string]any{"OP_ID": "OP_CLUSTER_SET_PARAMS", "beparams": beparams}
	}
	serial := e.cfg.Serial()
	e.expectRefusals(t, []refusal{
		{"vcpus=0", set(be("vcpus", 0)), ecode.Inval, "Backend parameter 'vcpus' must be a positive integer, got 0"},
		{"memory=0", set(be("memory", 0)), ecode.Inval, "Backend parameter 'memory' must be a positive integer, got 0"},
		{"vcpus=1000000", set(be("vcpus", 1000000)), ecode.Inval,
			"The cluster's default backend parameters would violate its instance policy: cpu-count value 1000000 is not in range [1, 8]"},
		{"minmem>maxmem", set(be("minmem", 256)), ecode.Inval, "minmem (256 MiB) is larger than maxmem (128 MiB)"},
	})
	if e.cfg.Serial() != serial {
		t.Fatal("refused changes changed the cluster")
	}
	if st, res := e.run(t, set(be("vcpus", 2, "memory", 512))); st != "success" {
		t.Fatalf("vcpus=2 memory=512: %s %v", st, res)
	}
	if c := e.cfg.Cluster(); c.BEParams["vcpus"] != 2.0 || c.BEParams["minmem"] != 512.0 {
		t.Fatalf("cluster beparams %v", c.BEParams)
	}
}

// TestStartupNeedsFreeMemory: a start checks the node's free memory (4096
// MiB in the node double) for the instance's memory, including temporary
// beparams, and refuses bad temporary values.
func TestStartupNeedsFreeMemory(t *testing.T) {
	e := openEnv(t, filepath.Join(t.TempDir(), "s.db"), newNodeDouble(), true)
	defer e.close()
	if st, res := e.run(t, createBE("web1", be("memory", 256), "start", false)); st != "success" {
		t.Fatalf("create: %s %v", st, res)
	}
	start := func(beparams map[string]any) map[string]any {
		return map[string]any{"OP_ID": "OP_INSTANCE_STARTUP", "instance_name": "web1", "beparams": beparams}
	}
	e.expectRefusals(t, []refusal{
		{"memory=8192", start(be("memory", 8192)), ecode.NoRes,
			"Not enough memory on node n1 for starting instance web1: needed 8192 MiB, available 4096 MiB"},
		{"vcpus=0", start(be("vcpus", 0)), ecode.Inval, "Backend parameter 'vcpus' must be a positive integer, got 0"},
		{"minmem>maxmem", start(be("minmem", 512)), ecode.Inval, "minmem (512 MiB) is larger than maxmem (256 MiB)"},
	})
	if st, res := e.run(t, start(be())); st != "success" {
		t.Fatalf("start: %s %v", st, res)
	}
}
