package cmdlib

import (
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/corral/corral/internal/config"
	"github.com/corral/corral/internal/ecode"
	"github.com/corral/corral/internal/nodeapi"
)

// validateCalls records the OS verify requests a node double receives.
type validateCalls struct {
	mu   sync.Mutex
	args []nodeapi.OSValidateArgs
}

func (v *validateCalls) hook(nd *nodeDouble) {
	nd.withArgs = func(method string, args any) {
		if method == nodeapi.OSValidate {
			v.mu.Lock()
			v.args = append(v.args, args.(nodeapi.OSValidateArgs))
			v.mu.Unlock()
		}
	}
}

func (v *validateCalls) last(t *testing.T) nodeapi.OSValidateArgs {
	t.Helper()
	v.mu.Lock()
	defer v.mu.Unlock()
	if len(v.args) == 0 {
		t.Fatal("the OS verify script was not asked for")
	}
	return v.args[len(v.args)-1]
}

func (v *validateCalls) count() int {
	v.mu.Lock()
	defer v.mu.Unlock()
	return len(v.args)
}

// TestCreateRunsOSVerifyAndRefusesItsRejection: create asks the node to run
// the OS's verify script with the filled parameters (the cluster's for
// OS+variant overriding those for the OS), private ones apart; a rejection
// fails the create with Ganeti's text and no instance is added.
func TestCreateRunsOSVerifyAndRefusesItsRejection(t *testing.T) {
	nd := newNodeDouble()
	var calls validateCalls
	calls.hook(nd)
	e := openEnv(t, filepath.Join(t.TempDir(), "s.db"), nd, true)
	defer e.close()
	if st, res := e.run(t, map[string]any{"OP_ID": "OP_CLUSTER_SET_PARAMS",
		"osparams": map[string]any{"tiny": map[string]any{"marker": "from-os"}, "tiny+default": map[string]any{"marker": "from-variant"}}}); st != "success" {
		t.Fatalf("set cluster osparams: %s %v", st, res)
	}
	if st, res := e.run(t, create("web1", map[string]any{"osparams_private": map[string]any{"marker": "p-value"}, "osparams": map[string]any{}})); st != "success" {
		t.Fatalf("create: %s %v", st, res)
	}
	got := calls.last(t)
	if got.OS != "tiny+default" || !got.Required || got.Params["marker"] != "from-variant" || got.Private["marker"] != "p-value" {
		t.Fatalf("verify request: %+v", got)
	}
	inst, _ := e.cfg.Instance("web1")
	if inst.OSParamsPriv["marker"] != "p-value" {
		t.Fatalf("private parameters not stored: %v", inst.OSParamsPriv)
	}
	if spec := e.proc.Spec(inst); spec.OSParams["marker"] != "from-variant" || spec.OSParamsPrivate["marker"] != "p-value" {
		t.Fatalf("spec: public %v private %v", spec.OSParams, spec.OSParamsPrivate)
	}

	nd.mu.Lock()
	nd.fail = map[string]error{nodeapi.OSValidate: ecode.ExecErrorf("OS validation script failed (exited with exit code 1), output: bad marker")}
	nd.mu.Unlock()
	st, res := e.run(t, create("web2", map[string]any{"osparams": map[string]any{"marker": "bad"}}))
	if st != "error" || !strings.Contains(mustJSON(res), "OS Parameters validation failed on node ") ||
		!strings.Contains(mustJSON(res), "OS validation script failed (exited with exit code 1), output: bad marker") {
		t.Fatalf("create with a rejected value: %s %v", st, res)
	}
	if _, ok := e.cfg.Instance("web2"); ok {
		t.Fatal("a refused create added the instance")
	}
}

// TestModifyAndReinstallPrivateOSParams: Ganeti's client sends an empty
// osparams_private with every change; a non-empty one is checked by the
// verify script, stored, listed without its value, and a name also given
// in osparams is refused with Ganeti's text.
func TestModifyAndReinstallPrivateOSParams(t *testing.T) {
	nd := newNodeDouble()
	var calls validateCalls
	calls.hook(nd)
	e := openEnv(t, filepath.Join(t.TempDir(), "s.db"), nd, true)
	defer e.close()
	if st, res := e.run(t, create("web1", map[string]any{"start": false})); st != "success" {
		t.Fatalf("create: %s %v", st, res)
	}
	op := map[string]any{"OP_ID": "OP_INSTANCE_SET_PARAMS", "instance_name": "web1",
		"beparams": map[string]any{"vcpus": 2}, "osparams_private": map[string]any{}}
	before := calls.count()
	if st, res := e.run(t, op); st != "success" {
		t.Fatalf("modify with an empty osparams_private: %s %v", st, res)
	}
	if calls.count() != before {
		t.Fatal("a change without OS parameters ran the verify script")
	}
	op = map[string]any{"OP_ID": "OP_INSTANCE_SET_PARAMS", "instance_name": "web1", "osparams_private": map[string]any{"marker": "m-secret"}}
	st, res := e.run(t, op)
	if st != "success" {
		t.Fatalf("modify private: %s %v", st, res)
	}
	if j := mustJSON(res); strings.Contains(j, "m-secret") || !strings.Contains(j, `["os_private/marker","\u003credacted\u003e"]`) {
		t.Fatalf("modify result: %s", j)
	}
	if got := calls.last(t); got.Private["marker"] != "m-secret" {
		t.Fatalf("verify did not see the private value: %+v", got)
	}
	inst, _ := e.cfg.Instance("web1")
	if inst.OSParamsPriv["marker"] != "m-secret" {
		t.Fatalf("not stored: %v", inst.OSParamsPriv)
	}
	if pub := publicOSParams(e.cfg.Cluster(), inst); pub["marker"] != "<redacted>" {
		t.Fatalf("public view: %v", pub)
	}

	op = map[string]any{"OP_ID": "OP_INSTANCE_SET_PARAMS", "instance_name": "web1",
		"osparams": map[string]any{"marker": "a"}, "osparams_private": map[string]any{"marker": "b"}}
	if st, res := e.run(t, op); st != "error" || !strings.Contains(mustJSON(res), "OS parameters repeated multiple times: marker") {
		t.Fatalf("same name public and private: %s %v", st, res)
	}

	op = map[string]any{"OP_ID": "OP_INSTANCE_REINSTALL", "instance_name": "web1", "osparams_private": map[string]any{"marker": "r-secret"}}
	if st, res := e.run(t, op); st != "success" {
		t.Fatalf("reinstall with private parameters: %s %v", st, res)
	}
	inst, _ = e.cfg.Instance("web1")
	if inst.OSParamsPriv["marker"] != "r-secret" {
		t.Fatalf("reinstall did not store: %v", inst.OSParamsPriv)
	}
	if got := calls.last(t); got.Private["marker"] != "r-secret" {
		t.Fatalf("reinstall verify: %+v", got)
	}

	nd.mu.Lock()
	nd.fail = map[string]error{nodeapi.OSValidate: errors.New("OS validation script failed (exited with exit code 2), output: no")}
	nd.mu.Unlock()
	op = map[string]any{"OP_ID": "OP_INSTANCE_SET_PARAMS", "instance_name": "web1", "osparams": map[string]any{"marker": "rejected"}}
	if st, res := e.run(t, op); st != "error" || !strings.Contains(mustJSON(res), "OS Parameters validation failed on node") {
		t.Fatalf("modify with a rejected value: %s %v", st, res)
	}
	inst, _ = e.cfg.Instance("web1")
	if inst.OSParams["marker"] == "rejected" {
		t.Fatal("a rejected value was stored")
	}
}

// TestClusterOSHVParams: os_hvp sets hypervisor parameters for the
// instances of one OS (the OS+variant's over the OS's, the instance's own
// over both), "default" resets one, and unknown hypervisors or parameters
// are refused; hidden and blacklisted follow their add/remove lists and a
// blacklisted OS is refused on create with Ganeti's text.
func TestClusterOSHVParams(t *testing.T) {
	e := openEnv(t, filepath.Join(t.TempDir(), "s.db"), newNodeDouble(), true)
	defer e.close()
	set := func(osHVP map[string]any) (string, []any) {
		return e.run(t, map[string]any{"OP_ID": "OP_CLUSTER_SET_PARAMS", "os_hvp": osHVP})
	}
	if st, res := set(map[string]any{"tiny": map[string]any{"fake": map[string]any{"migration_downtime": "10"}},
		"tiny+other": map[string]any{"fake": map[string]any{"migration_downtime": "20"}}}); st != "success" {
		t.Fatalf("set os_hvp: %s %v", st, res)
	}
	if st, res := e.run(t, create("web1", map[string]any{"start": false})); st != "success" {
		t.Fatalf("create: %s %v", st, res)
	}
	inst, _ := e.cfg.Instance("web1")
	if got := e.proc.Spec(inst).HVParams["migration_downtime"]; got != "10" {
		t.Fatalf("instance of tiny+default: migration_downtime %q, want the OS's 10", got)
	}
	inst.OS = "tiny+other"
	if got := e.proc.Spec(inst).HVParams["migration_downtime"]; got != "20" {
		t.Fatalf("instance of tiny+other: migration_downtime %q, want the variant's", got)
	}
	inst.HVParams = config.Params{"migration_downtime": "30"}
	if got := e.proc.Spec(inst).HVParams["migration_downtime"]; got != "30" {
		t.Fatalf("the instance's own value must win: %q", got)
	}
	if st, res := set(map[string]any{"tiny": map[string]any{"fake": map[string]any{"migration_downtime": "default"}}}); st != "success" {
		t.Fatalf("reset: %s %v", st, res)
	}
	if c := e.cfg.Cluster(); c.OSHVParams["tiny"] != nil || c.OSHVParams["tiny+other"]["fake"]["migration_downtime"] != "20" {
		t.Fatalf("after reset: %v", c.OSHVParams)
	}
	if st, res := set(map[string]any{"tiny": map[string]any{"kvm9": map[string]any{}}}); st != "error" || !strings.Contains(mustJSON(res), "Unknown hypervisor 'kvm9'") {
		t.Fatalf("unknown hypervisor: %s %v", st, res)
	}
	if st, res := set(map[string]any{"tiny": map[string]any{"fake": map[string]any{"nosuch": "1"}}}); st != "error" || !strings.Contains(mustJSON(res), "Unknown hypervisor parameter 'nosuch'") {
		t.Fatalf("unknown parameter: %s %v", st, res)
	}

	if st, res := e.run(t, map[string]any{"OP_ID": "OP_CLUSTER_SET_PARAMS", "blacklisted_os": []any{[]any{"add", "tiny+default"}},
		"hidden_os": []any{[]any{"add", "tiny"}}}); st != "success" {
		t.Fatalf("blacklist: %s %v", st, res)
	}
	if st, res := e.run(t, create("web2", nil)); st != "error" || !strings.Contains(mustJSON(res), "Guest OS 'tiny+default' is not allowed for installation") {
		t.Fatalf("create of a blacklisted OS: %s %v", st, res)
	}
	if c := e.cfg.Cluster(); !slices.Contains(c.HiddenOS, "tiny") {
		t.Fatalf("hidden: %v", c.HiddenOS)
	}
}

// TestClusterPrivateOSParams: osparams_private_cluster gives an OS's
// instances private parameters under their own, passed to the scripts
// apart from the public ones and shown redacted.
func TestClusterPrivateOSParams(t *testing.T) {
	nd := newNodeDouble()
	var calls validateCalls
	calls.hook(nd)
	e := openEnv(t, filepath.Join(t.TempDir(), "s.db"), nd, true)
	defer e.close()
	if st, res := e.run(t, map[string]any{"OP_ID": "OP_CLUSTER_SET_PARAMS",
		"osparams_private_cluster": map[string]any{"tiny": map[string]any{"marker": "cluster-private"}}}); st != "success" {
		t.Fatalf("set: %s %v", st, res)
	}
	if st, res := e.run(t, create("web1", map[string]any{"start": false})); st != "success" {
		t.Fatalf("create: %s %v", st, res)
	}
	if got := calls.last(t); got.Private["marker"] != "cluster-private" || got.Params["marker"] != "" {
		t.Fatalf("verify request: %+v", got)
	}
	inst, _ := e.cfg.Instance("web1")
	if spec := e.proc.Spec(inst); spec.OSParamsPrivate["marker"] != "cluster-private" || spec.OSParams["marker"] != "" {
		t.Fatalf("spec: public %v private %v", spec.OSParams, spec.OSParamsPrivate)
	}
	if pub := publicOSParams(e.cfg.Cluster(), inst); pub["marker"] != "<redacted>" {
		t.Fatalf("public view: %v", pub)
	}
	if st, res := e.run(t, map[string]any{"OP_ID": "OP_CLUSTER_SET_PARAMS",
		"osparams_private_cluster": map[string]any{"tiny": map[string]any{"marker": "default"}}}); st != "success" {
		t.Fatalf("reset: %s %v", st, res)
	}
	if c := e.cfg.Cluster(); len(c.OSParamsPrivate) != 0 {
		t.Fatalf("after reset: %v", c.OSParamsPrivate)
	}
}
