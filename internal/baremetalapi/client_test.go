package baremetalapi

import (
	"context"
	"encoding/json"
	"encoding/pem"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/corral/corral/internal/apifront"
	"github.com/corral/corral/internal/cryptpw"
)

const openstackCLI = "/usr/bin/openstack"

// realClient runs the unchanged `openstack` command against srv, as an
// operator would, with its cache and config in a temporary home.
type realClient struct {
	t    *testing.T
	srv  *httptest.Server
	ca   string
	home string
	auth []string
}

func newRealClient(t *testing.T, h *Handler, auth ...string) *realClient {
	t.Helper()
	if _, err := os.Stat(openstackCLI); err != nil {
		if os.Getenv("CORRAL_REQUIRE_BAREMETAL") == "1" {
			t.Fatalf("%s is missing and CORRAL_REQUIRE_BAREMETAL=1", openstackCLI)
		}
		t.Skipf("%s is not installed (python3-openstackclient, python3-ironicclient)", openstackCLI)
	}
	srv := httptest.NewTLSServer(h)
	t.Cleanup(srv.Close)
	dir := t.TempDir()
	ca := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	if len(auth) == 0 {
		auth = []string{"--os-auth-type", "none"}
	}
	return &realClient{t: t, srv: srv, ca: ca, home: dir, auth: auth}
}

func (c *realClient) run(args ...string) (string, error) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	full := append(append(append([]string{}, c.auth...), "--os-endpoint", c.srv.URL, "--os-cacert", c.ca), args...)
	cmd := exec.CommandContext(ctx, openstackCLI, full...)
	cmd.Env = []string{"HOME=" + c.home, "XDG_CACHE_HOME=" + filepath.Join(c.home, "cache"),
		"XDG_CONFIG_HOME=" + filepath.Join(c.home, "config"), "PATH=/usr/bin:/bin", "LANG=C.UTF-8", "SHELL=/bin/sh"}
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func (c *realClient) mustRun(args ...string) string {
	c.t.Helper()
	out, err := c.run(args...)
	if err != nil {
		c.t.Fatalf("openstack %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

func (c *realClient) jsonOut(v any, args ...string) {
	c.t.Helper()
	out := c.mustRun(append(args, "-f", "json")...)
	if err := json.Unmarshal([]byte(out), v); err != nil {
		c.t.Fatalf("openstack %s: not JSON: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// TestRealOpenstackClient drives the API with the openstack client of the
// distribution, catching any shape the client does not accept.
func TestRealOpenstackClient(t *testing.T) {
	be := newFakeBackend()
	c := newRealClient(t, NewHandler(Config{Backend: be}))

	var created map[string]any
	c.jsonOut(&created, "baremetal", "node", "create", "--driver", "fake-hardware", "--name", "bm1",
		"--driver-info", "ipmi_password=IPMIPW", "--property", "cpus=2")
	uuid, _ := created["uuid"].(string)
	if uuid == "" || created["provision_state"] != "enroll" || created["name"] != "bm1" {
		t.Fatalf("create: %v", created)
	}
	var list []map[string]any
	c.jsonOut(&list, "baremetal", "node", "list")
	if len(list) != 1 || list[0]["UUID"] != uuid || list[0]["Provisioning State"] != "enroll" {
		t.Fatalf("list: %v", list)
	}
	c.jsonOut(&list, "baremetal", "node", "list", "--long")
	if len(list) != 1 || list[0]["Driver"] != "fake-hardware" {
		t.Fatalf("list --long: %v", list)
	}
	for _, verb := range [][]string{{"manage", "bm1", "--wait", "30"}, {"provide", "bm1"}, {"deploy", "bm1"}} {
		c.mustRun(append([]string{"baremetal", "node"}, verb...)...)
	}
	const clear = "Resc-ue-Pw-1"
	c.mustRun("baremetal", "node", "rescue", "bm1", "--rescue-password", clear)
	if h := be.lastArgs.RescuePasswordHash; !strings.HasPrefix(h, "$5$") || !cryptpw.Verify(h, clear) {
		t.Fatalf("backend got %q for the rescue password", h)
	}
	var shown map[string]any
	c.jsonOut(&shown, "baremetal", "node", "show", "bm1")
	raw, _ := json.Marshal(shown)
	if shown["provision_state"] != "rescue" || strings.Contains(string(raw), clear) || strings.Contains(string(raw), "IPMIPW") ||
		strings.Contains(string(raw), be.lastArgs.RescuePasswordHash) {
		t.Fatalf("show: %s", raw)
	}
	// Errors reach the operator with Ironic's texts.
	out, err := c.run("baremetal", "node", "provide", "bm1")
	if err == nil || !strings.Contains(out, `can not be performed on node "`+uuid+`" while it is in state "rescue". (HTTP 400)`) {
		t.Errorf("invalid transition: %v\n%s", err, out)
	}
	out, err = c.run("baremetal", "node", "show", "nope")
	if err == nil || !strings.Contains(out, "Node nope could not be found. (HTTP 404)") {
		t.Errorf("unknown node: %v\n%s", err, out)
	}
	c.mustRun("baremetal", "node", "set", "bm1", "--driver-info", "ipmi_address=10.0.0.7")
	if be.machines[uuid].DriverInfo["ipmi_address"] != "10.0.0.7" || be.machines[uuid].DriverInfo["ipmi_password"] != "IPMIPW" {
		t.Errorf("node set: %v", be.machines[uuid].DriverInfo)
	}
	var drivers []map[string]any
	c.jsonOut(&drivers, "baremetal", "driver", "list")
	if len(drivers) != 2 {
		t.Errorf("driver list: %v", drivers)
	}
	c.mustRun("baremetal", "port", "create", "52:54:00:aa:bb:01", "--node", uuid)
	var ports []map[string]any
	c.jsonOut(&ports, "baremetal", "port", "list", "--node", "bm1")
	if len(ports) != 1 || ports[0]["Address"] != "52:54:00:aa:bb:01" {
		t.Errorf("port list: %v", ports)
	}
}

// TestRealOpenstackClientHTTPBasic logs in with keystoneauth's http_basic
// plugin against a bcrypt htpasswd file.
func TestRealOpenstackClientHTTPBasic(t *testing.T) {
	hash, err := bcrypt.GenerateFromPassword([]byte("p4ss"), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	file, err := apifront.ParseHTPasswd([]byte("u:" + string(hash) + "\n"))
	if err != nil {
		t.Fatal(err)
	}
	h := NewHandler(Config{Backend: newFakeBackend(), Auth: apifront.NewHTPasswdAuth(Realm, file)})
	good := newRealClient(t, h, "--os-auth-type", "http_basic", "--os-username", "u", "--os-password", "p4ss")
	good.mustRun("baremetal", "node", "create", "--driver", "fake-hardware", "--name", "bm1")
	if out := good.mustRun("baremetal", "node", "list", "-f", "value", "-c", "Name"); strings.TrimSpace(out) != "bm1" {
		t.Errorf("list as u: %q", out)
	}
	bad := &realClient{t: t, srv: good.srv, ca: good.ca, home: good.home,
		auth: []string{"--os-auth-type", "http_basic", "--os-username", "u", "--os-password", "wrong"}}
	if out, err := bad.run("baremetal", "node", "list"); err == nil || !strings.Contains(out, "401") {
		t.Errorf("a wrong password was let in: %v\n%s", err, out)
	}
}
