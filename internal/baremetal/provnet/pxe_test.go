package provnet

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/corral/corral/internal/baremetal/agentapi"
	"github.com/corral/corral/internal/bmc"
	"github.com/corral/corral/internal/bmc/bmctest"
	"github.com/corral/corral/internal/cryptpw"
)

// agentCall runs one request against the agent's command API with a
// client whose connections are opened inside the namespace.
func agentCall(t *testing.T, s *Service, method, callback, token string, body any) (int, []byte) {
	t.Helper()
	tr := &http.Transport{DialContext: s.DialContext}
	defer tr.CloseIdleConnections()
	var rd io.Reader
	if body != nil {
		data, _ := json.Marshal(body)
		rd = bytes.NewReader(data)
	}
	u := callback + "/v1/commands/?" + url.Values{"wait": {"true"}, "agent_token": {token}}.Encode()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, method, u, rd)
	req.Header.Set("Content-Type", "application/json")
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		t.Fatalf("%s %s/v1/commands/ through the namespace: %v", method, callback, err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, data
}

// TestPXEBootAgentAndRescueNetwork runs the provisioning networks for
// real: the namespace with a provisioning and a rescue network, a
// corral-bmc machine on a tap in it booting from PXE (iPXE, dnsmasq, the
// boot server), the agent ramdisk looking up and heartbeating through the
// forwarder to an API on the host, a command call through the dialer, and
// the move of the machine's port to the rescue network, where the agent's
// DHCP after finalize_rescue gets a rescue-network lease.
func TestPXEBootAgentAndRescueNetwork(t *testing.T) {
	if testing.Short() && os.Getenv("CORRAL_REQUIRE_BAREMETAL") != "1" {
		t.Skip("boots a machine; skipped in -short mode")
	}
	if os.Geteuid() != 0 {
		bmctest.Require(t, "network namespaces need root")
	}
	bmctest.NeedTools(t, "ip", "dnsmasq", "qemu-system-x86_64")
	if _, err := os.Stat("/usr/lib/ipxe/qemu/efi-virtio.rom"); err != nil {
		bmctest.Require(t, "qemu's iPXE ROM (ipxe-qemu) is not installed: %v", err)
	}
	bmctest.NeedTools(t, "xorriso")
	started := time.Now()
	ramdisk := bmctest.AgentRamdisk(t)
	t.Logf("agent ramdisk ready in %s", time.Since(started).Round(10*time.Millisecond))

	tok := make([]byte, 16)
	rand.Read(tok)
	api := &bmctest.AgentAPI{UUID: "0b7c9f52-3c1e-4a55-8d0e-5f1c2a3b4d61", Token: hex.EncodeToString(tok),
		MAC: "52:54:00:c0:a1:51", HeartbeatTimeout: 3}
	api.Start(t)

	ns := fmt.Sprintf("corral-bmt%d", os.Getpid())
	cfg, err := ParseConfig([]byte(fmt.Sprintf(`{"netns": %q, "api_target": %q, "networks": [
	  {"name": "provisioning", "address": "10.231.0.1/24", "ipv6": "fd00:231::1/64", "boot": true},
	  {"name": "rescue", "address": "10.232.0.1/24", "ipv6": "fd00:232::1/64", "boot": true},
	  {"name": "tenant", "address": "10.233.0.1/24"}]}`, ns, api.Addr)))
	if err != nil {
		t.Fatal(err)
	}
	state := bmctest.ShortDir(t)
	if err := os.Chmod(state, 0o755); err != nil {
		t.Fatal(err)
	}
	svc, err := New(cfg, Options{StateDir: filepath.Join(state, "provnet"), RamdiskDir: ramdisk})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	// Registered first, so it runs last: after qemu is gone.
	t.Cleanup(func() {
		if err := svc.Destroy(ctx); err != nil {
			t.Errorf("tearing the networks down: %v", err)
		}
		if _, err := os.Stat(NetnsPath(ns)); !os.IsNotExist(err) {
			t.Errorf("network namespace %s left behind: %v", ns, err)
		}
	})
	if err := svc.Start(ctx); err != nil {
		t.Fatal(err)
	}
	// A second Start changes nothing and keeps the running dnsmasqs.
	prov, _ := cfg.Network("provisioning")
	pid1, _ := svc.dnsmasqPID(prov)
	if err := svc.Close(); err != nil {
		t.Fatal(err)
	}
	if err := cfg.Ensure(ctx); err != nil {
		t.Fatalf("Ensure on what exists: %v", err)
	}
	if err := svc.Start(ctx); err != nil {
		t.Fatalf("Start again: %v", err)
	}
	if pid2, ok := svc.dnsmasqPID(prov); !ok || pid2 == pid1 {
		t.Fatalf("dnsmasq after Close and Start: pid %d (running %v), before %d", pid2, ok, pid1)
	}

	const tap = "bmt-port0"
	if _, err := runIP(ctx, "-n", ns, "tuntap", "add", "dev", tap, "mode", "tap"); err != nil {
		t.Fatal(err)
	}
	if err := svc.Attach(ctx, tap, "provisioning"); err != nil {
		t.Fatal(err)
	}
	apiURL, err := cfg.APIURL("provisioning", "http")
	if err != nil {
		t.Fatal(err)
	}
	if err := svc.PrepareBoot(api.MAC, "console=ttyS0 quiet ipa-api-url="+apiURL); err != nil {
		t.Fatal(err)
	}
	m, err := bmc.Create(filepath.Join(bmctest.ShortDir(t), "m"), bmc.Config{
		Name: "pxe1", MemoryMB: 256, MAC: api.MAC, Network: "tap", Tap: tap, NetNS: ns})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := m.PowerOff(context.Background()); err != nil {
			t.Errorf("powering the machine off: %v", err)
		}
	})
	if err := m.SetBootOverride(bmc.BootOverride{Device: bmc.BootPXE}); err != nil {
		t.Fatal(err)
	}
	powerOn := time.Now()
	if err := m.PowerOn(ctx); err != nil {
		t.Fatal(err)
	}
	dump := func() string {
		serial, _ := os.ReadFile(m.SerialLogPath())
		dlog, _ := os.ReadFile(svc.dnsmasqFile(prov, "log"))
		return fmt.Sprintf("serial:\n%s\ndnsmasq (provisioning):\n%s", serial, dlog)
	}
	// While the machine boots: dnsmasq answers only machines prepared
	// for boot, and forgets them at CleanUpBoot.
	checkStrayDHCP(t, svc, ns)
	select {
	case <-api.Beat():
	case <-time.After(120 * time.Second):
		t.Fatalf("no heartbeat within 120 s of power on\n%s", dump())
	}
	hb := api.Heartbeats()[0]
	firstLookup, from := api.FirstLookup()
	t.Logf("power on to first lookup: %s (to first heartbeat %s); the API saw it from %s",
		firstLookup.Sub(powerOn).Round(10*time.Millisecond), time.Since(powerOn).Round(10*time.Millisecond), from)
	if !strings.HasPrefix(from, "127.0.0.1:") {
		t.Errorf("the lookup came from %s, not through the forwarder", from)
	}
	leases, err := svc.Leases("provisioning")
	if err != nil || len(leases) == 0 || leases[0].MAC != api.MAC {
		t.Fatalf("provisioning leases %+v %v", leases, err)
	}
	if want := "http://" + leases[0].IP.String() + ":9999"; hb.CallbackURL != want {
		t.Fatalf("callback %s, want %s (the machine's provisioning lease)", hb.CallbackURL, want)
	}
	if code, body := agentCall(t, svc, http.MethodGet, hb.CallbackURL, hb.AgentToken, nil); code != 200 || !strings.Contains(string(body), `"commands"`) {
		t.Fatalf("agent command list through the dialer: %d %s", code, body)
	}

	bootOnRescueNetwork(t, svc, m, api, tap, dump)

	// Clean-up: the machine is forgotten by DHCP and the boot server.
	if err := svc.CleanUpBoot(api.MAC); err != nil {
		t.Fatal(err)
	}
	c, err := svc.DialContext(ctx, "tcp", fmt.Sprintf("%s:%d", prov.Gateway(), cfg.HTTPPort))
	if err != nil {
		t.Fatalf("boot server through the dialer: %v", err)
	}
	defer c.Close()
	fmt.Fprintf(c, "GET /machines/%s.ipxe HTTP/1.0\r\n\r\n", macFileName(api.MAC))
	status, _ := io.ReadAll(io.LimitReader(c, 64))
	if !bytes.HasPrefix(status, []byte("HTTP/1.0 404")) {
		t.Fatalf("the machine's script after CleanUpBoot: %q", status)
	}
}

// bootOnRescueNetwork does a rescue as Ironic does it: the port moves to
// the rescue network, the machine boots the agent again there and takes
// finalize_rescue through the dialer, then the port moves to the tenant
// network.
func bootOnRescueNetwork(t *testing.T, svc *Service, m *bmc.Machine, api *bmctest.AgentAPI, tap string, dump func() string) {
	t.Helper()
	ctx, cfg := context.Background(), svc.Config()
	if err := m.PowerOff(ctx); err != nil {
		t.Fatal(err)
	}
	if err := svc.Attach(ctx, tap, "rescue"); err != nil {
		t.Fatal(err)
	}
	if got, err := cfg.PortNetwork(ctx, tap); err != nil || got != "rescue" {
		t.Fatalf("port %s is on %q (%v), want rescue", tap, got, err)
	}
	rescueURL, err := cfg.APIURL("rescue", "http")
	if err != nil {
		t.Fatal(err)
	}
	if err := svc.PrepareBoot(api.MAC, "console=ttyS0 quiet ipa-api-url="+rescueURL); err != nil {
		t.Fatal(err)
	}
	if err := m.SetBootOverride(bmc.BootOverride{Device: bmc.BootPXE}); err != nil {
		t.Fatal(err)
	}
	api.Forget()
	powerOn := time.Now()
	if err := m.PowerOn(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case <-api.Beat():
	case <-time.After(120 * time.Second):
		rlog, _ := os.ReadFile(svc.dnsmasqFile(must(cfg.Network("rescue")), "log"))
		t.Fatalf("no heartbeat from the rescue network within 120 s; rescue dnsmasq:\n%s\n%s", rlog, dump())
	}
	hb := api.Heartbeats()[0]
	firstLookup, _ := api.FirstLookup()
	t.Logf("rescue boot: power on to first lookup %s", firstLookup.Sub(powerOn).Round(10*time.Millisecond))
	rl, err := svc.Leases("rescue")
	if err != nil || len(rl) == 0 || rl[0].MAC != api.MAC || !strings.HasPrefix(rl[0].IP.String(), "10.232.0.") {
		t.Fatalf("rescue leases %+v %v", rl, err)
	}
	if want := "http://" + rl[0].IP.String() + ":9999"; hb.CallbackURL != want {
		t.Fatalf("rescue callback %s, want %s", hb.CallbackURL, want)
	}
	hash, err := cryptpw.Hash(cryptpw.SHA256, "Rescue-pw-7")
	if err != nil {
		t.Fatal(err)
	}
	code, body := agentCall(t, svc, http.MethodPost, hb.CallbackURL, hb.AgentToken,
		agentapi.CommandRequest{Name: agentapi.CmdFinalizeRescue, Params: json.RawMessage(
			fmt.Sprintf(`{"rescue_password": %q, "hashed": true}`, hash))})
	if code != 200 || !strings.Contains(string(body), `"SUCCEEDED"`) {
		t.Fatalf("finalize_rescue through the dialer: %d %s", code, body)
	}
	// The machine leaves the rescue network for its tenant network.
	if err := svc.Attach(ctx, tap, "tenant"); err != nil {
		t.Fatal(err)
	}
	if got, _ := cfg.PortNetwork(ctx, tap); got != "tenant" {
		t.Fatalf("port %s is on %q after the move to tenant", tap, got)
	}

}

// checkStrayDHCP runs busybox's DHCP client on a veth on the
// provisioning bridge: no lease before PrepareBoot, one after, none after
// CleanUpBoot.
func checkStrayDHCP(t *testing.T, svc *Service, ns string) {
	t.Helper()
	ctx := context.Background()
	if _, err := runIP(ctx, "-n", ns, "link", "add", "bmt-stray", "type", "veth", "peer", "name", "bmt-strayc"); err != nil {
		t.Fatal(err)
	}
	if err := svc.Attach(ctx, "bmt-stray", "provisioning"); err != nil {
		t.Fatal(err)
	}
	if _, err := runIP(ctx, "-n", ns, "link", "set", "dev", "bmt-strayc", "address", "52:54:00:5e:00:01", "up"); err != nil {
		t.Fatal(err)
	}
	var out []byte
	dhcp := func() error {
		var err error
		out, err = exec.Command("ip", "netns", "exec", ns, "busybox", "udhcpc", "-i", "bmt-strayc",
			"-n", "-q", "-t", "3", "-T", "1", "-s", "/bin/true").CombinedOutput()
		return err
	}
	if err := dhcp(); err == nil {
		t.Fatalf("a MAC never prepared for boot got a DHCP lease")
	}
	if err := svc.PrepareBoot("52:54:00:5e:00:01", "console=ttyS0"); err != nil {
		t.Fatal(err)
	}
	if err := dhcp(); err != nil {
		dlog, _ := os.ReadFile(svc.dnsmasqFile(must(svc.cfg.Network("provisioning")), "log"))
		t.Fatalf("a MAC prepared for boot got no DHCP lease: %v\n%s\ndnsmasq:\n%s", err, out, dlog)
	}
	if err := svc.CleanUpBoot("52:54:00:5e:00:01"); err != nil {
		t.Fatal(err)
	}
	if err := dhcp(); err == nil {
		t.Fatalf("a MAC cleaned up still gets a DHCP lease")
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
