package kvm

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/corral/corral/internal/bmc/bmctest"
	"github.com/corral/corral/internal/hypervisor"
)

const qemuUser = "corral-qemu"

// requireQemu skips the test when qemu is unavailable, or fails it when
// CORRAL_REQUIRE_QEMU=1 says this machine must be able to boot guests.
func requireQemu(t *testing.T, why string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(why, args...)
	if os.Getenv("CORRAL_REQUIRE_QEMU") == "1" {
		t.Fatalf("CORRAL_REQUIRE_QEMU=1 but %s", msg)
	}
	t.Skip(msg)
}

func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs("../../..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "scripts", "build-guest-image.sh")); err != nil {
		t.Fatalf("repository root not found from %s: %v", root, err)
	}
	return root
}

// guestImage builds (or reuses) the kernel and initramfs in a cache shared by
// test runs.
func guestImage(t *testing.T, root string) (kernel, initrd string) {
	t.Helper()
	cache := filepath.Join(os.TempDir(), "corral-guest-cache")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, filepath.Join(root, "scripts", "build-guest-image.sh"), cache).CombinedOutput()
	if err != nil {
		requireQemu(t, "the guest image could not be built: %v\n%s", err, out)
	}
	t.Logf("guest image: %s", bytes.TrimSpace(out))
	return filepath.Join(cache, "vmlinuz"), filepath.Join(cache, "initrd.img")
}

// qemuUID makes sure the unprivileged qemu user exists when running as root
// and returns its uid; -1 when not root (qemu then keeps the test's user).
func qemuUID(t *testing.T) (int, int) {
	t.Helper()
	if os.Geteuid() != 0 {
		return -1, -1
	}
	u, err := user.Lookup(qemuUser)
	if err != nil {
		out, err := exec.Command("useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", qemuUser).CombinedOutput()
		if err != nil {
			t.Fatalf("useradd %s: %v\n%s", qemuUser, err, out)
		}
		if u, err = user.Lookup(qemuUser); err != nil {
			t.Fatal(err)
		}
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return uid, gid
}

func randomUUID(t *testing.T) string {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:])
}

// TestBootTinyGuest boots one real guest: the OS definition os/tiny installed
// on a disk, started by the driver as the unprivileged qemu user, found again
// by a second driver (a node daemon restart), used through its serial console
// and shut down through ACPI.
func TestBootTinyGuest(t *testing.T) {
	if _, err := exec.LookPath("qemu-system-x86_64"); err != nil {
		requireQemu(t, "qemu-system-x86_64 is not installed")
	}
	if testing.Short() && os.Getenv("CORRAL_REQUIRE_QEMU") != "1" {
		t.Skip("boots a guest; skipped in -short mode")
	}
	root := repoRoot(t)
	kernel, initrd := guestImage(t, root)
	uid, gid := qemuUID(t)

	// The disk: a sparse 64 MiB file with the tiny OS installed on it.
	diskDir := shortDir(t)
	if err := os.Chmod(diskDir, 0o755); err != nil {
		t.Fatal(err)
	}
	disk := filepath.Join(diskDir, "disk0")
	if err := os.WriteFile(disk, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(disk, 64<<20); err != nil {
		t.Fatal(err)
	}
	name, uuid, marker := "tiny1.example.org", randomUUID(t), "boot-"+strconv.Itoa(os.Getpid())
	create := exec.Command(filepath.Join(root, "os", "tiny", "create"))
	create.Dir = filepath.Join(root, "os", "tiny")
	create.Env = []string{
		"PATH=/sbin:/bin:/usr/sbin:/usr/bin", "OS_API_VERSION=20", "OS_NAME=tiny", "OS_VARIANT=default",
		"DEBUG_LEVEL=0", "OSP_MARKER=" + marker, "INSTANCE_NAME=" + name, "INSTANCE_OS=tiny+default",
		"INSTANCE_UUID=" + uuid, "HYPERVISOR=kvm", "DISK_COUNT=1", "DISK_0_PATH=" + disk, "DISK_0_ACCESS=rw",
		"DISK_0_SIZE=64", "DISK_0_UUID=" + randomUUID(t), "DISK_0_BACKEND_TYPE=file:loop", "NIC_COUNT=0",
	}
	if out, err := create.CombinedOutput(); err != nil {
		t.Fatalf("os/tiny/create: %v\n%s", err, out)
	}
	if st, err := os.Stat(disk); err != nil || st.Size() != 64<<20 {
		t.Fatalf("create changed the disk size: %v, %v", st, err)
	}
	if uid >= 0 { // the node daemon's job: the disk belongs to qemu's user
		if err := os.Chown(disk, uid, gid); err != nil {
			t.Fatal(err)
		}
	}

	ctx := context.Background()
	opts := Options{RunDir: shortDir(t), StateDir: t.TempDir()}
	h, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	spec := hypervisor.InstanceSpec{
		Name: name, UUID: uuid, MemoryMiB: 192, VCPUs: 1,
		HVParams: map[string]string{
			"kernel_path": kernel, "initrd_path": initrd, "root_path": "/dev/vda", "kernel_args": "ro quiet",
			"serial_console": "true",
		},
		Disks: []hypervisor.DiskSpec{{Index: 0, Path: disk, SizeMiB: 64}},
	}
	t.Cleanup(func() { _ = h.Stop(context.Background(), name, 0, true) })
	sctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	if err := h.Start(sctx, spec); err != nil {
		t.Fatal(err)
	}
	started := time.Now()
	logPath := h.ConsoleLog(name)
	bmctest.WaitFile(t, logPath, "CORRAL-GUEST-BOOTED name="+name+" marker="+marker, 60*time.Second)
	t.Logf("guest booted %s after Start returned", time.Since(started).Round(time.Millisecond))

	info, err := h.Info(ctx, name)
	if err != nil || info == nil || info.State != hypervisor.StateRunning || info.PID <= 0 {
		t.Fatalf("Info = %+v, %v", info, err)
	}
	st, err := readProcStatus(info.PID)
	if err != nil {
		t.Fatal(err)
	}
	wantUID := uid
	if wantUID < 0 {
		wantUID = os.Getuid()
	}
	if st.UID != wantUID {
		t.Fatalf("qemu runs as uid %d, want %d", st.UID, wantUID)
	}
	if wantUID == 0 {
		t.Fatal("qemu runs as root")
	}

	// The serial console is a shell.
	con, err := h.Console(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	if dl, ok := con.(interface{ SetDeadline(time.Time) error }); ok {
		_ = dl.SetDeadline(time.Now().Add(30 * time.Second))
	}
	if _, err := io.WriteString(con, "\necho corral-$((6*7))\n"); err != nil {
		t.Fatal(err)
	}
	var seen []byte
	buf := make([]byte, 4096)
	for !bytes.Contains(seen, []byte("corral-42")) {
		n, err := con.Read(buf)
		seen = append(seen, buf[:n]...)
		if err != nil {
			t.Fatalf("console: %v; got %q", err, seen)
		}
	}
	con.Close()

	// A restarted node daemon finds the instance.
	h2, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	list, err := h2.List(ctx)
	if err != nil || len(list) != 1 || list[0].Name != name || list[0].PID != info.PID || list[0].State != hypervisor.StateRunning {
		t.Fatalf("List after restart = %+v, %v", list, err)
	}

	// Keep the log open: Stop removes the run directory.
	logf, err := os.Open(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	stopping := time.Now()
	if err := h2.Stop(ctx, name, 30*time.Second, false); err != nil {
		t.Fatal(err)
	}
	t.Logf("guest powered off in %s", time.Since(stopping).Round(time.Millisecond))
	if processIsInstance(info.PID, uuid) {
		t.Fatal("qemu still runs after Stop")
	}
	rest, _ := io.ReadAll(logf)
	if !strings.Contains(string(rest), "CORRAL-GUEST-POWERDOWN") {
		t.Fatalf("the guest did not see the ACPI power button; log:\n%s", rest)
	}
	if info, err := h.Info(ctx, name); info != nil || err != nil {
		t.Fatalf("Info after Stop = %+v, %v", info, err)
	}
}
