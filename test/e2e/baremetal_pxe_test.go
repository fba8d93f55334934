package e2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/corral/corral/internal/bmc"
	"github.com/corral/corral/internal/bmc/bmctest"
	"github.com/corral/corral/internal/bootstrap"
	"github.com/corral/corral/internal/devcluster"
)

// Addresses of the test's provisioning networks (a namespace of its own).
const (
	bmProvGateway = "10.241.0.1"
	bmImagePort   = 8089 // the image forward on each booting network
	bmMachineMAC  = "52:54:00:e2:e0:01"
	bmTap         = "bme2e-port0"
)

// TestBaremetalIPMIPXEDeployRescue drives one machine through the whole
// bare-metal path with real processes: a dev cluster whose corral-node runs
// provisioning networks (--baremetal-networks) and whose corrald conducts,
// corral-rapi serving the Bare Metal API, a qemu machine behind ipmi_sim
// and corral-bmc on a tap in the node's namespace. The machine is enrolled
// (ipmi, ipxe, bridged, direct, agent rescue), managed, provided, deployed
// (the agent booted over iPXE writes an image it downloads through the
// node's forward, then the config drive to a partition at the disk's end),
// rescued (booted on the rescue network; the rescue user
// logs in on the serial console with the password; the port ends on the
// tenant bridge) and unrescued (booting from its disk).
func TestBaremetalIPMIPXEDeployRescue(t *testing.T) {
	requireRoot(t)
	bmctest.NeedTools(t, "ip", "dnsmasq", "qemu-system-x86_64", "ipmi_sim", "ipmitool", "xorriso")
	if _, err := os.Stat("/usr/lib/ipxe/qemu/efi-virtio.rom"); err != nil {
		bmctest.Require(t, "qemu's iPXE ROM (ipxe-qemu) is not installed: %v", err)
	}
	ramdisk := bmctest.AgentRamdisk(t)
	kernel, initrd := bmctest.GuestImage(t)
	chassis := bmctest.CorralBMC(t)
	start := time.Now()

	dir := bmctest.ShortDir(t)
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	apiPort, imgHostPort := bmctest.FreeTCPPort(t), bmctest.FreeTCPPort(t)
	// The Bare Metal API's certificate, which corrald pins at each ramdisk
	// boot; its key is readable by corral-rapi.
	certFile, keyFile := bmctest.SelfSignedCert(t, dir, "bmapi", "bare metal API e2e")

	// The image the deploy writes, served on the host and reached by the
	// agent through the node's forward on the provisioning network.
	image := make([]byte, 1<<20)
	rand.Read(image)
	copy(image, "CORRAL-E2E-IMAGE")
	// An MBR with one partition (64 KiB to the image's end), where the
	// deploy adds its config drive partition.
	copy(image[446:], []byte{0x80, 0xfe, 0xff, 0xff, 0x83, 0xfe, 0xff, 0xff, 128, 0, 0, 0, 0x80, 0x07, 0, 0})
	clear(image[462:510])
	image[510], image[511] = 0x55, 0xaa
	sum := sha256.Sum256(image)
	imgLn, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(imgHostPort))
	if err != nil {
		t.Fatal(err)
	}
	imgSrv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/image.raw" {
			http.NotFound(w, r)
			return
		}
		http.ServeContent(w, r, "image.raw", time.Time{}, bytes.NewReader(image))
	})}
	go imgSrv.Serve(imgLn)
	t.Cleanup(func() { imgSrv.Close() })

	netns := fmt.Sprintf("corral-e2e%d", os.Getpid())
	netsFile := filepath.Join(dir, "networks.json")
	writeJSON(t, netsFile, map[string]any{
		"netns": netns, "api_target": "127.0.0.1:" + strconv.Itoa(apiPort),
		"forwards": []any{map[string]any{"port": bmImagePort, "target": "127.0.0.1:" + strconv.Itoa(imgHostPort)}},
		"networks": []any{
			map[string]any{"name": "provisioning", "address": bmProvGateway + "/24", "ipv6": "fd00:241::1/64", "boot": true},
			map[string]any{"name": "rescue", "address": "10.242.0.1/24", "ipv6": "fd00:242::1/64", "boot": true},
			map[string]any{"name": "tenant", "address": "10.243.0.1/24"},
		},
	})
	// Registered before the cluster, so it runs after the cluster is down
	// and the machine is off: the node leaves its namespace in place.
	// The node stopped its dnsmasqs but left the namespace (deleting a
	// namespace that is gone fails).
	t.Cleanup(func() {
		if pids := procsMentioning(filepath.Join(dir, "provnet")); len(pids) > 0 {
			t.Errorf("processes of the provisioning networks outlive corral-node: %v", pids)
			for _, pid := range pids {
				syscall.Kill(pid, syscall.SIGKILL)
			}
		}
		if out, err := exec.Command("ip", "netns", "del", netns).CombinedOutput(); err != nil {
			t.Errorf("deleting the namespace %s corral-node leaves in place: %v %s", netns, err, out)
		}
	})

	c := newClusterWith(t, devcluster.Options{
		Hypervisors: []string{"fake"},
		NodeArgs: []string{"--baremetal-networks", netsFile, "--baremetal-state-dir", filepath.Join(dir, "provnet"),
			"--agent-ramdisk", ramdisk},
		CorraldArgs: []string{"--baremetal-api-url", "https://api.invalid:6385", "--baremetal-api-cert", certFile,
			"--rescue-callback-timeout", "3m", "--deploy-callback-timeout", "3m", "--clean-callback-timeout", "3m"},
	})
	t.Logf("dev cluster up with provisioning networks: %s", time.Since(start).Round(100*time.Millisecond))
	api := startBaremetalAPI(t, c, dir, apiPort, certFile, keyFile)

	if out, err := exec.Command("ip", "-n", netns, "tuntap", "add", "dev", bmTap, "mode", "tap").CombinedOutput(); err != nil {
		t.Fatalf("the machine's tap: %v %s", err, out)
	}
	disk := filepath.Join(dir, "disk.img")
	if err := os.WriteFile(disk, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(disk, 64<<20); err != nil {
		t.Fatal(err)
	}
	m, err := bmc.Create(filepath.Join(dir, "m"), bmc.Config{Name: "e2e-pxe", MemoryMB: 256, MAC: bmMachineMAC,
		Network: "tap", Tap: bmTap, NetNS: netns, Disk: disk,
		Kernel: kernel, Initrd: initrd, Append: "console=ttyS0 panic=-1 quiet"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.PowerOff(context.Background()) })
	// Serial-over-LAN: the rescue login below goes through `corral
	// baremetal node console`, the conductor's SOL session with ipmi_sim.
	sim := bmctest.StartIPMISim(t, chassis, m, bmctest.WithSOL())

	node := api.create(t, "/v1/nodes", map[string]any{
		"name": "e2e-pxe", "driver": "ipmi",
		"driver_info": map[string]any{"ipmi_address": "127.0.0.1", "ipmi_port": sim.Port, "ipmi_username": sim.User,
			"ipmi_password": sim.Password, "ipmi_cipher_suite": 3, "kernel_append_params": "console=ttyS0 quiet"},
		"boot_interface": "ipxe", "network_interface": "bridged", "deploy_interface": "direct", "rescue_interface": "agent",
		"console_interface": "ipmitool-sol",
		// One agent boot less: cleaning is the agent's erase of the disk's
		// metadata, proven by the agent's own test.
		"automated_clean": false,
		"instance_info": map[string]any{
			"image_source":        fmt.Sprintf("http://%s:%d/image.raw", bmProvGateway, bmImagePort),
			"image_os_hash_algo":  "sha256",
			"image_os_hash_value": hex.EncodeToString(sum[:]),
			"image_disk_format":   "raw",
		},
	})
	uuid, _ := node["uuid"].(string)
	api.create(t, "/v1/ports", map[string]any{"node_uuid": uuid, "address": bmMachineMAC,
		"local_link_connection": map[string]any{"port_id": bmTap, "switch_id": "52:54:00:00:00:01"}})
	dump := func() string {
		serial, _ := os.ReadFile(m.SerialLogPath())
		if len(serial) > 6000 {
			serial = serial[len(serial)-6000:]
		}
		return fmt.Sprintf("machine console (tail):\n%s", serial)
	}

	api.provision(t, uuid, map[string]any{"target": "manage"}, "manageable", time.Minute, dump)
	api.provision(t, uuid, map[string]any{"target": "provide"}, "available", time.Minute, dump)
	t.Logf("enrolled, managed and provided: %s", time.Since(start).Round(100*time.Millisecond))

	deploy := time.Now()
	const userData = "#cloud-config\nhostname: e2e-pxe\n"
	api.provision(t, uuid, map[string]any{"target": "active",
		"configdrive": map[string]any{"meta_data": map[string]any{"hostname": "e2e-pxe"}, "user_data": userData}},
		"active", 3*time.Minute, dump)
	t.Logf("deploy to active: %s", time.Since(deploy).Round(100*time.Millisecond))
	got, err := os.ReadFile(disk)
	if err != nil {
		t.Fatal(err)
	}
	// The image is there but for its second partition entry, the config
	// drive's: the last 63 MiB of the 64 MiB disk, after the image's
	// partition, holding an ISO labelled config-2 with the user data.
	if !bytes.Equal(got[:462], image[:462]) || !bytes.Equal(got[478:len(image)], image[478:]) {
		t.Fatalf("the disk does not hold the image after the deploy (starts %q)", got[:16])
	}
	checkConfigDrivePartition(t, got, 2, 2048, 129024, userData)
	waitGuestBoots(t, m, 1, 90*time.Second, dump)
	if net := portBridge(t, netns); net != "bm-tenant" {
		t.Fatalf("after the deploy the machine's port is on %q, want bm-tenant", net)
	}

	const password = "Rescue-e2e-42"
	rescue := time.Now()
	api.provision(t, uuid, map[string]any{"target": "rescue", "rescue_password": password}, "rescue", 3*time.Minute, dump)
	t.Logf("rescue to rescue state: %s", time.Since(rescue).Round(100*time.Millisecond))
	if net := portBridge(t, netns); net != "bm-tenant" {
		t.Fatalf("in rescue the machine's port is on %q, want bm-tenant", net)
	}
	// The rescue ramdisk booted on the rescue network.
	leases, _ := os.ReadFile(filepath.Join(dir, "provnet", "dnsmasq", "rescue.leases"))
	if !strings.Contains(string(leases), bmMachineMAC) || !strings.Contains(string(leases), "10.242.0.") {
		t.Fatalf("the rescue network's dnsmasq leased nothing to the machine: %q", leases)
	}
	consoleRescueLogin(t, c, "e2e-pxe", password)

	unrescue := time.Now()
	booted := guestBoots(m)
	api.provision(t, uuid, map[string]any{"target": "unrescue"}, "active", 2*time.Minute, dump)
	waitGuestBoots(t, m, booted+1, 90*time.Second, dump)
	t.Logf("unrescue to the machine's OS booted from disk: %s; whole test %s",
		time.Since(unrescue).Round(100*time.Millisecond), time.Since(start).Round(100*time.Millisecond))
}

func writeJSON(t *testing.T, path string, v any) {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// pxeAPI is a client of the Bare Metal API the test started.
type pxeAPI struct {
	url string
	hc  *http.Client
}

// startBaremetalAPI runs a corral-rapi with the Bare Metal API (noauth)
// on 127.0.0.1:port as the dev cluster runs its own: as corral-rapi, on
// the cluster's LUXI socket.
func startBaremetalAPI(t *testing.T, c *cluster, dir string, port int, certFile, keyFile string) *pxeAPI {
	t.Helper()
	l := bootstrap.Layout{StateDir: c.st.StateDir}
	cred, err := bootstrap.RAPICredential()
	if err != nil {
		t.Fatal(err)
	}
	args := []string{"--bind", "127.0.0.1", "--port", strconv.Itoa(bmctest.FreeTCPPort(t)), "--cert", l.RAPICert(), "--key", l.RAPIKey(),
		"--users", l.RAPIUsers(), "--luxi-socket", c.st.Socket,
		"--baremetal-bind", "127.0.0.1", "--baremetal-port", strconv.Itoa(port), "--baremetal-auth", "noauth",
		"--baremetal-cert", certFile, "--baremetal-key", keyFile}
	logf, err := os.Create(filepath.Join(dir, "corral-rapi-baremetal.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(filepath.Join(binDir, "corral-rapi"), args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		logf.Close()
	})
	api := &pxeAPI{url: "https://127.0.0.1:" + strconv.Itoa(port), hc: &http.Client{Timeout: 30 * time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}}
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := api.hc.Get(api.url + "/")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return api
			}
		}
		if time.Now().After(deadline) {
			data, _ := os.ReadFile(logf.Name())
			t.Fatalf("the Bare Metal API did not answer: %v\n%s", err, data)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (a *pxeAPI) do(t *testing.T, method, path string, body any) (int, map[string]any) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		data, _ := json.Marshal(body)
		rd = bytes.NewReader(data)
	}
	req, _ := http.NewRequest(method, a.url+path, rd)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-OpenStack-Ironic-API-Version", "1.78")
	resp, err := a.hc.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	var out map[string]any
	json.Unmarshal(data, &out)
	if resp.StatusCode >= 300 {
		t.Fatalf("%s %s: %d %s", method, path, resp.StatusCode, data)
	}
	return resp.StatusCode, out
}

func (a *pxeAPI) create(t *testing.T, path string, body any) map[string]any {
	t.Helper()
	_, out := a.do(t, http.MethodPost, path, body)
	return out
}

// provision asks for a provision state change and waits for the machine to
// reach want, failing at once on a failed state.
func (a *pxeAPI) provision(t *testing.T, uuid string, req map[string]any, want string, limit time.Duration, dump func() string) {
	t.Helper()
	a.do(t, http.MethodPut, "/v1/nodes/"+uuid+"/states/provision", req)
	deadline := time.Now().Add(limit)
	last := ""
	for {
		_, n := a.do(t, http.MethodGet, "/v1/nodes/"+uuid, nil)
		state, _ := n["provision_state"].(string)
		target, _ := n["target_provision_state"].(string)
		if state != last {
			t.Logf("  %s: provision_state %s", req["target"], state)
			last = state
		}
		if state == want && target == "" {
			return
		}
		if strings.HasSuffix(state, "failed") || time.Now().After(deadline) {
			t.Fatalf("%s: provision_state %s (want %s), last_error %v\n%s", req["target"], state, want, n["last_error"], dump())
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// portBridge is the bridge the machine's tap is on.
func portBridge(t *testing.T, netns string) string {
	t.Helper()
	out, err := exec.Command("ip", "-n", netns, "-j", "link", "show", "dev", bmTap).Output()
	if err != nil {
		t.Fatalf("the machine's port: %v", err)
	}
	var links []struct {
		Master string `json:"master"`
	}
	if err := json.Unmarshal(out, &links); err != nil || len(links) != 1 {
		t.Fatalf("ip link: %s %v", out, err)
	}
	return links[0].Master
}

// rescueLogin logs in as the rescue user on the machine's serial console
// with the password given to the rescue.
func rescueLogin(t *testing.T, m *bmc.Machine, password string) {
	t.Helper()
	conn, err := net.Dial("unix", m.SerialSocket())
	if err != nil {
		t.Fatalf("serial socket: %v", err)
	}
	defer conn.Close()
	loginAsRescue(t, bmctest.NewSerialConsole(conn, conn), 0, password)
}

// checkConfigDrivePartition checks that the MBR of disk has partition
// number part of type 0x83 at start for sectors, holding an ISO 9660
// volume labelled config-2 whose openstack/latest/user_data is userData.
func checkConfigDrivePartition(t *testing.T, disk []byte, part int, start, sectors uint32, userData string) {
	t.Helper()
	e := disk[446+16*(part-1) : 446+16*part]
	gotStart, gotSectors := binary.LittleEndian.Uint32(e[8:]), binary.LittleEndian.Uint32(e[12:])
	if e[4] != 0x83 || gotStart != start || gotSectors != sectors {
		t.Fatalf("partition %d: type %#x start %d sectors %d, want 0x83 %d %d", part, e[4], gotStart, gotSectors, start, sectors)
	}
	dir := t.TempDir()
	iso := filepath.Join(dir, "configdrive.iso")
	if err := os.WriteFile(iso, disk[int64(start)*512:int64(start+sectors)*512], 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("xorriso", "-indev", iso, "-pvd_info").CombinedOutput()
	if err != nil || !regexp.MustCompile(`(?m)^Volume Id\s*:\s*config-2\s*$`).Match(out) {
		t.Fatalf("partition %d is not an ISO labelled config-2: %v\n%s", part, err, out)
	}
	dst := filepath.Join(dir, "user_data")
	if out, err := exec.Command("xorriso", "-osirrox", "on", "-indev", iso, "-extract", "/openstack/latest/user_data", dst).CombinedOutput(); err != nil {
		t.Fatalf("extracting the user data: %v\n%s", err, out)
	}
	if got, _ := os.ReadFile(dst); string(got) != userData {
		t.Fatalf("the config drive's user_data is %q, want %q", got, userData)
	}
}

// consoleRescueLogin logs in as the rescue user through `corral baremetal
// node console`: the machine's serial console streamed by its conductor
// node over IPMI Serial-over-LAN.
func consoleRescueLogin(t *testing.T, c *cluster, machine, password string) {
	t.Helper()
	s := openCorralConsole(t, c, "baremetal", "node", "console", machine)
	s.rescueLogin(password)
	s.close()
}

// guestBoots counts the boots of the machine's OS (the tiny guest standing
// in for the deployed image's) on its console log.
func guestBoots(m *bmc.Machine) int {
	data, _ := os.ReadFile(m.SerialLogPath())
	return bytes.Count(data, []byte("CORRAL-GUEST-BOOTED"))
}

func waitGuestBoots(t *testing.T, m *bmc.Machine, n int, d time.Duration, dump func() string) {
	t.Helper()
	deadline := time.Now().Add(d)
	for guestBoots(m) < n {
		if time.Now().After(deadline) {
			t.Fatalf("the machine's OS did not boot from its disk (boot %d) within %s\n%s", n, d, dump())
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// procsMentioning lists the processes whose command line holds s.
func procsMentioning(s string) []int {
	var pids []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && bytes.Contains(cmdline, []byte(s)) {
			pids = append(pids, pid)
		}
	}
	return pids
}
