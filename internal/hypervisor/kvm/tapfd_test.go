package kvm

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestOpenTap attaches to a tap the way a hot-added NIC's is opened for
// qemu, and refuses a name the kernel could not hold.
func TestOpenTap(t *testing.T) {
	if _, err := openTap(strings.Repeat("x", 16), 1); err == nil {
		t.Error("a 16-byte tap name was accepted")
	}
	if os.Geteuid() != 0 {
		t.Skip("creating a tap needs root")
	}
	name := "crltaptest0"
	if out, err := exec.Command("ip", "tuntap", "add", "dev", name, "mode", "tap").CombinedOutput(); err != nil {
		t.Skipf("ip tuntap add: %v %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("ip", "link", "del", name).Run() })
	f, err := openTap(name, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer closeAll(f)
	// Attached with qemu's flags: the device shows the virtio-net header.
	out, err := exec.Command("ip", "-d", "link", "show", "dev", name).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "vnet_hdr") {
		t.Errorf("tap %s after attach: %v %s", name, err, out)
	}
}

// TestOpenMultiQueueTap opens one descriptor per queue of a multi-queue
// tap, as virtio_net_queues asks for.
func TestOpenMultiQueueTap(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("creating a tap needs root")
	}
	name := "crltaptest1"
	if out, err := exec.Command("ip", "tuntap", "add", "dev", name, "mode", "tap", "multi_queue").CombinedOutput(); err != nil {
		t.Skipf("ip tuntap add multi_queue: %v %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("ip", "link", "del", name).Run() })
	files, err := openTap(name, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer closeAll(files)
	if len(files) != 2 {
		t.Fatalf("%d descriptors for 2 queues", len(files))
	}
	// A single-queue open of a multi-queue tap is refused by the kernel.
	if f, err := openTap(name, 1); err == nil {
		closeAll(f)
		t.Error("a single-queue attach to a multi-queue tap succeeded")
	}
}
