package driver

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/corral/corral/internal/ecode"
)

func TestNewRefusesBadDriverInfoNamingTheKey(t *testing.T) {
	cases := []struct {
		driver string
		info   map[string]any
		key    string
	}{
		{DriverIPMI, map[string]any{}, "ipmi_address"},
		{DriverIPMI, map[string]any{"ipmi_address": ""}, "ipmi_address"},
		{DriverIPMI, map[string]any{"ipmi_address": "-oProxy=x"}, "ipmi_address"},
		{DriverIPMI, map[string]any{"ipmi_address": "10.0.0.1", "ipmi_port": "http"}, "ipmi_port"},
		{DriverIPMI, map[string]any{"ipmi_address": "10.0.0.1", "ipmi_port": float64(70000)}, "ipmi_port"},
		{DriverIPMI, map[string]any{"ipmi_address": "10.0.0.1", "ipmi_cipher_suite": 3.5}, "ipmi_cipher_suite"},
		{DriverIPMI, map[string]any{"ipmi_address": "10.0.0.1", "ipmi_priv_level": "root"}, "ipmi_priv_level"},
		{DriverIPMI, map[string]any{"ipmi_address": "10.0.0.1", "redfish_password": "x"}, "redfish_password"},
		{DriverRedfish, map[string]any{}, "redfish_address"},
		{DriverRedfish, map[string]any{"redfish_address": "ftp://bmc"}, "redfish_address"},
		{DriverRedfish, map[string]any{"redfish_address": "https://bmc", "redfish_system_id": "Systems/1"}, "redfish_system_id"},
		{DriverRedfish, map[string]any{"redfish_address": "https://bmc", "redfish_verify_ca": "maybe"}, "redfish_verify_ca"},
		{DriverRedfish, map[string]any{"redfish_address": "https://bmc", "redfish_verify_ca": "/nonexistent/ca.pem"}, "redfish_verify_ca"},
		{DriverFakeHardware, map[string]any{}, "fake_machine_id"},
	}
	for _, c := range cases {
		_, err := New(c.driver, c.info)
		if err == nil {
			t.Errorf("%s %v: accepted", c.driver, c.info)
			continue
		}
		if ecode.ClassOf(err) != ecode.Inval || !strings.Contains(err.Error(), c.key) {
			t.Errorf("%s %v: %v (class %s), want Inval naming %s", c.driver, c.info, err, ecode.ClassOf(err), c.key)
		}
	}
	if _, err := New("idrac", nil); ecode.ClassOf(err) != ecode.Inval {
		t.Errorf("unknown driver: %v", err)
	}
}

func TestRedfishAddressWithCredentialsIsRefusedWithoutShowingThem(t *testing.T) {
	_, err := New(DriverRedfish, map[string]any{"redfish_address": "https://root:Hunter2pw@bmc"})
	if err == nil || strings.Contains(err.Error(), "Hunter2pw") {
		t.Fatalf("got %v", err)
	}
}

func TestPropertiesMarkSecrets(t *testing.T) {
	for _, d := range Names() {
		if _, err := Properties(d); err != nil {
			t.Errorf("%s: %v", d, err)
		}
	}
	if got := SecretKeys(DriverIPMI); len(got) != 1 || got[0] != "ipmi_password" {
		t.Errorf("ipmi secrets = %v", got)
	}
	if got := SecretKeys(DriverRedfish); len(got) != 1 || got[0] != "redfish_password" {
		t.Errorf("redfish secrets = %v", got)
	}
	props, _ := Properties(DriverIPMI)
	required := 0
	for _, p := range props {
		if p.Required {
			required++
			if p.Name != "ipmi_address" {
				t.Errorf("ipmi %s marked required", p.Name)
			}
		}
	}
	if required != 1 {
		t.Errorf("ipmi has %d required keys", required)
	}
	if _, err := Properties("nope"); ecode.ClassOf(err) != ecode.NoEnt {
		t.Errorf("unknown driver properties: %v", err)
	}
}

func TestFakeHardwareKeepsStatePerMachine(t *testing.T) {
	ctx := context.Background()
	a, err := New(DriverFakeHardware, nil, WithMachine("uuid-a"))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := New(DriverFakeHardware, map[string]any{"fake_machine_id": "b"})
	if err := a.SetPower(ctx, PowerOn, 0); err != nil {
		t.Fatal(err)
	}
	if err := a.SetBootDevice(ctx, BootPXE, false); err != nil {
		t.Fatal(err)
	}
	again, _ := New(DriverFakeHardware, nil, WithMachine("uuid-a"))
	if p, _ := again.PowerState(ctx); p != PowerOn {
		t.Errorf("a new driver for the same machine sees %q", p)
	}
	if dev, _ := again.BootDevice(ctx); dev != BootPXE {
		t.Errorf("boot device = %q", dev)
	}
	if p, _ := b.PowerState(ctx); p != PowerOff {
		t.Errorf("another machine is %q", p)
	}
	// A one-time boot device is used up by the next boot.
	if err := again.SetPower(ctx, Rebooting, 0); err != nil {
		t.Fatal(err)
	}
	if dev, _ := again.BootDevice(ctx); dev != "" {
		t.Errorf("boot device after reboot = %q", dev)
	}
	if err := a.SetPower(ctx, "hibernate", 0); ecode.ClassOf(err) != ecode.Inval {
		t.Errorf("unknown power target: %v", err)
	}
	if err := a.SetBootDevice(ctx, "floppy", false); ecode.ClassOf(err) != ecode.Inval {
		t.Errorf("unknown boot device: %v", err)
	}
	vm := a.(VirtualMedia)
	if err := vm.InsertCD(ctx, "http://x/a.iso"); err != nil || a.(*Fake).InsertedCD() != "http://x/a.iso" {
		t.Errorf("insert: %v", err)
	}
}

// scriptedIPMI returns an ipmi driver whose ipmitool is replaced by fn.
func scriptedIPMI(t *testing.T, fn func(args, env []string) (string, string, error)) (*IPMI, *[][]string) {
	t.Helper()
	d, err := New(DriverIPMI, map[string]any{"ipmi_address": "192.0.2.9", "ipmi_username": "admin",
		"ipmi_password": "Sup3rSecret", "ipmi_cipher_suite": float64(3), "ipmi_priv_level": "operator"})
	if err != nil {
		t.Fatal(err)
	}
	ip := d.(*IPMI)
	var mu sync.Mutex
	var calls [][]string
	ip.run = func(ctx context.Context, args, env []string) ([]byte, []byte, error) {
		mu.Lock()
		calls = append(calls, args)
		mu.Unlock()
		out, errOut, err := fn(args, env)
		return []byte(out), []byte(errOut), err
	}
	ip.pause, ip.poll = time.Millisecond, time.Millisecond
	return ip, &calls
}

func exitError(t *testing.T) error {
	err := exec.Command("false").Run()
	if err == nil {
		t.Fatal("false succeeded")
	}
	return err
}

func TestIPMIPasswordGoesInTheEnvironmentOnly(t *testing.T) {
	var env []string
	d, calls := scriptedIPMI(t, func(args, e []string) (string, string, error) {
		env = e
		return "Chassis Power is on\n", "", nil
	})
	if p, err := d.PowerState(context.Background()); err != nil || p != PowerOn {
		t.Fatalf("power state %q, %v", p, err)
	}
	args := strings.Join((*calls)[0], " ")
	if strings.Contains(args, "Sup3rSecret") {
		t.Fatalf("password on the command line: %s", args)
	}
	want := "-I lanplus -H 192.0.2.9 -p 623 -U admin -C 3 -L OPERATOR -E chassis power status"
	if args != want {
		t.Errorf("args = %q, want %q", args, want)
	}
	if len(env) != 1 || env[0] != "IPMI_PASSWORD=Sup3rSecret" {
		t.Errorf("env = %v", env)
	}
}

func TestIPMIRetriesTransientErrorsOnly(t *testing.T) {
	n := 0
	d, _ := scriptedIPMI(t, func(args, env []string) (string, string, error) {
		n++
		if n < 3 {
			return "", "Error: Unable to establish IPMI v2 / RMCP+ session\n", exitError(t)
		}
		return "Chassis Power is off\n", "", nil
	})
	if p, err := d.PowerState(context.Background()); err != nil || p != PowerOff || n != 3 {
		t.Fatalf("power state %q, %v after %d runs", p, err, n)
	}

	n = 0
	d, _ = scriptedIPMI(t, func(args, env []string) (string, string, error) {
		n++
		return "", "Invalid user name; password was Sup3rSecret\n", exitError(t)
	})
	err := d.Validate(context.Background())
	if err == nil || n != 1 {
		t.Fatalf("a permanent error ran %d times: %v", n, err)
	}
	if strings.Contains(err.Error(), "Sup3rSecret") {
		t.Fatalf("error shows the password: %v", err)
	}
	var exitErr *exec.ExitError
	if !errors.As(err, &exitErr) {
		t.Errorf("the cause is not kept: %v", err)
	}

	n = 0
	d, _ = scriptedIPMI(t, func(args, env []string) (string, string, error) {
		n++
		return "", "Timeout\n", exitError(t)
	})
	if err := d.Validate(context.Background()); err == nil || n != d.attempts {
		t.Fatalf("transient errors: %d runs, %v", n, err)
	}
}

func TestIPMIRebootIsOffThenOn(t *testing.T) {
	state := "on"
	d, calls := scriptedIPMI(t, func(args, env []string) (string, string, error) {
		cmd := strings.Join(args[len(args)-3:], " ")
		switch cmd {
		case "chassis power status":
			return "Chassis Power is " + state + "\n", "", nil
		case "chassis power off":
			state = "off"
		case "chassis power on":
			state = "on"
		default:
			t.Errorf("unexpected %s", cmd)
		}
		return "", "", nil
	})
	if err := d.SetPower(context.Background(), Rebooting, time.Second); err != nil {
		t.Fatal(err)
	}
	var verbs []string
	for _, c := range *calls {
		if v := c[len(c)-1]; v != "status" {
			verbs = append(verbs, v)
		}
	}
	if strings.Join(verbs, ",") != "off,on" {
		t.Errorf("reboot sent %v", verbs)
	}
}

func TestIPMIPowerTimesOutNamingTheState(t *testing.T) {
	d, _ := scriptedIPMI(t, func(args, env []string) (string, string, error) {
		return "Chassis Power is on\n", "", nil
	})
	err := d.SetPower(context.Background(), PowerOff, 20*time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), `"power on"`) {
		t.Fatalf("got %v", err)
	}
}

func TestParseBootParam5(t *testing.T) {
	cases := map[string]string{"0004000000": BootPXE, "8008000000": BootDisk, "c014000000": BootCDROM, "0018000000": BootBIOS, "0000000000": ""}
	for data, want := range cases {
		got, err := parseBootParam5("Boot parameter version: 1\nBoot parameter data: " + data + "\n")
		if err != nil || got != want {
			t.Errorf("%s: %q, %v; want %q", data, got, err, want)
		}
	}
	for _, bad := range []string{"", "Boot parameter data: zz", "Boot parameter data: 00", "Boot parameter data: 003c000000"} {
		if _, err := parseBootParam5(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func FuzzParseIPMIOutput(f *testing.F) {
	f.Add("Chassis Power is on\n")
	f.Add("Boot parameter data: 0004000000\n")
	f.Fuzz(func(t *testing.T, s string) {
		if p, err := parsePowerStatus(s); err == nil && p != PowerOn && p != PowerOff {
			t.Fatalf("power %q", p)
		}
		if d, err := parseBootParam5(s); err == nil && d != "" {
			if checkBootDevice(d) != nil {
				t.Fatalf("device %q", d)
			}
		}
	})
}

// redfishRecorder is a Redfish service answering from a map and recording
// what it was sent.
type redfishRecorder struct {
	mu       sync.Mutex
	requests []string
	system   map[string]any
}

func (r *redfishRecorder) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.requests = append(r.requests, req.Method+" "+req.URL.Path+" "+strings.TrimSpace(string(body)))
	if u, p, _ := req.BasicAuth(); u != "admin" || p != "Rf-Secret" {
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	switch req.Method + " " + req.URL.Path {
	case "GET /redfish/v1/Systems/s1":
		json.NewEncoder(w).Encode(r.system)
	case "POST /redfish/v1/Systems/s1/Actions/ComputerSystem.Reset":
		var b struct{ ResetType string }
		json.Unmarshal(body, &b)
		switch b.ResetType {
		case "On", "ForceRestart":
			r.system["PowerState"] = "On"
		case "ForceOff":
			r.system["PowerState"] = "Off"
		}
		w.WriteHeader(http.StatusNoContent)
	case "PATCH /redfish/v1/Systems/s1":
		w.WriteHeader(http.StatusNoContent)
	default:
		w.WriteHeader(http.StatusInternalServerError)
		// A broken BMC echoing what it got must not leak it.
		json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{"message": "cannot serve " + req.URL.Path + " for admin:Rf-Secret"}})
	}
}

func TestRedfishRequests(t *testing.T) {
	rec := &redfishRecorder{system: map[string]any{
		"PowerState": "Off",
		"Boot":       map[string]any{"BootSourceOverrideTarget": "Pxe", "BootSourceOverrideEnabled": "Once"},
		"Actions":    map[string]any{"#ComputerSystem.Reset": map[string]any{"target": "/redfish/v1/Systems/s1/Actions/ComputerSystem.Reset"}},
		"Links":      map[string]any{"ManagedBy": []any{map[string]any{"@odata.id": "/redfish/v1/Managers/broken"}}},
	}}
	srv := httptest.NewServer(rec)
	defer srv.Close()
	d, err := New(DriverRedfish, map[string]any{"redfish_address": srv.URL, "redfish_system_id": "/redfish/v1/Systems/s1",
		"redfish_username": "admin", "redfish_password": "Rf-Secret"})
	if err != nil {
		t.Fatal(err)
	}
	d.(*RedfishClient).poll = time.Millisecond
	ctx := context.Background()
	if dev, err := d.BootDevice(ctx); err != nil || dev != BootPXE {
		t.Errorf("boot device %q, %v", dev, err)
	}
	if err := d.SetBootDevice(ctx, BootBIOS, true); err != nil {
		t.Fatal(err)
	}
	if err := d.SetPower(ctx, Rebooting, time.Second); err != nil {
		t.Fatal(err)
	}
	if err := d.SetPower(ctx, PowerOff, time.Second); err != nil {
		t.Fatal(err)
	}
	var sent []string
	for _, r := range rec.requests {
		if !strings.HasPrefix(r, "GET") {
			sent = append(sent, r)
		}
	}
	want := []string{
		`PATCH /redfish/v1/Systems/s1 {"Boot":{"BootSourceOverrideEnabled":"Continuous","BootSourceOverrideTarget":"BiosSetup"}}`,
		`POST /redfish/v1/Systems/s1/Actions/ComputerSystem.Reset {"ResetType":"On"}`,
		`POST /redfish/v1/Systems/s1/Actions/ComputerSystem.Reset {"ResetType":"ForceOff"}`,
	}
	if strings.Join(sent, "\n") != strings.Join(want, "\n") {
		t.Errorf("sent:\n%s\nwant:\n%s", strings.Join(sent, "\n"), strings.Join(want, "\n"))
	}
	err = d.(VirtualMedia).InsertCD(ctx, "http://x/y.iso")
	if err == nil || strings.Contains(err.Error(), "Rf-Secret") {
		t.Fatalf("broken manager: %v", err)
	}
	if !strings.Contains(err.Error(), "******") {
		t.Errorf("the BMC's message was dropped rather than cleaned: %v", err)
	}
}

func TestRedfishFindsTheOnlySystem(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("/redfish/v1/Systems", func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(`{"Members":[{"@odata.id":"/redfish/v1/Systems/only"}]}`))
	})
	mux.HandleFunc("/redfish/v1/Systems/only", func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(`{"PowerState":"PoweringOn"}`))
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	d, _ := New(DriverRedfish, map[string]any{"redfish_address": srv.URL})
	if p, err := d.PowerState(context.Background()); err != nil || p != PowerOn {
		t.Fatalf("%q, %v", p, err)
	}
}
