package nodeserver

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/corral/corral/internal/baremetal/agentapi"
	"github.com/corral/corral/internal/baremetal/driver"
	"github.com/corral/corral/internal/bmc/bmctest"
	"github.com/corral/corral/internal/ecode"
	"github.com/corral/corral/internal/nodeapi"
)

// newMachineServer is a node server with only what the machine RPCs use;
// media, when not zero, turns virtual media boot on.
func newMachineServer(t *testing.T, media MachineMediaOptions) (*Server, *bmctest.SyncBuffer) {
	t.Helper()
	logs := &bmctest.SyncBuffer{}
	log := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	s := &Server{opts: Options{StateDir: t.TempDir()}, log: log, name: "node1"}
	m, err := openMachineMedia(s.opts.StateDir, "127.0.0.1:1811", media, log)
	if err != nil {
		t.Fatal(err)
	}
	s.media = m
	if m.enabled() {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { m.serve(ctx); close(done) }()
		t.Cleanup(func() { cancel(); <-done })
	}
	return s, logs
}

func fakeBMC(machine string) nodeapi.MachineBMC {
	return nodeapi.MachineBMC{Machine: machine, Driver: driver.DriverFakeHardware, DriverInfo: map[string]any{}}
}

func wantClass(t *testing.T, what string, err error, class ecode.Class) {
	t.Helper()
	if err == nil || ecode.ClassOf(err) != class {
		t.Fatalf("%s: %v (class %s), want class %s", what, err, ecode.ClassOf(err), class)
	}
}

func TestMachinePowerKeepsFakeStateAcrossCalls(t *testing.T) {
	s, _ := newMachineServer(t, MachineMediaOptions{})
	ctx := context.Background()
	m := fakeBMC("7d3c1f6e-power-test")
	power := func(action string) string {
		t.Helper()
		r, err := s.machinePower(ctx, nodeapi.MachinePowerArgs{MachineBMC: m, Action: action})
		if err != nil {
			t.Fatalf("%q: %v", action, err)
		}
		return r.(nodeapi.MachinePowerReply).PowerState
	}
	if got := power(""); got != driver.PowerOff {
		t.Fatalf("a new fake machine is %q", got)
	}
	if got := power(driver.PowerOn); got != driver.PowerOn {
		t.Fatalf("after power on: %q", got)
	}
	if got := power(""); got != driver.PowerOn {
		t.Fatalf("the next call sees %q", got)
	}
	if got := power(driver.Rebooting); got != driver.PowerOn {
		t.Fatalf("after reboot: %q", got)
	}
	if got := power(driver.SoftPowerOff); got != driver.PowerOff {
		t.Fatalf("after soft power off: %q", got)
	}
	_, err := s.machinePower(ctx, nodeapi.MachinePowerArgs{MachineBMC: m, Action: "power sideways"})
	wantClass(t, "unknown action", err, ecode.Inval)
	_, err = s.machinePower(ctx, nodeapi.MachinePowerArgs{MachineBMC: nodeapi.MachineBMC{Machine: "m1", Driver: "idrac"}})
	wantClass(t, "unknown driver", err, ecode.Inval)
	_, err = s.machinePower(ctx, nodeapi.MachinePowerArgs{MachineBMC: fakeBMC("../../etc")})
	wantClass(t, "a machine id that is a path", err, ecode.Inval)
}

func TestMachineBootDevice(t *testing.T) {
	s, _ := newMachineServer(t, MachineMediaOptions{})
	ctx := context.Background()
	m := fakeBMC("0b8f0c55-bootdev-test")
	if _, err := s.machineBootDevice(ctx, nodeapi.MachineBootDeviceArgs{MachineBMC: m, Device: driver.BootPXE}); err != nil {
		t.Fatal(err)
	}
	d, _ := driver.New(m.Driver, m.DriverInfo, driver.WithMachine(m.Machine))
	if got, _ := d.BootDevice(ctx); got != driver.BootPXE {
		t.Fatalf("boot device %q", got)
	}
	_, err := s.machineBootDevice(ctx, nodeapi.MachineBootDeviceArgs{MachineBMC: m, Device: "floppy"})
	wantClass(t, "floppy", err, ecode.Inval)
}

func TestMachineBootInterfaces(t *testing.T) {
	s, _ := newMachineServer(t, MachineMediaOptions{})
	ctx := context.Background()
	m := fakeBMC("5a0e1d2c-iface-test")
	prep := func(iface string) error {
		_, err := s.machineBootPrepare(ctx, nodeapi.MachineBootPrepareArgs{MachineBMC: m, BootInterface: iface, APIURL: "http://10.0.0.1:6385"})
		return err
	}
	if err := prep("fake"); err != nil {
		t.Fatalf("fake: %v", err)
	}
	if _, err := s.machineBootCleanUp(ctx, nodeapi.MachineBootCleanUpArgs{MachineBMC: m, BootInterface: "fake"}); err != nil {
		t.Fatalf("fake clean up: %v", err)
	}
	for _, iface := range []string{"pxe", "ipxe"} {
		err := prep(iface)
		wantClass(t, iface, err, ecode.Environ)
		if !strings.Contains(err.Error(), "--baremetal-networks") {
			t.Fatalf("%s: %v", iface, err)
		}
	}
	wantClass(t, "unknown interface", prep("floppy-boot"), ecode.Inval)
	err := prep("redfish-virtual-media")
	wantClass(t, "virtual media without a media listener", err, ecode.Environ)
	if !strings.Contains(err.Error(), "--machine-media-listen") {
		t.Fatalf("the error does not say what to do: %v", err)
	}
	_, err = s.machineBootPrepare(ctx, nodeapi.MachineBootPrepareArgs{BootInterface: "redfish-virtual-media", APIURL: "http://10.0.0.1:6385",
		MachineBMC: nodeapi.MachineBMC{Machine: "m1", Driver: driver.DriverIPMI, DriverInfo: map[string]any{"ipmi_address": "10.0.0.9"}}})
	wantClass(t, "ipmi has no virtual media", err, ecode.Inval)
	_, err = s.machineBootPrepare(ctx, nodeapi.MachineBootPrepareArgs{MachineBMC: m, BootInterface: "redfish-virtual-media", APIURL: "ftp://x"})
	wantClass(t, "a bad API URL", err, ecode.Inval)
}

func httpGet(t *testing.T, url string) (int, []byte) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// TestVirtualMediaBootPrepareAndCleanUp runs the virtual media path with
// the fake BMC: an ISO with the machine's command line is built under the
// state directory, served, inserted and booted from once; a second prepare
// replaces it; clean up ejects, deletes and boots from disk.
func TestVirtualMediaBootPrepareAndCleanUp(t *testing.T) {
	bmctest.NeedISOTools(t)
	ramdisk := t.TempDir()
	os.WriteFile(filepath.Join(ramdisk, "vmlinuz"), []byte("kernel"), 0o644)
	os.WriteFile(filepath.Join(ramdisk, "initrd.img"), []byte("initrd"), 0o644)
	s, _ := newMachineServer(t, MachineMediaOptions{Listen: "127.0.0.1:0", AgentRamdisk: ramdisk})
	ctx := context.Background()
	m := fakeBMC("c2a9a3f0-vmedia-test")
	fake, _ := driver.New(m.Driver, m.DriverInfo, driver.WithMachine(m.Machine))
	args := nodeapi.MachineBootPrepareArgs{MachineBMC: m, BootInterface: "redfish-virtual-media",
		APIURL: "https://10.0.0.1:6385", APICASHA256: strings.Repeat("ab", 32), KernelParams: "console=ttyS0 nofb"}
	if _, err := s.machineBootPrepare(ctx, args); err != nil {
		t.Fatal(err)
	}
	isos, _ := filepath.Glob(filepath.Join(s.opts.StateDir, "machine-media", m.Machine, "*.iso"))
	cd := fake.(*driver.Fake).InsertedCD()
	if len(isos) != 1 || !strings.HasPrefix(cd, s.media.baseURL+"/machine-media/"+m.Machine+"/") || !strings.HasSuffix(cd, filepath.Base(isos[0])) {
		t.Fatalf("ISOs %v, inserted %q", isos, cd)
	}
	if dev, _ := fake.BootDevice(ctx); dev != driver.BootCDROM {
		t.Fatalf("boot device %q", dev)
	}
	status, body := httpGet(t, cd)
	onDisk, _ := os.ReadFile(isos[0])
	if status != 200 || !bytes.Equal(body, onDisk) {
		t.Fatalf("GET %s: %d, %d bytes (file %d)", cd, status, len(body), len(onDisk))
	}
	cfg := filepath.Join(t.TempDir(), "isolinux.cfg")
	if out, err := exec.Command("xorriso", "-osirrox", "on", "-indev", isos[0], "-extract", "/isolinux/isolinux.cfg", cfg).CombinedOutput(); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	want := "APPEND ipa-api-url=https://10.0.0.1:6385 corral.api-ca-sha256=" + strings.Repeat("ab", 32) + " console=ttyS0 nofb\n"
	if data, _ := os.ReadFile(cfg); !strings.Contains(string(data), want) {
		t.Fatalf("isolinux.cfg:\n%s", data)
	}
	for _, path := range []string{"/machine-media/" + m.Machine + "/", "/machine-media/../machine-media/" + m.Machine + "/" + filepath.Base(isos[0]), "/"} {
		if status, _ := httpGet(t, s.media.baseURL+path); status != http.StatusNotFound {
			t.Fatalf("GET %s: %d, want 404", path, status)
		}
	}

	// A second prepare (the machine reboots into the ramdisk) replaces it.
	if _, err := s.machineBootPrepare(ctx, args); err != nil {
		t.Fatal(err)
	}
	again, _ := filepath.Glob(filepath.Join(s.opts.StateDir, "machine-media", m.Machine, "*.iso"))
	if cd2 := fake.(*driver.Fake).InsertedCD(); len(again) != 1 || again[0] == isos[0] || !strings.HasSuffix(cd2, filepath.Base(again[0])) {
		t.Fatalf("after a second prepare: ISOs %v, inserted %q", again, cd2)
	}
	if status, _ := httpGet(t, cd); status != http.StatusNotFound {
		t.Fatalf("the replaced ISO is still served: %d", status)
	}

	if _, err := s.machineBootCleanUp(ctx, nodeapi.MachineBootCleanUpArgs{MachineBMC: m, BootInterface: "redfish-virtual-media"}); err != nil {
		t.Fatal(err)
	}
	if cd := fake.(*driver.Fake).InsertedCD(); cd != "" {
		t.Fatalf("still inserted: %q", cd)
	}
	if _, err := os.Stat(filepath.Join(s.opts.StateDir, "machine-media", m.Machine)); !os.IsNotExist(err) {
		t.Fatalf("the machine's media directory is still there: %v", err)
	}
	if dev, _ := fake.BootDevice(ctx); dev != driver.BootDisk {
		t.Fatalf("boot device after clean up %q", dev)
	}
	// Persistent: powering on does not use the override up.
	fake.SetPower(ctx, driver.PowerOn, 0)
	if dev, _ := fake.BootDevice(ctx); dev != driver.BootDisk {
		t.Fatalf("boot device after a boot %q: clean up did not make it persistent", dev)
	}
}

func TestVirtualMediaNeedsTheRamdisk(t *testing.T) {
	s, _ := newMachineServer(t, MachineMediaOptions{Listen: "127.0.0.1:0"})
	_, err := s.machineBootPrepare(context.Background(), nodeapi.MachineBootPrepareArgs{MachineBMC: fakeBMC("9e9e-noramdisk"),
		BootInterface: "redfish-virtual-media", APIURL: "http://10.0.0.1:6385"})
	wantClass(t, "no ramdisk", err, ecode.Environ)
	if !strings.Contains(err.Error(), "--agent-ramdisk") {
		t.Fatalf("%v", err)
	}
}

func TestMediaBaseURL(t *testing.T) {
	s, _ := newMachineServer(t, MachineMediaOptions{Listen: "127.0.0.1:0"})
	if !strings.HasPrefix(s.media.baseURL, "http://127.0.0.1:") {
		t.Fatalf("base URL %q", s.media.baseURL)
	}
	_, err := openMachineMedia(t.TempDir(), "0.0.0.0:1811", MachineMediaOptions{Listen: "0.0.0.0:0"}, slog.New(slog.DiscardHandler))
	wantClass(t, "unspecified address without a URL", err, ecode.Inval)
	m, err := openMachineMedia(t.TempDir(), "192.0.2.7:1811", MachineMediaOptions{Listen: "0.0.0.0:0"}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer m.close()
	if !strings.HasPrefix(m.baseURL, "http://192.0.2.7:") {
		t.Fatalf("base URL %q, want the RPC listener's host", m.baseURL)
	}
	m2, err := openMachineMedia(t.TempDir(), "", MachineMediaOptions{Listen: "127.0.0.1:0", URL: "https://media.example.net:8443/"}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer m2.close()
	if m2.baseURL != "https://media.example.net:8443" {
		t.Fatalf("base URL %q", m2.baseURL)
	}
}

// fakeAgent answers /v1/commands/ as an agent would, checking the token.
func fakeAgent(t *testing.T, token string, reply func(req agentapi.CommandRequest) (int, any)) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/commands/" || r.Method != http.MethodPost {
			http.NotFound(w, r)
			return
		}
		if r.URL.Query().Get("agent_token") != token {
			w.WriteHeader(http.StatusUnauthorized)
			json.NewEncoder(w).Encode(agentapi.ErrorReply{Type: "Unauthorized", Code: 401, Message: "Invalid or missing agent token " + r.URL.Query().Get("agent_token")})
			return
		}
		var req agentapi.CommandRequest
		json.NewDecoder(r.Body).Decode(&req)
		status, body := reply(req)
		w.WriteHeader(status)
		json.NewEncoder(w).Encode(body)
	}))
	t.Cleanup(srv.Close)
	return srv
}

func TestMachineAgentCommand(t *testing.T) {
	s, logs := newMachineServer(t, MachineMediaOptions{})
	ctx := context.Background()
	const token = "tok-3f9a0c7d1e5b4a2f"
	var got agentapi.CommandRequest
	agent := fakeAgent(t, token, func(req agentapi.CommandRequest) (int, any) {
		got = req
		return 200, map[string]any{"id": "c1", "command_name": "finalize_rescue", "command_status": "SUCCEEDED",
			"command_error": nil, "command_result": map[string]any{"result": "rescued"}}
	})
	args := nodeapi.MachineAgentCommandArgs{Machine: "4e4b-agent-test", URL: agent.URL, Token: token,
		Name: agentapi.CmdFinalizeRescue, Params: map[string]any{"rescue_password": "$5$salt$hash", "hashed": true}, Wait: true}
	r, err := s.machineAgentCommand(ctx, args)
	if err != nil {
		t.Fatal(err)
	}
	reply := r.(*nodeapi.MachineAgentCommandReply)
	if reply.ID != "c1" || reply.Status != "SUCCEEDED" || reply.Result["result"] != "rescued" || reply.Error != nil {
		t.Fatalf("reply %+v", reply)
	}
	if got.Name != agentapi.CmdFinalizeRescue || !strings.Contains(string(got.Params), `"rescue_password":"$5$salt$hash"`) {
		t.Fatalf("the agent got %s %s", got.Name, got.Params)
	}

	// A failed command is a reply, not an error: corrald decides.
	failing := fakeAgent(t, token, func(agentapi.CommandRequest) (int, any) {
		return 200, map[string]any{"id": "c2", "command_status": "FAILED",
			"command_error": map[string]any{"type": "RescueError", "code": 500, "message": "no shadow"}}
	})
	args.URL = failing.URL
	r, err = s.machineAgentCommand(ctx, args)
	if err != nil || r.(*nodeapi.MachineAgentCommandReply).Status != "FAILED" || r.(*nodeapi.MachineAgentCommandReply).Error == nil {
		t.Fatalf("%+v %v", r, err)
	}

	// The agent busy: 409, a temporary condition.
	busy := fakeAgent(t, token, func(agentapi.CommandRequest) (int, any) {
		return http.StatusConflict, agentapi.ErrorReply{Type: "CommandExecutionError", Code: 409, Message: "busy"}
	})
	args.URL = busy.URL
	_, err = s.machineAgentCommand(ctx, args)
	wantClass(t, "busy agent", err, ecode.TempNoRes)

	// A wrong token: the agent echoes what it got; the error must not.
	args.URL, args.Token = agent.URL, "wrong-token-6b1d9e"
	_, err = s.machineAgentCommand(ctx, args)
	wantClass(t, "wrong token", err, ecode.Inval)
	if strings.Contains(err.Error(), args.Token) || !strings.Contains(err.Error(), "******") {
		t.Fatalf("the error shows the token: %v", err)
	}
	// Unreachable agent: the URL is in no error with its token.
	args.URL = "http://127.0.0.1:1"
	_, err = s.machineAgentCommand(ctx, args)
	if err == nil || strings.Contains(err.Error(), args.Token) {
		t.Fatalf("unreachable agent: %v", err)
	}
	_, err = s.machineAgentCommand(ctx, nodeapi.MachineAgentCommandArgs{Machine: "m1", URL: "ftp://x", Token: token, Name: "a.b"})
	wantClass(t, "ftp callback", err, ecode.Inval)
	if l := logs.String(); strings.Contains(l, token) || strings.Contains(l, "wrong-token") || strings.Contains(l, "$5$salt") {
		t.Fatalf("the log shows a secret:\n%s", l)
	}
}

// TestBMCPasswordsNeverInErrorsOrLogs points the redfish driver at a BMC
// that echoes the credentials it received in its error messages.
func TestBMCPasswordsNeverInErrorsOrLogs(t *testing.T) {
	s, logs := newMachineServer(t, MachineMediaOptions{})
	const password = "bmc-pass-8d2f61"
	bmc := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, pw, _ := r.BasicAuth()
		w.WriteHeader(http.StatusInternalServerError)
		fmt.Fprintf(w, `{"error": {"code": "Base.1.0.GeneralError", "message": "cannot act with password %s"}}`, pw)
	}))
	t.Cleanup(bmc.Close)
	m := nodeapi.MachineBMC{Machine: "8f1e-secret-test", Driver: driver.DriverRedfish, DriverInfo: map[string]any{
		"redfish_address": bmc.URL, "redfish_username": "admin", "redfish_password": password, "redfish_system_id": "/redfish/v1/Systems/1"}}
	ctx := context.Background()
	_, err1 := s.machinePower(ctx, nodeapi.MachinePowerArgs{MachineBMC: m, Action: driver.PowerOn})
	_, err2 := s.machineBootDevice(ctx, nodeapi.MachineBootDeviceArgs{MachineBMC: m, Device: driver.BootDisk})
	_, err3 := s.machineBootCleanUp(ctx, nodeapi.MachineBootCleanUpArgs{MachineBMC: m, BootInterface: "redfish-virtual-media"})
	for i, err := range []error{err1, err2, err3} {
		if err == nil || strings.Contains(err.Error(), password) {
			t.Fatalf("call %d: %v", i+1, err)
		}
		if _, ok := ecode.As(err); !ok {
			t.Fatalf("call %d: %T is not an ecode error", i+1, err)
		}
	}
	if strings.Contains(logs.String(), password) {
		t.Fatalf("the log shows the BMC password:\n%s", logs.String())
	}
	// The redaction itself, for a cause no driver cleaned.
	err := redacted(fmt.Errorf("wrapped: %w", ecode.Errorf(ecode.State, "BMC said %s", password)), password)
	if strings.Contains(err.Error(), password) || ecode.ClassOf(err) != ecode.State {
		t.Fatalf("%v (%s)", err, ecode.ClassOf(err))
	}
}

func TestMachineMediaNames(t *testing.T) {
	for id, ok := range map[string]bool{"1b7e2a6c-3f0d-4c8e-9a51-7d2e4f6a8b90": true, "bm1.rack_2": true, "": false, ".hidden": false,
		"-x": false, "a/b": false, "..": false, "a b": false, strings.Repeat("a", 128): true, strings.Repeat("a", 129): false} {
		if validMachineID(id) != ok {
			t.Errorf("validMachineID(%q) = %v", id, !ok)
		}
	}
	for name, ok := range map[string]bool{strings.Repeat("0f", 16) + ".iso": true, strings.Repeat("0F", 16) + ".iso": false,
		strings.Repeat("0f", 16): false, strings.Repeat("0f", 15) + ".iso": false, "../" + strings.Repeat("0f", 15) + "a.iso": false} {
		if validMediaFile(name) != ok {
			t.Errorf("validMediaFile(%q) = %v", name, !ok)
		}
	}
}

// TestDaemonServesMachineMedia starts the daemon with a media listener:
// Run serves it and stops it with the daemon.
func TestDaemonServesMachineMedia(t *testing.T) {
	s, _ := newCertNode(t, func(o *Options) { o.MachineMedia = MachineMediaOptions{Listen: "127.0.0.1:0"} })
	if !s.media.enabled() {
		t.Fatal("no media listener")
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	name := strings.Repeat("0f", 16) + ".iso"
	dir := filepath.Join(s.opts.StateDir, "machine-media", "m1")
	os.MkdirAll(dir, 0o755)
	os.WriteFile(filepath.Join(dir, name), []byte("iso"), 0o644)
	url := s.media.baseURL + "/machine-media/m1/" + name
	var status int
	var body []byte
	for range 50 {
		if resp, err := http.Get(url); err == nil {
			body, _ = io.ReadAll(resp.Body)
			resp.Body.Close()
			status = resp.StatusCode
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if status != http.StatusOK || string(body) != "iso" {
		t.Fatalf("GET %s: %d %q", url, status, body)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	for range 50 {
		if _, err := http.Get(url); err != nil {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatal("the media listener still answers after the daemon stopped")
}
