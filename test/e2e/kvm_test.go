package e2e

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/corral/corral/internal/bootstrap"
	"github.com/corral/corral/internal/devcluster"
	"github.com/corral/corral/internal/netdev"
)

// requireQemu skips without qemu, but fails when CORRAL_REQUIRE_QEMU=1 (CI).
func requireQemu(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("qemu-system-x86_64"); err != nil {
		if os.Getenv("CORRAL_REQUIRE_QEMU") == "1" {
			t.Fatal("qemu-system-x86_64 is required (CORRAL_REQUIRE_QEMU=1) but not installed")
		}
		t.Skip("qemu-system-x86_64 not installed")
	}
}

// guestImage builds (or reuses) the kernel and initramfs for kvm guests.
func guestImage(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(os.TempDir(), "corral-guest-image")
	cmd := exec.Command(filepath.Join(repoDir, "scripts", "build-guest-image.sh"), dir)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building the guest image: %v\n%s", err, out)
	}
	for _, p := range []string{dir, filepath.Join(dir, "vmlinuz"), filepath.Join(dir, "initrd.img")} {
		st, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		mode := os.FileMode(0o644)
		if st.IsDir() {
			mode = 0o755
		}
		_ = os.Chmod(p, mode)
	}
	return dir
}

// waitFor polls cond until it holds or the limit passes.
func waitFor(t *testing.T, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", limit, what)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// qemuPIDs finds qemu processes whose command line carries uuid.
func qemuPIDs(uuid string) []int {
	var out []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		if strings.Contains(string(b), "qemu-system") && strings.Contains(string(b), uuid) {
			out = append(out, pid)
		}
	}
	return out
}

func procUID(t *testing.T, pid int) int {
	t.Helper()
	f, err := os.Open(filepath.Join("/proc", strconv.Itoa(pid), "status"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if strings.HasPrefix(s.Text(), "Uid:") {
			fields := strings.Fields(s.Text())
			uid, _ := strconv.Atoi(fields[2]) // effective uid
			return uid
		}
	}
	t.Fatalf("no Uid line for pid %d", pid)
	return -1
}

func TestKVMInstanceBoots(t *testing.T) {
	requireRoot(t)
	requireQemu(t)
	img := guestImage(t)
	c := newCluster(t, clusterOpts{hypervisors: []string{"kvm", "fake"}, imageDir: img, watcher: 2 * time.Second})
	// A bridge for the guest's NIC: corral-node creates the tap and enslaves it.
	br := fmt.Sprintf("crlbr%d", os.Getpid()%100000)
	if out, err := exec.Command("ip", "link", "add", br, "type", "bridge").CombinedOutput(); err != nil {
		t.Fatalf("creating bridge: %v %s", err, out)
	}
	defer exec.Command("ip", "link", "del", br).Run()
	_ = exec.Command("ip", "link", "set", br, "up").Run()
	op := map[string]any{
		"OP_ID": "OP_INSTANCE_CREATE", "instance_name": "vm1", "disk_template": "file",
		"disks": []any{map[string]any{"size": 64}}, "os_type": "tiny+default",
		"nics":       []any{map[string]any{"mode": "bridged", "link": br}},
		"hypervisor": "kvm", "beparams": map[string]any{"memory": 256}, "pnode": "node1",
		"osparams": map[string]any{"marker": "e2e-marker"},
	}
	c.mustSucceed(op)
	uuid := c.instanceField("vm1", "uuid").(string)
	logs, _ := filepath.Glob(filepath.Join(c.st.RunDir, "node1", "kvm", "*", "serial.log"))
	if len(logs) != 1 {
		t.Fatalf("want one serial log, got %v", logs)
	}
	serial := logs[0]
	booted := func() bool {
		b, _ := os.ReadFile(serial)
		return strings.Contains(string(b), "CORRAL-GUEST-BOOTED name=vm1 marker=e2e-marker")
	}
	waitFor(t, 120*time.Second, "the guest's boot marker on the serial console", booted)

	tap := netdev.TapName("node1", uuid, 0)
	if out, err := exec.Command("ip", "-o", "link", "show", "master", br).CombinedOutput(); err != nil || !strings.Contains(string(out), tap) {
		t.Fatalf("tap %s not on bridge %s: %v %s", tap, br, err, out)
	}

	pids := qemuPIDs(uuid)
	if len(pids) != 1 {
		t.Fatalf("want one qemu process for %s, got %v", uuid, pids)
	}
	qemu, err := bootstrap.Lookup(bootstrap.QemuUser)
	if err != nil {
		t.Fatal(err)
	}
	if uid := procUID(t, pids[0]); uid != qemu.UID || uid == 0 {
		t.Fatalf("qemu runs as uid %d, want %s (%d)", uid, bootstrap.QemuUser, qemu.UID)
	}
	if s := c.instanceField("vm1", "status"); s != "running" {
		t.Fatalf("status %v", s)
	}

	// Verify is clean: the qemu process is accounted for, the disk is sound.
	if out, err := c.corral("cluster", "verify"); err != nil {
		t.Fatalf("cluster verify with a running guest: %v\n%s", err, out)
	}

	// The serial console reaches the guest's shell through the node daemon.
	cmd := exec.Command(filepath.Join(binDir, "corral"), "instance", "console", "vm1")
	cmd.Env = append(os.Environ(), "CORRAL_STATE_DIR="+c.st.StateDir, "CORRAL_RUN_DIR="+c.st.RunDir, "CORRAL_SOCKET="+c.st.Socket)
	stdin, _ := cmd.StdinPipe()
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		time.Sleep(time.Second)
		_, _ = stdin.Write([]byte("\necho console-$((6*7))\n"))
		time.Sleep(2 * time.Second)
		_, _ = stdin.Write([]byte{0x1d})
	}()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil || !strings.Contains(out.String(), "console-42") {
			t.Fatalf("console: %v, output %q", err, out.String())
		}
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatalf("console did not finish; output %q", out.String())
	}

	// Restarting the node daemon leaves the guest running, and the new
	// daemon finds it again.
	np := c.proc("corral-node node1")
	_ = exec.Command("kill", strconv.Itoa(np.PID)).Run()
	waitFor(t, 20*time.Second, "corral-node to exit", func() bool {
		b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(np.PID), "stat"))
		return err != nil || strings.Contains(string(b), ") Z ")
	})
	if p := qemuPIDs(uuid); len(p) != 1 || p[0] != pids[0] {
		t.Fatalf("qemu did not survive the node daemon's exit: %v", p)
	}
	if _, err := devcluster.Restart(c.st, "corral-node node1"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "the restarted node daemon to report vm1 running", func() bool {
		return c.instanceField("vm1", "status") == "running"
	})

	// The watcher restarts an instance that should run but died.
	_ = exec.Command("kill", "-9", strconv.Itoa(pids[0])).Run()
	waitFor(t, 60*time.Second, "the watcher to restart vm1", func() bool {
		p := qemuPIDs(uuid)
		return len(p) == 1 && p[0] != pids[0]
	})
	waitFor(t, 60*time.Second, "vm1 to report running", func() bool { return c.instanceField("vm1", "status") == "running" })
	waitFor(t, 120*time.Second, "the restarted guest's boot marker", booted)

	// Shutdown through QMP (ACPI powerdown): the qemu process goes away.
	c.mustSucceed(map[string]any{"OP_ID": "OP_INSTANCE_SHUTDOWN", "instance_name": "vm1", "timeout": 60})
	if p := qemuPIDs(uuid); len(p) != 0 {
		t.Fatalf("qemu still running after shutdown: %v", p)
	}
	if s := c.instanceField("vm1", "status"); s != "ADMIN_down" {
		t.Fatalf("status after shutdown %v", s)
	}
	if err := exec.Command("ip", "link", "show", tap).Run(); err == nil {
		t.Fatalf("tap %s left after shutdown", tap)
	}
}
