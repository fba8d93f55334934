package e2e

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/corral/corral/internal/devcluster"
)

const openstackBin = "/usr/bin/openstack"

// TestBaremetalRealClient drives fake-hardware machines of a dev cluster
// with the unchanged openstack client, through the env file dev up writes,
// and with corral baremetal; the rescue password must never show in
// clear in anything the cluster answers, logs or stores.
func TestBaremetalRealClient(t *testing.T) {
	if _, err := os.Stat(openstackBin); err != nil {
		if os.Getenv("CORRAL_REQUIRE_BAREMETAL") == "1" {
			t.Fatalf("%s: %v (CORRAL_REQUIRE_BAREMETAL=1)", openstackBin, err)
		}
		t.Skipf("%s not installed (python3-openstackclient, python3-ironicclient)", openstackBin)
	}
	c := newClusterWith(t, devcluster.Options{Nodes: 0, Hypervisors: []string{"fake"}, WatcherEvery: time.Hour})
	env, err := devcluster.ReadBaremetalEnv(c.st.StateDir)
	if err != nil {
		t.Fatal(err)
	}
	if !contains(env, "OS_AUTH_TYPE=http_basic") || !contains(env, "OS_USERNAME=admin") {
		t.Fatalf("baremetal.env: %v", env)
	}
	if fi, err := os.Stat(filepath.Join(c.st.StateDir, devcluster.BaremetalEnvFile)); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("baremetal.env mode: %v %v", fi, err)
	}
	cache := t.TempDir()
	var answers strings.Builder // everything the cluster answered
	osc := func(args ...string) (string, error) {
		cmd := exec.Command(openstackBin, append([]string{"baremetal"}, args...)...)
		cmd.Env = append(append(os.Environ(), env...), "XDG_CACHE_HOME="+cache, "HOME="+cache)
		out, err := cmd.CombinedOutput()
		answers.Write(out)
		return string(out), err
	}
	mustOSC := func(args ...string) string {
		t.Helper()
		out, err := osc(args...)
		if err != nil {
			t.Fatalf("openstack baremetal %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return out
	}
	state := func(node string, want, target any) {
		t.Helper()
		var n map[string]any
		if err := json.Unmarshal([]byte(mustOSC("node", "show", node, "-f", "json")), &n); err != nil {
			t.Fatal(err)
		}
		if n["provision_state"] != want || n["target_provision_state"] != target {
			t.Fatalf("%s: provision_state %v target %v, want %v %v", node, n["provision_state"], n["target_provision_state"], want, target)
		}
	}

	const pw = "Rescue-Clear-Pw-7731"
	var created map[string]any
	if err := json.Unmarshal([]byte(mustOSC("node", "create", "--driver", "fake-hardware", "--name", "bm1", "-f", "json")), &created); err != nil {
		t.Fatal(err)
	}
	uuid, _ := created["uuid"].(string)
	state("bm1", "enroll", nil)
	mustOSC("node", "manage", "bm1", "--wait", "60")
	state("bm1", "manageable", nil)
	mustOSC("node", "provide", "bm1", "--wait", "60")
	state("bm1", "available", nil)

	// Ports, maintenance, power, on the available machine.
	mustOSC("port", "create", "52:54:00:12:34:56", "--node", uuid)
	if out := mustOSC("port", "list", "--node", uuid, "-f", "value", "-c", "Address"); strings.TrimSpace(out) != "52:54:00:12:34:56" {
		t.Errorf("port list: %q", out)
	}
	mustOSC("node", "maintenance", "set", "bm1", "--reason", "e2e check")
	if out := mustOSC("node", "show", "bm1", "-f", "value", "-c", "maintenance", "-c", "maintenance_reason"); !strings.Contains(out, "True") || !strings.Contains(out, "e2e check") {
		t.Errorf("maintenance set: %q", out)
	}
	mustOSC("node", "maintenance", "unset", "bm1")
	mustOSC("node", "power", "on", "bm1")
	if out := mustOSC("node", "show", "bm1", "-f", "value", "-c", "power_state"); strings.TrimSpace(out) != "power on" {
		t.Errorf("power on: %q", out)
	}
	mustOSC("node", "power", "off", "bm1")
	if out := mustOSC("node", "show", "bm1", "-f", "value", "-c", "power_state"); strings.TrimSpace(out) != "power off" {
		t.Errorf("power off: %q", out)
	}

	// Errors with Ironic's texts.
	wantErr := func(text string, args ...string) {
		t.Helper()
		out, err := osc(args...)
		if err == nil || !strings.Contains(out, text) {
			t.Errorf("openstack baremetal %s: %v\n%s\nwant %q", strings.Join(args, " "), err, out, text)
		}
	}
	wantErr(`The requested action "rescue" can not be performed on node "`+uuid+`" while it is in state "available". (HTTP 400)`,
		"node", "rescue", "bm1", "--rescue-password", pw)
	wantErr("Node no-such-node could not be found. (HTTP 404)", "node", "show", "no-such-node")

	mustOSC("node", "deploy", "bm1", "--wait", "60")
	state("bm1", "active", nil)
	wantErr(`A non-empty "rescue_password" is required when setting target provision state to rescue (HTTP 400)`,
		"node", "rescue", "bm1", "--rescue-password", " ")
	mustOSC("node", "rescue", "bm1", "--rescue-password", pw, "--wait", "60")
	state("bm1", "rescue", nil)
	mustOSC("node", "unrescue", "bm1", "--wait", "60")
	state("bm1", "active", nil)
	mustOSC("node", "undeploy", "bm1", "--wait", "60")
	state("bm1", "available", nil)
	mustOSC("node", "delete", "bm1")
	wantErr("could not be found. (HTTP 404)", "node", "show", uuid)

	// The same walk with corral baremetal, the password from a file.
	pwFile := filepath.Join(t.TempDir(), "pw")
	if err := os.WriteFile(pwFile, []byte(pw+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cli := func(args ...string) string {
		t.Helper()
		out, err := c.corral(append([]string{"baremetal", "node"}, args...)...)
		answers.WriteString(out)
		if err != nil {
			t.Fatalf("corral baremetal node %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return out
	}
	cliState := func(want string) {
		t.Helper()
		var n map[string]any
		if err := json.Unmarshal([]byte(cli("show", "bm2", "-o", "json")), &n); err != nil {
			t.Fatal(err)
		}
		if n["provision_state"] != want || n["target_provision_state"] != nil {
			t.Fatalf("bm2: %v (target %v), want %s", n["provision_state"], n["target_provision_state"], want)
		}
	}
	cli("create", "--driver", "fake-hardware", "--name", "bm2")
	for _, step := range []struct{ verb, want string }{{"manage", "manageable"}, {"provide", "available"}, {"deploy", "active"}, {"rescue", "rescue"},
		{"unrescue", "active"}, {"undeploy", "available"}} {
		args := []string{step.verb, "bm2", "--wait=60"}
		if step.verb == "rescue" {
			args = append(args, "--rescue-password-file", pwFile, "--hash", "sha512")
		}
		if out := cli(args...); !strings.HasSuffix(out, "bm2: "+step.want+"\n") {
			t.Fatalf("%s: %q", step.verb, out)
		}
		cliState(step.want)
	}
	cli("delete", "bm2")

	// Never in clear: answers, daemon logs, job records, the store.
	var leaks []string
	if strings.Contains(answers.String(), pw) {
		leaks = append(leaks, "client output")
	}
	logs, _ := filepath.Glob(filepath.Join(c.st.StateDir, "logs", "*"))
	for _, f := range logs {
		if b, err := os.ReadFile(f); err == nil && strings.Contains(string(b), pw) {
			leaks = append(leaks, f)
		}
	}
	jobs, err := c.corral("job", "list", "--no-headers", "-o", "id")
	if err != nil {
		t.Fatalf("job list: %v\n%s", err, jobs)
	}
	ids := regexp.MustCompile(`\d+`).FindAllString(jobs, -1)
	if len(ids) < 20 {
		t.Fatalf("only %d jobs: %s", len(ids), jobs)
	}
	info, err := c.corral(append([]string{"job", "info"}, ids...)...)
	if err != nil || strings.Contains(info, pw) || !strings.Contains(info, "OP_MACHINE_PROVISION") {
		leaks = append(leaks, "job info")
	}
	backup := filepath.Join(t.TempDir(), "store.db")
	if out, err := c.corral("cluster", "backup", backup); err != nil {
		t.Fatalf("cluster backup: %v\n%s", err, out)
	}
	if b, err := os.ReadFile(backup); err != nil || strings.Contains(string(b), pw) {
		leaks = append(leaks, "store backup")
	}
	if len(leaks) > 0 {
		t.Fatalf("the rescue password shows in clear in: %v", leaks)
	}
}

func contains(l []string, s string) bool {
	for _, x := range l {
		if x == s {
			return true
		}
	}
	return false
}
