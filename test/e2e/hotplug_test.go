package e2e

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/corral/corral/internal/netdev"
)

// guestShell types commands on a kvm guest's serial console and reads
// their output.
type guestShell struct {
	t    *testing.T
	conn net.Conn
	buf  strings.Builder
	n    int
}

func dialGuestShell(t *testing.T, sock string) *guestShell {
	t.Helper()
	conn, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatalf("serial console: %v", err)
	}
	t.Cleanup(func() { conn.Close() })
	return &guestShell{t: t, conn: conn}
}

// run types cmd and returns what it printed. The end marker is computed by
// the guest's shell, so the echoed command line never matches it.
func (g *guestShell) run(cmd string) string {
	g.t.Helper()
	g.n++
	begin, end := fmt.Sprintf("BEGIN-%d-%d", g.n, g.n*7), fmt.Sprintf("END-%d-%d", g.n, g.n*7)
	line := fmt.Sprintf("echo BEGIN-%d-$((%d*7)); %s; echo END-%d-$((%d*7))\n", g.n, g.n, cmd, g.n, g.n)
	if _, err := g.conn.Write([]byte(line)); err != nil {
		g.t.Fatalf("typing %q: %v", cmd, err)
	}
	re := regexp.MustCompile(`(?s)\n` + begin + `\r?\n(.*?)` + end)
	deadline := time.Now().Add(60 * time.Second)
	b := make([]byte, 4096)
	for {
		if m := re.FindStringSubmatch(g.buf.String()); m != nil {
			g.buf.Reset()
			return strings.ReplaceAll(m[1], "\r", "")
		}
		if time.Now().After(deadline) {
			g.t.Fatalf("no output of %q on the console; got %q", cmd, g.buf.String())
		}
		_ = g.conn.SetReadDeadline(time.Now().Add(time.Second))
		n, _ := g.conn.Read(b)
		g.buf.Write(b[:n])
	}
}

// until runs cmd until its output satisfies ok (a guest sees a device a
// moment after qemu added it).
func (g *guestShell) until(what, cmd string, ok func(string) bool) string {
	g.t.Helper()
	var out string
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(500 * time.Millisecond) {
		if out = g.run(cmd); ok(out) {
			return out
		}
		if time.Now().After(deadline) {
			g.t.Fatalf("%s: %q gave %q", what, cmd, out)
		}
	}
}

func memTotalKiB(s string) int {
	m := regexp.MustCompile(`MemTotal:\s+(\d+) kB`).FindStringSubmatch(s)
	if m == nil {
		return 0
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

// TestKVMHotplug: one guest boot; over the CLI a disk and a NIC are
// hot-added and seen by the guest, the new disk grows while running,
// the balloon takes memory away, and both devices are hot-removed again.
func TestKVMHotplug(t *testing.T) {
	requireRoot(t)
	requireQemu(t)
	img := guestImage(t)
	c := newCluster(t, clusterOpts{hypervisors: []string{"kvm", "fake"}, imageDir: img})
	br := fmt.Sprintf("crlhp%d", os.Getpid()%100000)
	if out, err := exec.Command("ip", "link", "add", br, "type", "bridge").CombinedOutput(); err != nil {
		t.Fatalf("creating bridge: %v %s", err, out)
	}
	defer exec.Command("ip", "link", "del", br).Run()
	_ = exec.Command("ip", "link", "set", br, "up").Run()
	c.mustSucceed(map[string]any{
		"OP_ID": "OP_INSTANCE_CREATE", "instance_name": "hp1", "disk_template": "file",
		"disks": []any{map[string]any{"size": 64}}, "os_type": "tiny+default",
		"nics":       []any{map[string]any{"mode": "bridged", "link": br}},
		"hypervisor": "kvm", "beparams": map[string]any{"minmem": 128, "maxmem": 256}, "pnode": "node1",
	})
	socks, _ := filepath.Glob(filepath.Join(c.st.RunDir, "node1", "kvm", "*", "serial.sock"))
	if len(socks) != 1 {
		t.Fatalf("want one serial socket, got %v", socks)
	}
	logs, _ := filepath.Glob(filepath.Join(c.st.RunDir, "node1", "kvm", "*", "serial.log"))
	waitFor(t, 120*time.Second, "the guest to boot", func() bool {
		b, _ := os.ReadFile(logs[0])
		return strings.Contains(string(b), "CORRAL-GUEST-BOOTED name=hp1")
	})
	g := dialGuestShell(t, socks[0])
	corral := func(args ...string) string {
		t.Helper()
		out, err := c.corral(args...)
		if err != nil {
			t.Fatalf("corral %v: %v\n%s", args, err, out)
		}
		return out
	}
	if out := g.run("ls /sys/block; ls /sys/class/net"); strings.Contains(out, "vdb") || strings.Contains(out, "eth1") {
		t.Fatalf("guest already has vdb or eth1: %q", out)
	}
	memBefore := memTotalKiB(g.run("cat /proc/meminfo"))

	out := corral("instance", "modify", "--hotplug", "--disk", "add:size=32M", "--net", "add:mode=bridged,link="+br, "hp1")
	if !strings.Contains(out, "disk/1 -> hotplug:done") || !strings.Contains(out, "nic.1 -> hotplug:done") {
		t.Fatalf("hot add: %s", out)
	}
	// 32 MiB in 512-byte sectors.
	g.until("the hot-added disk in the guest", "cat /sys/block/vdb/size", func(s string) bool { return strings.TrimSpace(s) == "65536" })
	g.until("the hot-added NIC in the guest", "ls /sys/class/net", func(s string) bool { return strings.Contains(s, "eth1") })

	// A hot-modified NIC is replaced: the guest sees the new MAC.
	out = corral("instance", "modify", "--hotplug", "--net", "1:modify,mac=aa:00:00:ab:cd:ef", "hp1")
	if !strings.Contains(out, "nic/1 -> hotplug:done") {
		t.Fatalf("hot modify: %s", out)
	}
	g.until("the replaced NIC's MAC in the guest", "cat /sys/class/net/*/address", func(s string) bool { return strings.Contains(s, "aa:00:00:ab:cd:ef") })

	// Without --hotplug a removal from the running instance is refused.
	if out, err := c.corral("instance", "modify", "--disk", "1:remove", "hp1"); err == nil ||
		!strings.Contains(out, "can't remove volume from a running instance without using hotplug") {
		t.Fatalf("cold removal from a running instance: %v\n%s", err, out)
	}

	// The disk grows under the running guest.
	corral("instance", "grow-disk", "hp1", "1", "32M")
	g.until("the grown disk in the guest", "cat /sys/block/vdb/size", func(s string) bool { return strings.TrimSpace(s) == "131072" })

	// The balloon takes 96 MiB away.
	out = corral("instance", "modify", "-m", "160M", "hp1")
	if !strings.Contains(out, "runtime_memory -> 160") {
		t.Fatalf("runtime memory: %s", out)
	}
	g.until("the balloon in the guest", "cat /proc/meminfo", func(s string) bool {
		m := memTotalKiB(s)
		return m > 0 && m <= memBefore-80*1024
	})
	if out, err := c.corral("instance", "modify", "-m", "512M", "hp1"); err == nil || !strings.Contains(out, "must have memory between 128 and 256 MB") {
		t.Fatalf("runtime memory above maxmem: %v\n%s", err, out)
	}

	// A hot-removed middle device would shift the others' slots: refused.
	if out, err := c.corral("instance", "modify", "--hotplug", "--net", "0:remove", "hp1"); err == nil || !strings.Contains(out, "only the last NIC can be hot-removed") {
		t.Fatalf("hot removal of NIC 0: %v\n%s", err, out)
	}
	out = corral("instance", "modify", "--hotplug", "--disk", "1:remove", "--net", "1:remove", "hp1")
	if !strings.Contains(out, "disk/1 -> hotplug:done") || !strings.Contains(out, "nic/1 -> hotplug:done") {
		t.Fatalf("hot remove: %s", out)
	}
	g.until("the disk gone from the guest", "ls /sys/block", func(s string) bool { return !strings.Contains(s, "vdb") })
	g.until("the NIC gone from the guest", "ls /sys/class/net", func(s string) bool { return !strings.Contains(s, "eth1") })
	if disks := c.instanceField("hp1", "disk.count"); disks != 1.0 {
		t.Errorf("disk.count %v after removal", disks)
	}
}

// TestKVMHotplugThenMigrate: a disk and a NIC hot-added to a running
// instance are on the destination of a live migration, at the same place:
// the destination starts from the configuration with the same device ids
// and PCI slots, and the guest keeps reading what it wrote to the disk.
// Both node daemons run on this host, so the source's and the
// destination's taps of the NIC exist at once under names of their own.
func TestKVMHotplugThenMigrate(t *testing.T) {
	requireRoot(t)
	requireQemu(t)
	img := guestImage(t)
	c := newCluster(t, clusterOpts{nodes: 2, hypervisors: []string{"kvm", "fake"}, imageDir: img})
	shared, err := os.MkdirTemp("", "corral-shared-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(shared) })
	if err := os.Chmod(shared, 0o755); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	if out, err := c.corral("cluster", "modify", "--enabled-disk-templates", "file,diskless,sharedfile",
		"--shared-file-storage-dir", shared, "-H", fmt.Sprintf("kvm:migration_port=%d,migration_bandwidth=1000", port)); err != nil {
		t.Fatalf("cluster modify: %v\n%s", err, out)
	}
	c.mustSucceed(map[string]any{
		"OP_ID": "OP_INSTANCE_CREATE", "instance_name": "vm1", "disk_template": "sharedfile",
		"disks": []any{map[string]any{"size": 64}}, "os_type": "tiny+default", "nics": []any{},
		"hypervisor": "kvm", "beparams": map[string]any{"memory": 128}, "pnode": "node1",
	})
	m := &migrationCluster{cluster: c, uuid: c.instanceField("vm1", "uuid").(string)}
	logPath := filepath.Join(c.st.RunDir, "node1", "kvm", strings.ToLower(m.uuid[:8]), "serial.log")
	waitFor(t, 120*time.Second, "the guest's boot marker", func() bool {
		b, _ := os.ReadFile(logPath)
		return strings.Contains(string(b), "CORRAL-GUEST-BOOTED name=vm1")
	})
	br := fmt.Sprintf("crlhm%d", os.Getpid()%100000)
	if out, err := exec.Command("ip", "link", "add", br, "type", "bridge").CombinedOutput(); err != nil {
		t.Fatalf("creating bridge: %v %s", err, out)
	}
	defer exec.Command("ip", "link", "del", br).Run()
	_ = exec.Command("ip", "link", "set", br, "up").Run()
	g := dialGuestShell(t, m.serialSock("node1"))
	out, err := c.corral("instance", "modify", "--hotplug", "--disk", "add:size=32M", "--net", "add:mode=bridged,link="+br, "vm1")
	if err != nil || !strings.Contains(out, "disk/1 -> hotplug:done") || !strings.Contains(out, "nic.0 -> hotplug:done") {
		t.Fatalf("hot add: %v\n%s", err, out)
	}
	g.until("the hot-added disk", "cat /sys/block/vdb/size", func(s string) bool { return strings.TrimSpace(s) == "65536" })
	g.until("the hot-added NIC", "ls /sys/class/net", func(s string) bool { return strings.Contains(s, "eth0") })
	mac := strings.TrimSpace(g.run("cat /sys/class/net/eth0/address"))
	g.run("echo hotplugged-data > /dev/vdb; sync")
	g.conn.Close() // the serial socket takes one client; the destination's is another
	id, status, res := c.submit(map[string]any{"OP_ID": "OP_INSTANCE_MIGRATE", "instance_name": "vm1", "target_node": "node2"})
	if status != "success" {
		t.Fatalf("migration after hotplug: %s %v\n%s", status, res, m.jobLog(id))
	}
	if on := m.qemuOn(); len(on) != 1 || on["node2"] == 0 {
		t.Fatalf("after the migration the instance's qemu processes are %v", on)
	}
	g2 := dialGuestShell(t, m.serialSock("node2"))
	if out := g2.run("cat /sys/block/vdb/size; head -c 16 /dev/vdb"); !strings.Contains(out, "65536") || !strings.Contains(out, "hotplugged-data") {
		t.Fatalf("the hot-added disk on the destination: %q", out)
	}
	if out := g2.run("cat /sys/class/net/eth0/address"); !strings.Contains(out, mac) {
		t.Fatalf("the hot-added NIC on the destination: %q, want MAC %s", out, mac)
	}
	// The destination's tap is on the bridge; the source's is gone.
	dst, src := netdev.TapName("node2", m.uuid, 0), netdev.TapName("node1", m.uuid, 0)
	links, err := exec.Command("ip", "-o", "link", "show", "master", br).CombinedOutput()
	if err != nil || !strings.Contains(string(links), dst) || strings.Contains(string(links), src) {
		t.Fatalf("taps on %s after the migration: %v\n%s\nwant %s and not %s", br, err, links, dst, src)
	}
	// And it is hot-removed there, by the same id.
	if out, err := c.corral("instance", "modify", "--hotplug", "--disk", "1:remove", "vm1"); err != nil || !strings.Contains(out, "disk/1 -> hotplug:done") {
		t.Fatalf("hot remove after the migration: %v\n%s", err, out)
	}
	g2.until("the disk gone", "ls /sys/block", func(s string) bool { return !strings.Contains(s, "vdb") })
}
