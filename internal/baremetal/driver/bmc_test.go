package driver

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/corral/corral/internal/bmc"
	"github.com/corral/corral/internal/bmc/bmctest"
)

// chassisBoot asks corral-bmc, as ipmi_sim does, which boot device the
// machine has.
func chassisBoot(t *testing.T, bin string, m *bmc.Machine) string {
	t.Helper()
	out, err := exec.Command(bin, "chassis", m.Dir, "get", "boot").CombinedOutput()
	if err != nil {
		t.Fatalf("corral-bmc chassis get boot: %v\n%s", err, out)
	}
	return strings.TrimSpace(string(out))
}

func processGone(pid int) bool {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true
	}
	i := strings.LastIndexByte(string(stat), ')')
	return i > 0 && i+2 < len(stat) && (stat[i+2] == 'Z' || stat[i+2] == 'X')
}

// TestIPMIDriverDrivesIPMISim runs the ipmi driver (ipmitool lanplus)
// against ipmi_sim whose chassis is corral-bmc over a real qemu machine.
func TestIPMIDriverDrivesIPMISim(t *testing.T) {
	m := bmctest.NewMachine(t, "ipmi1")
	bin := bmctest.CorralBMC(t)
	sim := bmctest.StartIPMISim(t, bin, m)
	ctx := context.Background()
	info := map[string]any{
		"ipmi_address": "127.0.0.1", "ipmi_port": float64(sim.Port),
		"ipmi_username": sim.User, "ipmi_password": sim.Password, "ipmi_cipher_suite": "3",
	}
	d, err := New(DriverIPMI, info)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Validate(ctx); err != nil {
		t.Fatalf("validate: %v", err)
	}
	if p, err := d.PowerState(ctx); err != nil || p != PowerOff {
		t.Fatalf("power state = %q, %v; want %q", p, err, PowerOff)
	}
	if err := d.SetBootDevice(ctx, BootPXE, true); err != nil {
		t.Fatal(err)
	}
	if got := chassisBoot(t, bin, m); got != "boot:pxe" {
		t.Errorf("chassis reports %q after bootdev pxe", got)
	}
	if dev, err := d.BootDevice(ctx); err != nil || dev != BootPXE {
		t.Errorf("boot device = %q, %v; want pxe", dev, err)
	}
	if err := d.SetBootDevice(ctx, BootDisk, false); err != nil {
		t.Fatal(err)
	}
	if got := chassisBoot(t, bin, m); got != "boot:default" {
		t.Errorf("chassis reports %q after bootdev disk (IPMI's default device)", got)
	}
	if dev, err := d.BootDevice(ctx); err != nil || dev != BootDisk {
		t.Errorf("boot device = %q, %v; want disk", dev, err)
	}

	if err := d.SetPower(ctx, PowerOn, 20*time.Second); err != nil {
		t.Fatalf("power on: %v", err)
	}
	pid, on := m.PID()
	if !on {
		t.Fatal("qemu does not run after power on")
	}
	cmdline, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if !strings.Contains(string(cmdline), "qemu-system-x86_64") {
		t.Fatalf("pid %d is not qemu: %q", pid, cmdline)
	}
	if p, err := d.PowerState(ctx); err != nil || p != PowerOn {
		t.Fatalf("power state = %q, %v; want %q", p, err, PowerOn)
	}
	if err := d.SetPower(ctx, PowerOff, 20*time.Second); err != nil {
		t.Fatalf("power off: %v", err)
	}
	if !processGone(pid) {
		t.Fatalf("qemu %d still runs after power off", pid)
	}

	// A wrong password fails (after the retries a refused session gets)
	// and the error names neither password.
	bad := map[string]any{}
	for k, v := range info {
		bad[k] = v
	}
	bad["ipmi_password"] = "wrong-Pa55word"
	bd, err := New(DriverIPMI, bad)
	if err != nil {
		t.Fatal(err)
	}
	bd.(*IPMI).pause = 10 * time.Millisecond
	err = bd.Validate(ctx)
	if err == nil {
		t.Fatal("a wrong password was accepted")
	}
	if strings.Contains(err.Error(), "wrong-Pa55word") || strings.Contains(err.Error(), sim.Password) {
		t.Fatalf("error shows a password: %v", err)
	}
}

// TestRedfishDriverDrivesEmulator runs the redfish driver over TLS against
// corral-bmc redfish over one real qemu machine.
func TestRedfishDriverDrivesEmulator(t *testing.T) {
	m := bmctest.NewMachine(t, "rf1")
	bin := bmctest.CorralBMC(t)
	svc := bmctest.StartRedfish(t, bin, m)
	ctx := context.Background()
	info := map[string]any{
		"redfish_address": svc.URL, "redfish_username": svc.User,
		"redfish_password": svc.Password, "redfish_verify_ca": svc.CAFile,
	}
	d, err := New(DriverRedfish, info)
	if err != nil {
		t.Fatal(err)
	}
	d.(*RedfishClient).poll = 100 * time.Millisecond
	if err := d.Validate(ctx); err != nil {
		t.Fatalf("validate: %v", err)
	}

	t.Run("certificate is verified", func(t *testing.T) {
		withSystemCAs := map[string]any{"redfish_address": svc.URL, "redfish_username": svc.User, "redfish_password": svc.Password}
		d, err := New(DriverRedfish, withSystemCAs)
		if err != nil {
			t.Fatal(err)
		}
		err = d.Validate(ctx)
		if err == nil || !strings.Contains(err.Error(), "certificate") {
			t.Fatalf("a self-signed certificate passed the system's CAs: %v", err)
		}
		if strings.Contains(err.Error(), svc.Password) {
			t.Fatalf("error shows the password: %v", err)
		}
	})
	t.Run("wrong password", func(t *testing.T) {
		bad := map[string]any{"redfish_address": svc.URL, "redfish_username": svc.User,
			"redfish_password": "wrong-Pa55word", "redfish_verify_ca": svc.CAFile}
		d, err := New(DriverRedfish, bad)
		if err != nil {
			t.Fatal(err)
		}
		err = d.Validate(ctx)
		if err == nil || strings.Contains(err.Error(), "wrong-Pa55word") || strings.Contains(err.Error(), svc.Password) {
			t.Fatalf("validate with a wrong password: %v", err)
		}
	})
	t.Run("boot device", func(t *testing.T) {
		if err := d.SetBootDevice(ctx, BootCDROM, false); err != nil {
			t.Fatal(err)
		}
		if b, _ := m.BootOverride(); b != (bmc.BootOverride{Device: bmc.BootCDROM}) {
			t.Errorf("machine boot override = %+v, want cdrom once", b)
		}
		if dev, err := d.BootDevice(ctx); err != nil || dev != BootCDROM {
			t.Errorf("boot device = %q, %v", dev, err)
		}
		if err := d.SetBootDevice(ctx, BootDisk, true); err != nil {
			t.Fatal(err)
		}
		if b, _ := m.BootOverride(); b != (bmc.BootOverride{Device: bmc.BootDisk, Persistent: true}) {
			t.Errorf("machine boot override = %+v, want disk continuous", b)
		}
	})
	t.Run("virtual media", func(t *testing.T) {
		iso := []byte("not really an ISO, but a CD's bytes")
		files := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write(iso) }))
		defer files.Close()
		vm := d.(VirtualMedia)
		if err := vm.InsertCD(ctx, files.URL+"/rescue.iso"); err != nil {
			t.Fatal(err)
		}
		md, _ := m.Media()
		got, err := os.ReadFile(md.Path)
		if !md.Inserted || err != nil || string(got) != string(iso) {
			t.Fatalf("media after insert = %+v, file %q, %v", md, got, err)
		}
		if err := vm.EjectCD(ctx); err != nil {
			t.Fatal(err)
		}
		if md, _ := m.Media(); md.Inserted {
			t.Fatalf("media after eject = %+v", md)
		}
	})
	t.Run("power", func(t *testing.T) {
		if err := d.SetPower(ctx, PowerOn, 20*time.Second); err != nil {
			t.Fatalf("power on: %v", err)
		}
		pid, on := m.PID()
		if !on {
			t.Fatal("qemu does not run after power on")
		}
		// The guest listens to the ACPI power button once booted.
		bmctest.WaitSerial(t, m, "CORRAL-GUEST-BOOTED", 90*time.Second)
		// The guest's acpid starts in the background just before the
		// marker; on a loaded machine the first press may come before it
		// listens and is lost, as on real hardware, so press once more.
		if err := d.SetPower(ctx, SoftPowerOff, 30*time.Second); err != nil {
			t.Logf("soft power off, first press: %v; pressing again", err)
			if err := d.SetPower(ctx, SoftPowerOff, 60*time.Second); err != nil {
				t.Fatalf("soft power off: %v", err)
			}
		}
		if !processGone(pid) {
			t.Fatalf("qemu %d runs after soft power off", pid)
		}
		if err := d.SetPower(ctx, Rebooting, 20*time.Second); err != nil {
			t.Fatalf("reboot from off: %v", err)
		}
		pid, on = m.PID()
		if !on {
			t.Fatal("qemu does not run after rebooting")
		}
		if err := d.SetPower(ctx, PowerOff, 20*time.Second); err != nil {
			t.Fatalf("power off: %v", err)
		}
		if !processGone(pid) {
			t.Fatalf("qemu %d runs after power off", pid)
		}
	})
}
