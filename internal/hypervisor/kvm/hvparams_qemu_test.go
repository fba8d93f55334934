package kvm

import (
	"bytes"
	"context"
	"crypto/des"
	"encoding/binary"
	"encoding/json"
	"io"
	"math/bits"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/corral/corral/internal/hypervisor"
	"github.com/corral/corral/internal/hypervisor/kvm/kvmtest"
	"github.com/corral/corral/internal/netdev"
)

// startParamsQemu starts a real qemu (TCG, no disks: the firmware finds
// nothing to boot and waits) with hv, and returns a QMP client to it.
func startParamsQemu(t *testing.T, name string, vcpus int, port int, hv map[string]string) (*Hypervisor, *qmpClient, int) {
	t.Helper()
	if _, err := exec.LookPath("qemu-system-x86_64"); err != nil {
		requireQemu(t, "qemu-system-x86_64 is not installed")
	}
	qemuUID(t)
	h, err := New(Options{RunDir: shortDir(t), StateDir: t.TempDir(), CgroupMountinfo: "none"})
	if err != nil {
		t.Fatal(err)
	}
	spec := hypervisor.InstanceSpec{Name: name, UUID: randomUUID(t), MemoryMiB: 64, VCPUs: vcpus, NetworkPort: port, HVParams: hv}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	t.Cleanup(func() { _ = h.Stop(context.Background(), name, 0, true) })
	if err := h.Start(ctx, spec); err != nil {
		t.Fatal(err)
	}
	rec, pid, err := h.find(name)
	if err != nil || pid == 0 {
		t.Fatalf("find: %v, pid %d", err, pid)
	}
	c, err := dialQMP(ctx, rec.path(fileQMP))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return h, c, pid
}

func qmpJSON(t *testing.T, c *qmpClient, cmd string, args, out any) {
	t.Helper()
	raw, err := c.Execute(context.Background(), cmd, args)
	if err != nil {
		t.Fatalf("%s: %v", cmd, err)
	}
	if err := json.Unmarshal(raw, out); err != nil {
		t.Fatalf("%s: %v: %s", cmd, err, raw)
	}
}

func hmp(t *testing.T, c *qmpClient, line string) string {
	t.Helper()
	var out string
	qmpJSON(t, c, "human-monitor-command", map[string]string{"command-line": line}, &out)
	return out
}

// freeVNCPort finds a TCP port of at least 5900 nobody listens on.
func freeVNCPort(t *testing.T) int {
	t.Helper()
	for p := 5950 + os.Getpid()%500; p < 6999; p++ {
		l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
		if err == nil {
			l.Close()
			return p
		}
	}
	t.Fatal("no free port")
	return 0
}

// TestQemuHonoursHVParams starts a real qemu with the CPU, VNC, memory,
// USB, sound and guest agent parameters and asks qemu (and /proc) whether
// each took effect.
func TestQemuHonoursHVParams(t *testing.T) {
	if runtime.NumCPU() < 2 {
		t.Skip("pinning two vCPUs apart needs two CPUs")
	}
	x509Dir, memDir := shortDir(t), shortDir(t)
	kvmtest.WriteX509Dir(t, x509Dir, "localhost")
	if uid, gid := qemuUID(t); uid >= 0 {
		if err := os.Chown(memDir, uid, gid); err != nil {
			t.Fatal(err)
		}
	}
	const secret = "s3cr3tpw"
	pwFile := filepath.Join(shortDir(t), "vnc.pw")
	if err := os.WriteFile(pwFile, []byte(secret+"\nignored\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	port := freeVNCPort(t)
	hv := map[string]string{
		"cpu_mask": "1:0", "cpu_cores": "2", "cpu_sockets": "1", "cpu_threads": "1",
		"vnc_bind_address": "127.0.0.1", "vnc_tls": "true", "vnc_x509_path": x509Dir, "vnc_x509_verify": "true",
		"vnc_password_file": pwFile, "keymap": "de",
		"mem_path": memDir, "usb_mouse": "tablet", "soundhw": "hda", "use_guest_agent": "true",
		"kvm_extra": "-device pci-testdev,id=extra0", "serial_console": "false",
	}
	h, c, pid := startParamsQemu(t, "params1.example.org", 2, port, hv)

	// cpu_mask: each vCPU thread is pinned to its own CPU.
	var cpus []struct {
		Index  int `json:"cpu-index"`
		Thread int `json:"thread-id"`
		Props  struct {
			Core   int `json:"core-id"`
			Socket int `json:"socket-id"`
		} `json:"props"`
	}
	qmpJSON(t, c, "query-cpus-fast", nil, &cpus)
	if len(cpus) != 2 {
		t.Fatalf("query-cpus-fast: %+v", cpus)
	}
	wantCPU := map[int]string{0: "1", 1: "0"}
	for _, cpu := range cpus {
		data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/task/" + strconv.Itoa(cpu.Thread) + "/status")
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(data), "Cpus_allowed_list:\t"+wantCPU[cpu.Index]+"\n") {
			t.Errorf("vCPU %d (thread %d) not pinned to CPU %s:\n%s", cpu.Index, cpu.Thread, wantCPU[cpu.Index], data)
		}
		// cpu_cores=2, one socket: the two vCPUs are cores 0 and 1 of socket 0.
		if cpu.Props.Socket != 0 || cpu.Props.Core != cpu.Index {
			t.Errorf("vCPU %d topology %+v, want core %d of socket 0", cpu.Index, cpu.Props, cpu.Index)
		}
	}

	// VNC: TLS with x509 client verification, and a password.
	var vnc []struct {
		Auth     string `json:"auth"`
		VEncrypt string `json:"vencrypt"`
		Server   []struct {
			Service string `json:"service"`
		} `json:"server"`
	}
	qmpJSON(t, c, "query-vnc-servers", nil, &vnc)
	if len(vnc) != 1 || vnc[0].Auth != "vencrypt" || vnc[0].VEncrypt != "x509-vnc" {
		t.Errorf("query-vnc-servers = %+v, want vencrypt with x509-vnc", vnc)
	}
	if len(vnc) == 1 && (len(vnc[0].Server) == 0 || vnc[0].Server[0].Service != strconv.Itoa(port)) {
		t.Errorf("VNC serves %+v, want port %d", vnc[0].Server, port)
	}
	cmdline, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(cmdline), secret) {
		t.Error("the VNC password is on qemu's command line")
	}
	rec, _, _ := h.find("params1.example.org")
	if log, _ := os.ReadFile(rec.path(fileStartLog)); strings.Contains(string(log), secret) {
		t.Error("the VNC password is in qemu's log")
	}

	// mem_path: guest memory is a file backend in the directory.
	var memdevs []struct {
		ID       string `json:"id"`
		Size     int64  `json:"size"`
		Share    bool   `json:"share"`
		Prealloc bool   `json:"prealloc"`
	}
	qmpJSON(t, c, "query-memdev", nil, &memdevs)
	if len(memdevs) != 1 || memdevs[0].ID != memBackendID || memdevs[0].Size != 64<<20 || !memdevs[0].Share || !memdevs[0].Prealloc {
		t.Errorf("query-memdev = %+v", memdevs)
	}
	var memPath string
	qmpJSON(t, c, "qom-get", map[string]string{"path": "/objects/" + memBackendID, "property": "mem-path"}, &memPath)
	if memPath != memDir {
		t.Errorf("memory backend mem-path %q, want %q", memPath, memDir)
	}

	// USB tablet, sound card, extra device, guest agent channel.
	if usb := hmp(t, c, "info usb"); !strings.Contains(usb, "QEMU USB Tablet") {
		t.Errorf("info usb:\n%s", usb)
	}
	var peripherals []struct {
		Name string `json:"name"`
	}
	qmpJSON(t, c, "qom-list", map[string]string{"path": "/machine/peripheral"}, &peripherals)
	have := map[string]bool{}
	for _, p := range peripherals {
		have[p.Name] = true
	}
	for _, id := range []string{"hda0", "usb0", "extra0", guestAgentID + "serial"} {
		if !have[id] {
			t.Errorf("no device %s among %+v", id, peripherals)
		}
	}
	var chardevs []struct {
		Label    string `json:"label"`
		Filename string `json:"filename"`
	}
	qmpJSON(t, c, "query-chardev", nil, &chardevs)
	found := false
	for _, cd := range chardevs {
		if cd.Label == guestAgentID && strings.Contains(cd.Filename, rec.path(fileGuestAgent)) {
			found = true
		}
	}
	if !found {
		t.Errorf("no guest agent chardev on %s: %+v", rec.path(fileGuestAgent), chardevs)
	}
}

// TestQemuSpiceParams starts a real qemu with SPICE and a password and checks
// query-spice.
func TestQemuSpiceParams(t *testing.T) {
	pwFile := filepath.Join(shortDir(t), "spice.pw")
	if err := os.WriteFile(pwFile, []byte("spicepw\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	port := freeVNCPort(t)
	hv := map[string]string{
		"spice_bind": "127.0.0.1", "spice_password_file": pwFile, "spice_image_compression": "quic",
		"spice_streaming_video": "off", "spice_use_vdagent": "true", "serial_console": "false",
	}
	_, c, _ := startParamsQemu(t, "spice1.example.org", 1, port, hv)
	var spice struct {
		Enabled bool   `json:"enabled"`
		Auth    string `json:"auth"`
		Port    int    `json:"port"`
		Host    string `json:"host"`
	}
	qmpJSON(t, c, "query-spice", nil, &spice)
	if !spice.Enabled || spice.Auth != "spice" || spice.Port != port || spice.Host != "127.0.0.1" {
		t.Errorf("query-spice = %+v, want enabled on 127.0.0.1:%d with spice auth", spice, port)
	}
}

// TestQemuStartRefusesBadHostParams: what only the node can check stops the
// start with a clear error and leaves no qemu behind.
func TestQemuStartRefusesBadHostParams(t *testing.T) {
	qemuUID(t)
	h, err := New(Options{RunDir: shortDir(t), StateDir: t.TempDir(), CgroupMountinfo: "none"})
	if err != nil {
		t.Fatal(err)
	}
	for hvKey, tc := range map[string]struct {
		hv   map[string]string
		want string
	}{
		"cpu_mask":  {map[string]string{"cpu_mask": "0:1:0"}, "doesn't match the number of CPU mask entries"},
		"vhost_net": {map[string]string{"vhost_net": "true"}, "vhost_net needs"},
		"mem_path":  {map[string]string{"mem_path": "/nonexistent/hugepages"}, "mem_path"},
	} {
		if hvKey == "vhost_net" {
			if _, err := os.Stat(vhostNetDevice); err == nil {
				continue // this node has vhost-net
			}
		}
		spec := hypervisor.InstanceSpec{Name: "bad-" + strings.ReplaceAll(hvKey, "_", "-"), UUID: randomUUID(t), MemoryMiB: 64, VCPUs: 2, HVParams: tc.hv}
		err := h.Start(context.Background(), spec)
		if err == nil {
			_ = h.Stop(context.Background(), spec.Name, 0, true)
			t.Errorf("%s: started", hvKey)
			continue
		}
		if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %q lacks %q", hvKey, err, tc.want)
		}
	}
	if list, _ := h.List(context.Background()); len(list) != 0 {
		t.Errorf("instances left: %+v", list)
	}
}

// vncAuth runs the RFB 3.8 handshake with VNC authentication (DES of the
// server's challenge, keyed by the password with each byte's bits reversed)
// and reports whether the server accepted the password.
func vncAuth(t *testing.T, sock, password string) bool {
	t.Helper()
	conn, err := net.DialTimeout("unix", sock, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	read := func(n int) []byte {
		b := make([]byte, n)
		if _, err := io.ReadFull(conn, b); err != nil {
			t.Fatalf("vnc: %v", err)
		}
		return b
	}
	if v := read(12); string(v) != "RFB 003.008\n" {
		t.Fatalf("vnc version %q", v)
	}
	_, _ = conn.Write([]byte("RFB 003.008\n"))
	types := read(int(read(1)[0]))
	if !bytes.Contains(types, []byte{2}) {
		t.Fatalf("vnc offers security types %v, not VNC authentication", types)
	}
	_, _ = conn.Write([]byte{2})
	challenge := read(16)
	key := make([]byte, 8)
	copy(key, password)
	for i, b := range key {
		key[i] = bits.Reverse8(b)
	}
	block, err := des.NewCipher(key)
	if err != nil {
		t.Fatal(err)
	}
	resp := make([]byte, 16)
	block.Encrypt(resp[:8], challenge[:8])
	block.Encrypt(resp[8:], challenge[8:])
	_, _ = conn.Write(resp)
	return binary.BigEndian.Uint32(read(4)) == 0
}

// TestQemuVNCPasswordFromFile: the password file's first line, set over QMP
// after start, is the one a VNC client must give.
func TestQemuVNCPasswordFromFile(t *testing.T) {
	pwFile := filepath.Join(shortDir(t), "vnc.pw")
	if err := os.WriteFile(pwFile, []byte("tiger12\nnot-this-one\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	hv := map[string]string{"vnc_bind_address": "unix", "vnc_password_file": pwFile, "serial_console": "false"}
	h, _, _ := startParamsQemu(t, "vncpw1.example.org", 1, 0, hv)
	rec, _, _ := h.find("vncpw1.example.org")
	if vncAuth(t, rec.path(fileVNC), "not-this") {
		t.Error("VNC accepted a wrong password")
	}
	if !vncAuth(t, rec.path(fileVNC), "tiger12") {
		t.Error("VNC refused the password from the file")
	}
}

// TestQemuMultiQueueNIC starts a real qemu with a paravirtual NIC of two
// queue pairs on a multi-queue tap the way the node creates it.
func TestQemuMultiQueueNIC(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("creating a tap needs root")
	}
	if _, err := exec.LookPath("qemu-system-x86_64"); err != nil {
		requireQemu(t, "qemu-system-x86_64 is not installed")
	}
	uid, _ := qemuUID(t)
	uuid := randomUUID(t)
	tap := netdev.TapName("node1", uuid, 0)
	if err := netdev.CreateTapQueues(tap, strconv.Itoa(uid), netdev.ModeRouted, "", "", true); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = netdev.DeleteTap(tap) })
	h, err := New(Options{RunDir: shortDir(t), StateDir: t.TempDir(), CgroupMountinfo: "none"})
	if err != nil {
		t.Fatal(err)
	}
	name := "mq1.example.org"
	spec := hypervisor.InstanceSpec{Name: name, UUID: uuid, MemoryMiB: 64, VCPUs: 2,
		HVParams: map[string]string{"virtio_net_queues": "2", "serial_console": "false"},
		NICs:     []hypervisor.NICSpec{{Index: 0, MAC: "aa:00:00:00:00:42", Mode: netdev.ModeRouted, Tap: tap}}}
	t.Cleanup(func() { _ = h.Stop(context.Background(), name, 0, true) })
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := h.Start(ctx, spec); err != nil {
		t.Fatal(err)
	}
	rec, _, _ := h.find(name)
	c, err := dialQMP(ctx, rec.path(fileQMP))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var mq bool
	qmpJSON(t, c, "qom-get", map[string]string{"path": "/machine/peripheral/nic0", "property": "mq"}, &mq)
	if !mq {
		t.Error("nic0 is not multi-queue")
	}
	if info := hmp(t, c, "info network"); strings.Count(info, "ifname="+tap) != 2 {
		t.Errorf("want two queues on %s:\n%s", tap, info)
	}
}

// TestQemuCPUMaskOneEntryPinsProcess: a cpu_mask of one entry places every
// thread of qemu, not only the vCPUs.
func TestQemuCPUMaskOneEntryPinsProcess(t *testing.T) {
	if runtime.NumCPU() < 2 {
		t.Skip("needs two CPUs")
	}
	_, _, pid := startParamsQemu(t, "pin1.example.org", 2, 0, map[string]string{"cpu_mask": "1", "serial_console": "false"})
	tasks, err := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/task")
	if err != nil {
		t.Fatal(err)
	}
	if len(tasks) < 3 {
		t.Fatalf("qemu has %d threads, want the main one and two vCPUs at least", len(tasks))
	}
	for _, task := range tasks {
		data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/task/" + task.Name() + "/status")
		if err != nil {
			continue // the thread ended
		}
		if !strings.Contains(string(data), "Cpus_allowed_list:\t1\n") {
			t.Errorf("thread %s not pinned to CPU 1", task.Name())
		}
	}
}
