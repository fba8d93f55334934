package bmc

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/corral/corral/internal/ecode"
)

func testMachine(t *testing.T) *Machine {
	t.Helper()
	m, err := Create(filepath.Join(t.TempDir(), "m1"), Config{Name: "m1", Kernel: "/k", Initrd: "/i"})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestConfigValidation(t *testing.T) {
	bad := []Config{
		{Name: ""}, {Name: "../x"}, {Name: "a b"},
		{Name: "a", Network: "bridge"},
		{Name: "a", Network: "user", MAC: "52:54:00"},
		{Name: "a", Network: "tap", MAC: "52:54:00:00:00:01"},
		{Name: "a", Kernel: "/k"},
		{Name: "a", Disk: "/x\n-drive"},
	}
	for _, c := range bad {
		if err := c.Validate(); ecode.ClassOf(err) != ecode.Inval {
			t.Errorf("%+v: %v", c, err)
		}
	}
	if _, err := Open(t.TempDir()); ecode.ClassOf(err) != ecode.NoEnt {
		t.Errorf("open of a non-machine directory: %v", err)
	}
}

func TestChassisProtocolBootDevice(t *testing.T) {
	m := testMachine(t)
	ctx := context.Background()
	var out bytes.Buffer
	if err := ChassisGet(m, []string{"power", "boot"}, &out); err != nil {
		t.Fatal(err)
	}
	if out.String() != "power:0\nboot:default\n" {
		t.Errorf("fresh machine: %q", out.String())
	}
	for in, want := range map[string]string{"pxe": "pxe", "cdrom": "cdrom", "bios": "bios", "default": "default", "none": "default"} {
		if err := ChassisSet(ctx, m, []string{"boot", in}); err != nil {
			t.Fatal(err)
		}
		out.Reset()
		ChassisGet(m, []string{"boot"}, &out)
		if out.String() != "boot:"+want+"\n" {
			t.Errorf("set boot %s: get says %q", in, out.String())
		}
	}
	for _, bad := range [][]string{{"boot"}, {"boot", "floppy"}, {"power", "2"}, {"fan", "1"}} {
		if err := ChassisSet(ctx, m, bad); err == nil {
			t.Errorf("set %v accepted", bad)
		}
	}
	// Off stays off: reset and soft-off need a running machine.
	if err := ChassisSet(ctx, m, []string{"reset", "1", "shutdown", "1", "power", "0"}); err != nil {
		t.Fatal(err)
	}
}

func TestQemuArgsFollowBootDevice(t *testing.T) {
	m := testMachine(t)
	m.Config.Network, m.Config.MAC = "user", "52:54:00:12:34:56"
	m.Config.ISO = "/srv/a,b.iso"
	args, err := m.qemuArgs(BootNone, Media{})
	if err != nil {
		t.Fatal(err)
	}
	line := strings.Join(args, " ")
	for _, want := range []string{"-accel tcg", "-kernel /k -initrd /i", "file=/srv/a,,b.iso", "-daemonize", "mac=52:54:00:12:34:56"} {
		if !strings.Contains(line, want) {
			t.Errorf("disk boot lacks %q: %s", want, line)
		}
	}
	args, _ = m.qemuArgs(BootCDROM, Media{Inserted: true, Path: "/m/cd.iso"})
	line = strings.Join(args, " ")
	if !strings.Contains(line, "-boot order=d") || !strings.Contains(line, "file=/m/cd.iso") || strings.Contains(line, "-kernel") {
		t.Errorf("cdrom boot: %s", line)
	}
	args, _ = m.qemuArgs(BootPXE, Media{})
	if line = strings.Join(args, " "); !strings.Contains(line, "-boot order=n") {
		t.Errorf("pxe boot: %s", line)
	}
	m.Config.Network = ""
	if _, err := m.qemuArgs(BootPXE, Media{}); ecode.ClassOf(err) != ecode.State {
		t.Errorf("pxe without a network card: %v", err)
	}
}

func TestIPMISimConfig(t *testing.T) {
	dir := t.TempDir()
	lan, emu, err := WriteIPMISimConfig(dir, IPMISimConfig{Port: 9623, User: "admin", Password: "pw-123",
		ChassisControl: []string{"/usr/bin/corral-bmc", "chassis", "/srv/m1"}})
	if err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(lan)
	for _, want := range []string{"addr 127.0.0.1 9623", `chassis_control "/usr/bin/corral-bmc chassis /srv/m1"`, `user 2 true "admin" "pw-123" admin`} {
		if !strings.Contains(string(data), want) {
			t.Errorf("lan.conf lacks %q:\n%s", want, data)
		}
	}
	if st, _ := os.Stat(lan); st.Mode().Perm() != 0o600 {
		t.Errorf("lan.conf mode %v", st.Mode())
	}
	if e, _ := os.ReadFile(emu); !strings.Contains(string(e), "mc_enable 0x20") {
		t.Errorf("emu: %s", e)
	}
	if strings.Contains(string(data), "sol ") {
		t.Errorf("lan.conf has SOL without a bridge:\n%s", data)
	}
	lan, _, err = WriteIPMISimConfig(t.TempDir(), IPMISimConfig{Port: 9623, User: "admin", Password: "pw-123",
		ChassisControl: []string{"/usr/bin/corral-bmc"}, SOL: "127.0.0.1:7001"})
	if err != nil {
		t.Fatal(err)
	}
	if data, _ := os.ReadFile(lan); !strings.Contains(string(data), `  sol "tcp:127.0.0.1:7001" 115200`+"\n") {
		t.Errorf("lan.conf lacks the SOL line:\n%s", data)
	}
	for _, c := range []IPMISimConfig{
		{Port: 1, User: "admin", Password: `p"w`, ChassisControl: []string{"x"}},
		{Port: 1, User: "admin", Password: "this-password-is-too-long", ChassisControl: []string{"x"}},
		{Port: 1, User: "admin", Password: "pw", ChassisControl: []string{"/a b/corral-bmc"}},
		{Port: 0, User: "admin", Password: "pw", ChassisControl: []string{"x"}},
		{Port: 1, User: "admin", Password: "pw", ChassisControl: []string{"x"}, SOL: "127.0.0.1"},
		{Port: 1, User: "admin", Password: "pw", ChassisControl: []string{"x"}, SOL: "[::1]:7000"},
		{Port: 1, User: "admin", Password: "pw", ChassisControl: []string{"x"}, SOL: "host:7000"},
		{Port: 1, User: "admin", Password: "pw", ChassisControl: []string{"x"}, SOL: "127.0.0.1:70000"},
	} {
		_, _, err := WriteIPMISimConfig(dir, c)
		if err == nil {
			t.Errorf("%+v accepted", c)
		} else if c.Password != "pw" && strings.Contains(err.Error(), c.Password) {
			t.Errorf("error shows the password: %v", err)
		}
	}
}

func redfishRequest(t *testing.T, h http.Handler, method, path, user, body string) (int, map[string]any) {
	t.Helper()
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	if user != "" {
		req.SetBasicAuth(user, "pw")
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	var out map[string]any
	data, _ := io.ReadAll(rec.Body)
	if len(data) > 0 {
		if err := json.Unmarshal(data, &out); err != nil {
			t.Fatalf("%s %s: not JSON: %s", method, path, data)
		}
	}
	return rec.Code, out
}

func TestRedfishTreeAndBootOverride(t *testing.T) {
	m := testMachine(t)
	h := &Redfish{Machines: map[string]*Machine{"m1": m}, User: "admin", Password: "pw"}
	if code, root := redfishRequest(t, h, "GET", "/redfish/v1/", "", ""); code != 200 || root["Systems"] == nil {
		t.Fatalf("service root: %d %v", code, root)
	}
	if code, _ := redfishRequest(t, h, "GET", "/redfish/v1/Systems", "", ""); code != 401 {
		t.Errorf("systems without credentials: %d", code)
	}
	if code, _ := redfishRequest(t, h, "GET", "/redfish/v1/Systems", "intruder", ""); code != 401 {
		t.Errorf("systems with a wrong user: %d", code)
	}
	code, coll := redfishRequest(t, h, "GET", "/redfish/v1/Systems", "admin", "")
	if code != 200 || coll["Members@odata.count"] != float64(1) {
		t.Fatalf("systems: %d %v", code, coll)
	}
	code, sys := redfishRequest(t, h, "GET", "/redfish/v1/Systems/m1", "admin", "")
	if code != 200 || sys["PowerState"] != "Off" || sys["Boot"].(map[string]any)["BootSourceOverrideEnabled"] != "Disabled" {
		t.Fatalf("system: %d %v", code, sys)
	}
	code, _ = redfishRequest(t, h, "PATCH", "/redfish/v1/Systems/m1", "admin", `{"Boot":{"BootSourceOverrideTarget":"Pxe","BootSourceOverrideEnabled":"Continuous"}}`)
	if b, _ := m.BootOverride(); code != 204 || b != (BootOverride{Device: BootPXE, Persistent: true}) {
		t.Fatalf("patch: %d, override %+v", code, b)
	}
	for _, body := range []string{`{"Boot":{"BootSourceOverrideTarget":"Floppy"}}`, `{"Boot":{"BootSourceOverrideEnabled":"Sometimes"}}`, `{"Name":"x"}`, `{`} {
		if code, _ := redfishRequest(t, h, "PATCH", "/redfish/v1/Systems/m1", "admin", body); code != 400 {
			t.Errorf("patch %s: %d", body, code)
		}
	}
	if code, _ := redfishRequest(t, h, "POST", "/redfish/v1/Systems/m1/Actions/ComputerSystem.Reset", "admin", `{"ResetType":"Nmi"}`); code != 400 {
		t.Errorf("reset Nmi: %d", code)
	}
	if code, _ := redfishRequest(t, h, "GET", "/redfish/v1/Systems/m2", "admin", ""); code != 404 {
		t.Errorf("unknown system: %d", code)
	}
	code, vm := redfishRequest(t, h, "GET", "/redfish/v1/Managers/m1/VirtualMedia/Cd", "admin", "")
	if code != 200 || vm["Inserted"] != false {
		t.Fatalf("virtual cd: %d %v", code, vm)
	}
	iso := filepath.Join(t.TempDir(), "x.iso")
	os.WriteFile(iso, []byte("cd"), 0o644)
	code, _ = redfishRequest(t, h, "POST", "/redfish/v1/Managers/m1/VirtualMedia/Cd/Actions/VirtualMedia.InsertMedia", "admin", `{"Image":"file://`+iso+`"}`)
	if md, _ := m.Media(); code != 204 || !md.Inserted || md.Path != iso {
		t.Fatalf("insert: %d %+v", code, md)
	}
	if code, _ := redfishRequest(t, h, "POST", "/redfish/v1/Managers/m1/VirtualMedia/Cd/Actions/VirtualMedia.InsertMedia", "admin", `{"Image":"ftp://x/y.iso"}`); code != 400 {
		t.Errorf("insert ftp: %d", code)
	}
	code, _ = redfishRequest(t, h, "POST", "/redfish/v1/Managers/m1/VirtualMedia/Cd/Actions/VirtualMedia.EjectMedia", "admin", `{}`)
	if md, _ := m.Media(); code != 204 || md.Inserted {
		t.Fatalf("eject: %d %+v", code, md)
	}
}
