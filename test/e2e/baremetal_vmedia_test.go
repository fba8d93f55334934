package e2e

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/corral/corral/internal/bmc"
	"github.com/corral/corral/internal/bmc/bmctest"
	"github.com/corral/corral/internal/devcluster"
)

// TestBaremetalRedfishVirtualMediaDeployRescue runs the agent-driven
// deploy and rescue of a qemu machine behind Corral's Redfish BMC
// emulator, booted from virtual media: corral-node builds the agent's ISO,
// serves it and has the BMC insert it. The machine's user-mode network
// reaches the dev cluster's Bare Metal API through a guestfwd (the agent
// pins the API's certificate) and an image server through another; the
// node calls the agent through a hostfwd. The image lands on the disk, the
// machine boots from it; the rescue user logs in on the serial console
// with the password; unrescue boots the disk again.
func TestBaremetalRedfishVirtualMediaDeployRescue(t *testing.T) {
	requireRoot(t)
	bmctest.NeedTools(t, "qemu-system-x86_64", "xorriso", "socat")
	ramdisk := bmctest.AgentRamdisk(t)
	bin := bmctest.CorralBMC(t)

	image := make([]byte, 1<<20)
	rand.Read(image)
	copy(image, "CORRAL-E2E-VMEDIA-IMAGE")
	sum := sha256.Sum256(image)
	imgLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go http.Serve(imgLn, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write(image) }))
	t.Cleanup(func() { imgLn.Close() })

	c := newClusterWith(t, devcluster.Options{Hypervisors: []string{"fake"}, WatcherEvery: time.Hour,
		NodeArgs: []string{"--machine-media-listen", "127.0.0.1:0", "--agent-ramdisk", ramdisk},
		CorraldArgs: []string{"--baremetal-api-url", "https://10.0.2.100:6385",
			"--deploy-callback-timeout", "4m", "--rescue-callback-timeout", "4m"}})
	api := newBMAPI(t, c)
	apiHost, apiPort, _ := net.SplitHostPort(api.url[len("https://"):])
	cbPort := bmctest.FreeTCPPort(t)
	disk := filepath.Join(bmctest.ShortDir(t), "disk.raw")
	if err := os.WriteFile(disk, make([]byte, 8<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	m := bmctest.NewMachine(t, "vm1", func(cfg *bmc.Config) {
		cfg.MemoryMB = 256
		cfg.Network, cfg.MAC, cfg.Disk = "user", "52:54:00:e2:e0:02", disk
		cfg.UserNetOptions = fmt.Sprintf("restrict=on,guestfwd=tcp:10.0.2.100:6385-cmd:socat - TCP:%s:%s,"+
			"guestfwd=tcp:10.0.2.101:80-cmd:socat - TCP:%s,hostfwd=tcp:127.0.0.1:%d-:9999",
			apiHost, apiPort, imgLn.Addr().String(), cbPort)
	})
	rf := bmctest.StartRedfish(t, bin, m)
	dump := func() string {
		c.dumpLogs()
		serial, _ := os.ReadFile(m.SerialLogPath())
		return fmt.Sprintf("console tail:\n%s", serial[max(0, len(serial)-4000):])
	}
	var n map[string]any
	api.must("POST", "/v1/nodes", map[string]any{"driver": "redfish", "name": "vm1",
		"deploy_interface": "direct", "rescue_interface": "agent", "boot_interface": "redfish-virtual-media",
		"automated_clean": false,
		"driver_info": map[string]any{"redfish_address": rf.URL, "redfish_system_id": "/redfish/v1/Systems/vm1",
			"redfish_username": rf.User, "redfish_password": rf.Password, "redfish_verify_ca": rf.CAFile,
			"kernel_append_params": "console=ttyS0 ipa-advertise-host=127.0.0.1 ipa-advertise-port=" + strconv.Itoa(cbPort)},
		"instance_info": map[string]any{"image_source": "http://10.0.2.101/disk.img",
			"image_os_hash_algo": "sha256", "image_os_hash_value": hex.EncodeToString(sum[:])}}, &n)
	api.must("POST", "/v1/ports", map[string]any{"address": "52:54:00:e2:e0:02", "node_uuid": n["uuid"]}, nil)
	step := func(target, state string, body map[string]any, within time.Duration) time.Duration {
		t.Helper()
		req := map[string]any{"target": target}
		for k, v := range body {
			req[k] = v
		}
		t0 := time.Now()
		api.must("PUT", "/v1/nodes/vm1/states/provision", req, nil)
		deadline := time.Now().Add(within)
		for {
			got := api.node("vm1")
			if got["provision_state"] == state && got["target_provision_state"] == nil {
				break
			}
			if s, _ := got["provision_state"].(string); s == "error" || len(s) > 7 && s[len(s)-7:] == " failed" || time.Now().After(deadline) {
				t.Fatalf("%s: machine in %v (last error %v)\n%s", target, got["provision_state"], got["last_error"], dump())
			}
			time.Sleep(100 * time.Millisecond)
		}
		t.Logf("%s: %s in %.1f s", target, state, time.Since(t0).Seconds())
		return time.Since(t0)
	}
	step("manage", "manageable", nil, time.Minute)
	step("provide", "available", nil, time.Minute)
	step("active", "active", nil, 5*time.Minute)
	if got, _ := os.ReadFile(disk); !bytes.Equal(got[:len(image)], image) {
		t.Fatalf("the disk does not hold the image after the deploy\n%s", dump())
	}
	waitGuestBoots(t, m, 1, 2*time.Minute, dump)
	const pw = "Vmedia-Rescue-Pw-2207"
	step("rescue", "rescue", map[string]any{"rescue_password": pw}, 5*time.Minute)
	rescueLogin(t, m, pw)
	if md, _ := m.Media(); md.Inserted {
		t.Logf("virtual media still inserted while rescued: %+v", md)
	}
	step("unrescue", "active", nil, 3*time.Minute)
	waitGuestBoots(t, m, 2, 2*time.Minute, dump)
	if md, _ := m.Media(); md.Inserted {
		t.Fatalf("virtual media still inserted after unrescue: %+v", md)
	}
	for _, p := range c.st.Procs {
		if raw, _ := os.ReadFile(p.Log); bytes.Contains(raw, []byte(pw)) || bytes.Contains(raw, []byte(rf.Password)) {
			t.Fatalf("%s's log holds a password", p.Name)
		}
	}
}
