package bmc_test

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/corral/corral/internal/bmc"
	"github.com/corral/corral/internal/bmc/bmctest"
)

// sushyScript drives the Redfish emulator with OpenStack's own Redfish
// library, the one the Bare Metal service uses. It prints one line per
// step and, at each "WAIT", waits for a line on stdin while the test looks
// at the machine.
const sushyScript = `
import sys, time, sushy
url, user, pw, ca, image = sys.argv[1:6]
root = sushy.Sushy(url, username=user, password=pw, verify=ca)
def step(msg):
    print(msg, flush=True)
def wait():
    print("WAIT", flush=True)
    sys.stdin.readline()
systems = root.get_system_collection()
step("systems %s" % ",".join(systems.members_identities))
s = root.get_system(systems.members_identities[0])
step("power %s" % s.power_state.value)
s.set_system_boot_source(sushy.BootSource.PXE, enabled=sushy.BootSourceOverrideEnabled.CONTINUOUS)
s.refresh()
step("boot %s %s" % (s.boot.target.value, s.boot.enabled.value))
wait()
s.set_system_boot_source(sushy.BootSource.HDD, enabled=sushy.BootSourceOverrideEnabled.ONCE)
s.reset_system(sushy.ResetType.ON)
s.refresh()
step("power %s" % s.power_state.value)
wait()
mgr = s.managers[0]
cd = mgr.virtual_media.get_member(mgr.virtual_media.members_identities[0])
cd.insert_media(image, inserted=True, write_protected=True)
cd.refresh()
step("media %s %s" % (cd.inserted, cd.image))
wait()
cd.eject_media()
cd.refresh()
step("media %s %s" % (cd.inserted, cd.image))
s.reset_system(sushy.ResetType.FORCE_OFF)
s.refresh()
step("power %s" % s.power_state.value)
wait()
`

// TestSushyDrivesRedfishEmulator checks that the emulator speaks Redfish as
// a real client expects: python3-sushy lists systems, sets the boot
// override, powers the qemu machine on and off and inserts and ejects a
// virtual CD.
func TestSushyDrivesRedfishEmulator(t *testing.T) {
	python := "/usr/bin/python3"
	if out, err := exec.Command(python, "-c", "import sushy").CombinedOutput(); err != nil {
		bmctest.Require(t, "python3-sushy is not installed: %v %s", err, out)
	}
	m := bmctest.NewMachine(t, "sushy1")
	svc := bmctest.StartRedfish(t, bmctest.CorralBMC(t), m)
	iso := "a CD image for the sushy test"
	files := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, iso) }))
	defer files.Close()

	cmd := exec.Command(python, "-c", sushyScript, svc.URL, svc.User, svc.Password, svc.CAFile, files.URL+"/boot.iso")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	// requests lets REQUESTS_CA_BUNDLE and CURL_CA_BUNDLE override the
	// session's CA file that sushy sets from verify=.
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "REQUESTS_CA_BUNDLE=") && !strings.HasPrefix(kv, "CURL_CA_BUNDLE=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	lines := bufio.NewScanner(stdout)
	// expect reads the script's lines up to its next WAIT and compares them.
	expect := func(want ...string) {
		t.Helper()
		var got []string
		for lines.Scan() {
			if lines.Text() == "WAIT" {
				break
			}
			got = append(got, lines.Text())
		}
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Fatalf("sushy said:\n%s\nwant:\n%s\nstderr:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"), stderr.String())
		}
	}
	resume := func() { fmt.Fprintln(stdin) }

	expect("systems /redfish/v1/Systems/sushy1", "power Off", "boot Pxe Continuous")
	if b, _ := m.BootOverride(); b != (bmc.BootOverride{Device: bmc.BootPXE, Persistent: true}) {
		t.Errorf("machine boot override %+v", b)
	}
	resume()
	expect("power On")
	if !m.PoweredOn() {
		t.Fatal("qemu does not run after sushy's reset On")
	}
	if b, _ := m.BootOverride(); b.Device != bmc.BootNone {
		t.Errorf("the one-time hdd override was not used up by the boot: %+v", b)
	}
	pid, _ := m.PID()
	resume()
	expect("media True " + files.URL + "/boot.iso")
	md, _ := m.Media()
	if data, err := os.ReadFile(md.Path); err != nil || string(data) != iso {
		t.Errorf("inserted media %+v: %q %v", md, data, err)
	}
	resume()
	expect("media False None", "power Off")
	bmctest.WaitPower(t, m, false, 5*time.Second)
	if _, err := os.Stat(fmt.Sprintf("/proc/%d/cmdline", pid)); err == nil && m.PoweredOn() {
		t.Errorf("qemu %d still runs", pid)
	}
	resume()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("sushy script: %v\n%s", err, stderr.String())
	}
}
