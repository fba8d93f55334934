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
	if _, err := openTap(strings.Repeat("x", 16)); err == nil {
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
	f, err := openTap(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	// Attached with qemu's flags: the device shows the virtio-net header.
	out, err := exec.Command("ip", "-d", "link", "show", "dev", name).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "vnet_hdr") {
		t.Errorf("tap %s after attach: %v %s", name, err, out)
	}
}
