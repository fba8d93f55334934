package e2e

import (
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/corral/corral/internal/hypervisor/kvm/kvmtest"
)

// readRFBBanner connects to a VNC server and returns the protocol version
// line it greets with.
func readRFBBanner(t *testing.T, addr string) string {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatalf("connecting to the VNC console: %v", err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	buf := make([]byte, 12)
	if _, err := io.ReadFull(conn, buf); err != nil {
		t.Fatalf("reading the RFB banner from %s: %v", addr, err)
	}
	return string(buf)
}

// TestKVMConsolesOnNetworkPorts creates kvm instances whose consoles listen
// on TCP: the master gives each a port of Ganeti's range at creation, the
// node hands it to qemu (VNC with TLS and a password on the node's address,
// SPICE), the console op and instance info show it, and removing an
// instance gives its port to the next one. No guest OS is installed: qemu
// listens before any guest code runs.
func TestKVMConsolesOnNetworkPorts(t *testing.T) {
	requireRoot(t)
	requireQemu(t)
	c := newCluster(t, clusterOpts{hypervisors: []string{"kvm", "fake"}})
	ip, _ := c.nodeField("node1", "pip").(string)
	if net.ParseIP(ip) == nil {
		t.Fatalf("node1's primary IP is %q", ip)
	}
	x509Dir := t.TempDir()
	kvmtest.WriteX509Dir(t, x509Dir, "node1")
	pwFile := filepath.Join(t.TempDir(), "vnc-password")
	if err := os.WriteFile(pwFile, []byte("e2eVNCpw\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	create := func(name string, start bool, hv map[string]any) {
		t.Helper()
		c.mustSucceed(map[string]any{
			"OP_ID": "OP_INSTANCE_CREATE", "instance_name": name, "disk_template": "file",
			"disks": []any{map[string]any{"size": 32}}, "nics": []any{}, "no_install": true,
			"hypervisor": "kvm", "beparams": map[string]any{"memory": 128, "vcpus": 1}, "pnode": "node1",
			"hvparams": hv, "start": start,
		})
	}
	port := func(name string) int {
		t.Helper()
		p, ok := c.instanceField(name, "network_port").(float64)
		if !ok {
			t.Fatalf("instance %s has no network_port: %v", name, c.instanceField(name, "network_port"))
		}
		return int(p)
	}

	create("vnc1", true, map[string]any{"vnc_bind_address": ip, "vnc_tls": true, "vnc_x509_path": x509Dir,
		"vnc_password_file": pwFile, "serial_console": false})
	vncPort := port("vnc1")
	if vncPort != 11000 {
		t.Fatalf("first instance's network port is %d, want 11000 (Ganeti's first)", vncPort)
	}
	addr := net.JoinHostPort(ip, strconv.Itoa(vncPort))
	if banner := readRFBBanner(t, addr); banner != "RFB 003.008\n" {
		t.Fatalf("VNC on %s greets with %q", addr, banner)
	}
	res := c.mustSucceed(map[string]any{"OP_ID": "OP_INSTANCE_CONSOLE", "instance_name": "vnc1"})
	cons, _ := res[0].(map[string]any)
	if cons["kind"] != "vnc" || cons["host"] != ip || cons["port"] != float64(vncPort) || cons["display"] != float64(vncPort-5900) {
		t.Errorf("console of vnc1 = %v, want vnc on %s:%d display %d", cons, ip, vncPort, vncPort-5900)
	}
	if info, err := c.corral("instance", "info", "vnc1"); err != nil || !strings.Contains(info, strconv.Itoa(vncPort)) {
		t.Errorf("instance info does not show the network port %d (%v):\n%s", vncPort, err, info)
	}

	create("spice1", true, map[string]any{"spice_bind": ip, "serial_console": false})
	spicePort := port("spice1")
	if spicePort == vncPort || spicePort < 11000 || spicePort > 14999 {
		t.Fatalf("spice1's network port is %d (vnc1 has %d)", spicePort, vncPort)
	}
	conn, err := net.DialTimeout("tcp", net.JoinHostPort(ip, strconv.Itoa(spicePort)), 5*time.Second)
	if err != nil {
		t.Fatalf("SPICE does not listen on its network port: %v", err)
	}
	conn.Close()
	res = c.mustSucceed(map[string]any{"OP_ID": "OP_INSTANCE_CONSOLE", "instance_name": "spice1"})
	if cons, _ := res[0].(map[string]any); cons["kind"] != "spice" || cons["port"] != float64(spicePort) {
		t.Errorf("console of spice1 = %v, want spice on port %d", cons, spicePort)
	}

	// Removing vnc1 frees its port; qemu no longer listens there, and the
	// next kvm instance gets it.
	c.mustSucceed(map[string]any{"OP_ID": "OP_INSTANCE_REMOVE", "instance_name": "vnc1", "shutdown_timeout": 1})
	if conn, err := net.DialTimeout("tcp", addr, 2*time.Second); err == nil {
		conn.Close()
		t.Errorf("something still listens on %s after vnc1 was removed", addr)
	}
	create("vnc2", false, map[string]any{"vnc_bind_address": ip, "serial_console": false})
	if p := port("vnc2"); p != vncPort {
		t.Errorf("vnc2 got port %d, want the freed %d", p, vncPort)
	}
	// No guest answers the power button: stop qemu at once rather than
	// wait for the cluster's teardown to time out.
	c.mustSucceed(map[string]any{"OP_ID": "OP_INSTANCE_REMOVE", "instance_name": "spice1", "shutdown_timeout": 1})
}
