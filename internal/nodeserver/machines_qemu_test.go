package nodeserver

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/corral/corral/internal/baremetal/agentapi"
	"github.com/corral/corral/internal/baremetal/driver"
	"github.com/corral/corral/internal/bmc"
	"github.com/corral/corral/internal/bmc/bmctest"
	"github.com/corral/corral/internal/cryptpw"
	"github.com/corral/corral/internal/nodeapi"
)

// TestVirtualMediaRescueBootInQemu drives one rescue boot of a qemu machine
// behind Corral's Redfish emulator through the node's handlers, as corrald
// would: boot prepare builds, serves and inserts the ISO; power on boots
// it; the agent in it looks up and heartbeats at a fake Bare Metal API
// (reached by a guestfwd), so the ISO and its command line work;
// finalize_rescue with a SHA-256 crypt hash succeeds over the hostfwd;
// clean up ejects and deletes the ISO and sets the disk; power off.
func TestVirtualMediaRescueBootInQemu(t *testing.T) {
	if testing.Short() && os.Getenv("CORRAL_REQUIRE_BAREMETAL") != "1" {
		t.Skip("boots a machine; skipped in -short mode")
	}
	bmctest.NeedISOTools(t)
	bmctest.NeedTools(t, "qemu-system-x86_64", "socat")
	started := time.Now()
	ramdisk := bmctest.AgentRamdisk(t)
	t.Logf("agent ramdisk ready in %s", time.Since(started).Round(10*time.Millisecond))

	api := &bmctest.AgentAPI{UUID: "1b7e2a6c-3f0d-4c8e-9a51-7d2e4f6a8b90", MAC: "52:54:00:c0:0b:21",
		Token: "agent-token-5c0ffee1d2e3f4", HeartbeatTimeout: 30}
	api.Start(t)
	cbPort := bmctest.FreeTCPPort(t)
	m := bmctest.NewMachine(t, "bm1", func(c *bmc.Config) {
		c.MemoryMB, c.Network, c.MAC = 256, "user", api.MAC
		c.UserNetOptions = fmt.Sprintf("restrict=on,guestfwd=tcp:10.0.2.100:6385-cmd:socat - TCP:127.0.0.1:%d,hostfwd=tcp:127.0.0.1:%d-:9999", api.Port, cbPort)
	})
	svc := bmctest.StartRedfish(t, bmctest.CorralBMC(t), m)
	s, logs := newMachineServer(t, MachineMediaOptions{Listen: "127.0.0.1:0", AgentRamdisk: ramdisk})
	dumpSerial := func() string { b, _ := os.ReadFile(m.SerialLogPath()); return string(b) }

	ctx := context.Background()
	b := nodeapi.MachineBMC{Machine: api.UUID, Driver: driver.DriverRedfish, DriverInfo: map[string]any{
		"redfish_address": svc.URL, "redfish_username": svc.User, "redfish_password": svc.Password,
		"redfish_verify_ca": svc.CAFile}}
	if _, err := s.machineBootPrepare(ctx, nodeapi.MachineBootPrepareArgs{MachineBMC: b, BootInterface: "redfish-virtual-media",
		APIURL:       "http://10.0.2.100:6385",
		KernelParams: fmt.Sprintf("console=ttyS0 quiet ipa-advertise-host=127.0.0.1 ipa-advertise-port=%d", cbPort)}); err != nil {
		t.Fatal(err)
	}
	isos, _ := filepath.Glob(filepath.Join(s.opts.StateDir, "machine-media", api.UUID, "*.iso"))
	media, _ := m.Media()
	boot, _ := m.BootOverride()
	if len(isos) != 1 || !media.Inserted || !strings.HasSuffix(media.Image, "/"+filepath.Base(isos[0])) ||
		boot.Device != bmc.BootCDROM || boot.Persistent {
		t.Fatalf("after boot prepare: ISOs %v, media %+v, boot %+v", isos, media, boot)
	}

	r, err := s.machinePower(ctx, nodeapi.MachinePowerArgs{MachineBMC: b, Action: driver.PowerOn, Timeout: 30})
	if err != nil || r.(nodeapi.MachinePowerReply).PowerState != driver.PowerOn {
		t.Fatalf("power on: %+v %v", r, err)
	}
	poweredOn := time.Now()
	select {
	case <-api.Beat():
	case <-time.After(120 * time.Second):
		t.Fatalf("no heartbeat within 120 s of power on; serial log:\n%s", dumpSerial())
	}
	t.Logf("power on to first heartbeat: %s", time.Since(poweredOn).Round(10*time.Millisecond))
	hb := api.Heartbeats()[0]
	if want := fmt.Sprintf("http://127.0.0.1:%d", cbPort); hb.CallbackURL != want {
		t.Fatalf("heartbeat callback %q, want %q", hb.CallbackURL, want)
	}

	hash, err := cryptpw.Hash(cryptpw.SHA256, "Rescue-pw-7")
	if err != nil {
		t.Fatal(err)
	}
	r, err = s.machineAgentCommand(ctx, nodeapi.MachineAgentCommandArgs{Machine: api.UUID, URL: hb.CallbackURL, Token: api.Token,
		Name: agentapi.CmdFinalizeRescue, Params: map[string]any{"rescue_password": hash, "hashed": true}, Timeout: 60})
	if err != nil || r.(*nodeapi.MachineAgentCommandReply).Status != agentapi.StatusSucceeded {
		t.Fatalf("finalize_rescue: %+v %v\nserial log:\n%s", r, err, dumpSerial())
	}
	bmctest.WaitSerial(t, m, "RESCUE-READY", 30*time.Second)

	if _, err := s.machineBootCleanUp(ctx, nodeapi.MachineBootCleanUpArgs{MachineBMC: b, BootInterface: "redfish-virtual-media"}); err != nil {
		t.Fatal(err)
	}
	media, _ = m.Media()
	boot, _ = m.BootOverride()
	if _, err := os.Stat(isos[0]); !os.IsNotExist(err) || media.Inserted || boot.Device != bmc.BootDisk || !boot.Persistent {
		t.Fatalf("after clean up: ISO %v, media %+v, boot %+v", err, media, boot)
	}
	r, err = s.machinePower(ctx, nodeapi.MachinePowerArgs{MachineBMC: b, Action: driver.PowerOff, Timeout: 30})
	if err != nil || r.(nodeapi.MachinePowerReply).PowerState != driver.PowerOff {
		t.Fatalf("power off: %+v %v", r, err)
	}
	bmctest.WaitPower(t, m, false, 10*time.Second)
	for _, secret := range []string{api.Token, hash, svc.Password} {
		if strings.Contains(logs.String(), secret) || strings.Contains(dumpSerial(), secret) {
			t.Fatalf("a secret (%.8s...) is in the node's log or on the console", secret)
		}
	}
	t.Logf("power on to rescued and off: %s", time.Since(poweredOn).Round(10*time.Millisecond))
}
