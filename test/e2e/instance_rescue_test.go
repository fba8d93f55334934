package e2e

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/corral/corral/internal/bmc/bmctest"
	"github.com/corral/corral/internal/bootstrap"
	"github.com/corral/corral/internal/devcluster"
)

// TestInstanceRescue rescues a running kvm instance on a dev cluster whose
// node has the agent's rescue ramdisk (corral-node --agent-ramdisk), with
// real qemu (TCG) boots: one into the rescue ramdisk, one back into the
// instance's own system. The instance is confined (uid pool, chroot): qemu
// runs under the instance's own uid, and still boots the root-only rescue
// initrd. The rescue user logs in on `corral instance console` with the
// password given to `corral instance rescue` in a file, finds the
// instance's disk, reads its own system's files and leaves a note on it.
// Info shows the rescue state and condition, also after corrald restarts;
// a start is refused while rescued. Unrescue boots the instance's own
// system, which finds the note; the status and the rescue initrd are gone.
// The password shows nowhere: not in the job, the daemons' logs or the
// console log, nor does its hash.
func TestInstanceRescue(t *testing.T) {
	requireRoot(t)
	bmctest.NeedTools(t, "qemu-system-x86_64")
	ramdisk := bmctest.AgentRamdisk(t)
	kernel, _ := bmctest.GuestImage(t)
	start := time.Now()
	c := newClusterWith(t, devcluster.Options{Hypervisors: []string{"kvm", "fake"}, ImageDir: filepath.Dir(kernel),
		WatcherEvery: time.Second, NodeArgs: []string{"--agent-ramdisk", ramdisk}})
	t.Logf("dev cluster up: %s", time.Since(start).Round(100*time.Millisecond))

	// Uids far above any real account, apart from the other kvm tests'.
	const uidLow, uidHigh = 3998020, 3998021
	if out, err := c.corral("cluster", "modify", "--uid-pool", strconv.Itoa(uidLow)+"-"+strconv.Itoa(uidHigh)); err != nil {
		t.Fatalf("cluster modify --uid-pool: %v\n%s", err, out)
	}
	const name, marker = "resc1", "irescue-own-system"
	c.mustSucceed(map[string]any{
		"OP_ID": "OP_INSTANCE_CREATE", "instance_name": name, "disk_template": "file",
		"disks": []any{map[string]any{"size": 32}}, "nics": []any{}, "os_type": "tiny+default",
		"hypervisor": "kvm", "beparams": map[string]any{"memory": 256}, "pnode": "node1",
		"hvparams": map[string]any{"security_model": "pool", "use_chroot": true},
		"osparams": map[string]any{"marker": marker},
	})
	uuid := c.instanceField(name, "uuid").(string)
	serial := filepath.Join(c.st.RunDir, "node1", "kvm", strings.ToLower(uuid[:8]), "serial.log")
	console := func() string { b, _ := os.ReadFile(serial); return string(b) }
	ownBoot := "CORRAL-GUEST-BOOTED name=" + name + " marker=" + marker
	dump := func() string { s := console(); return "console log (tail):\n" + s[max(0, len(s)-4000):] }
	waitConsole := func(what, want string, n int, d time.Duration) {
		t.Helper()
		deadline := time.Now().Add(d)
		for strings.Count(console(), want) < n {
			if time.Now().After(deadline) {
				t.Fatalf("%s: %q did not appear on the console within %s\n%s", what, want, d, dump())
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	waitConsole("own system", ownBoot, 1, 2*time.Minute)
	t.Logf("instance created and booted its own system: %s", time.Since(start).Round(100*time.Millisecond))

	// Rescue, the password from a file (no prompt).
	const password = "Inst-Rescue-pw-5813"
	pwFile := filepath.Join(t.TempDir(), "pw")
	if err := os.WriteFile(pwFile, []byte(password+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	rescueStart := time.Now()
	if out, err := c.corral("instance", "rescue", name, "--rescue-password-file", pwFile, "--shutdown-timeout", "30"); err != nil {
		t.Fatalf("instance rescue: %v\n%s\n%s", err, out, dump())
	}
	t.Logf("rescue job done: %s", time.Since(rescueStart).Round(100*time.Millisecond))
	checkRescueInfo(t, c, name)

	initrd := filepath.Join(bootstrap.Layout{StateDir: c.st.StateDir}.NodeDir("node1"), "instance-rescue", strings.ToLower(uuid)+".initrd")
	if st, err := os.Stat(initrd); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("the rescue initrd %s: %v %v, want mode 0600", initrd, st, err)
	}
	pids := qemuPIDs(uuid)
	if len(pids) != 1 {
		t.Fatalf("want one qemu process for %s, got %v", uuid, pids)
	}
	cmdline, _ := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pids[0]), "cmdline"))
	if args := string(bytes.ReplaceAll(cmdline, []byte{0}, []byte{' '})); !strings.Contains(args, "-initrd "+initrd) ||
		!strings.Contains(args, "corral.rescue=offline") || !strings.Contains(args, filepath.Join(ramdisk, "vmlinuz")) {
		t.Fatalf("qemu does not boot the rescue ramdisk: %s", args)
	}
	uid := procUID(t, pids[0])
	if uid < uidLow || uid > uidHigh {
		t.Fatalf("the rescue's qemu runs as uid %d, want the instance's from the pool %d-%d", uid, uidLow, uidHigh)
	}
	if out, _ := c.corral("instance", "info", name); !strings.Contains(out, strconv.Itoa(uid)) {
		t.Fatalf("instance info does not show the uid %d qemu runs under:\n%s", uid, out)
	}
	if root, err := os.Readlink(filepath.Join("/proc", strconv.Itoa(pids[0]), "root")); err != nil || !strings.Contains(root, "kvm-chroot") {
		t.Fatalf("the rescue's qemu has root %q (%v), want its chroot", root, err)
	}
	waitConsole("rescue ramdisk", "RESCUE-READY", 1, 2*time.Minute)
	t.Logf("rescue ramdisk ready: %s after the rescue started", time.Since(rescueStart).Round(100*time.Millisecond))
	if strings.Contains(console(), ownBoot) {
		t.Fatalf("the rescue boot shows the own system's marker\n%s", dump())
	}

	// The rescue user logs in on the console, finds the instance's disk
	// and its files, and leaves a note on it.
	s := openCorralConsole(t, c, "instance", "console", name)
	s.rescueLogin(password)
	s.run("cat /proc/partitions", "vda", 10*time.Second)
	s.run("echo UID-$(id -u)", "UID-0", 10*time.Second)
	s.run("mkdir -p /tmp/d && mount /dev/vda /tmp/d && cat /tmp/d/etc/corral-marker", marker, 20*time.Second)
	s.run("echo fixed-in-$((40+2)) > /tmp/d/etc/rescue-note && umount /tmp/d && sync && echo NOTE-$((1+1))", "NOTE-2", 20*time.Second)
	s.close()

	// Nothing but unrescue starts it while rescued; corrald restarted
	// finds the rescue in the store.
	msg := c.mustFail("wrong_state", map[string]any{"OP_ID": "OP_INSTANCE_STARTUP", "instance_name": name})
	if !strings.Contains(msg, "unrescue it first") {
		t.Fatalf("startup in rescue: %s", msg)
	}
	c.killCorrald()
	c.restartCorrald()
	checkRescueInfo(t, c, name)
	if p := qemuPIDs(uuid); len(p) != 1 || p[0] != pids[0] {
		t.Fatalf("the rescue's qemu changed across corrald's restart: %v, was %v", p, pids)
	}

	booted := strings.Count(console(), ownBoot)
	unrescueStart := time.Now()
	if out, err := c.corral("instance", "unrescue", name, "--shutdown-timeout", "30"); err != nil {
		t.Fatalf("instance unrescue: %v\n%s\n%s", err, out, dump())
	}
	waitConsole("own system after unrescue", ownBoot, booted+1, 2*time.Minute)
	t.Logf("unrescue to the own system's marker: %s", time.Since(unrescueStart).Round(100*time.Millisecond))
	out, err := c.corral("instance", "info", name)
	if err != nil || strings.Contains(out, "Rescue") || strings.Contains(out, "Status:") {
		t.Fatalf("instance info after unrescue: %v\n%s", err, out)
	}
	if got := rescueListed(t, c, name); strings.Contains(got, "rescue") {
		t.Fatalf("instance list after unrescue: %q", got)
	}
	if _, err := os.Stat(initrd); !os.IsNotExist(err) {
		t.Fatalf("the rescue initrd is still there after unrescue: %v", err)
	}
	p := qemuPIDs(uuid)
	if len(p) != 1 || p[0] == pids[0] {
		t.Fatalf("qemu after unrescue: %v (the rescue's was %d)", p, pids[0])
	}
	cmdline, _ = os.ReadFile(filepath.Join("/proc", strconv.Itoa(p[0]), "cmdline"))
	if bytes.Contains(cmdline, []byte("corral.rescue")) || bytes.Contains(cmdline, []byte(initrd)) {
		t.Fatalf("the instance's own system boots with the rescue's parameters: %q", cmdline)
	}
	if u := procUID(t, p[0]); u < uidLow || u > uidHigh {
		t.Fatalf("the own system's qemu runs as uid %d, outside the pool", u)
	}
	// Its own system finds what the rescue user left (its console is a
	// root shell).
	s = openCorralConsole(t, c, "instance", "console", name)
	s.send("\n")
	s.run("cat /etc/rescue-note", "fixed-in-42", 20*time.Second)
	s.close()

	checkNoRescueSecret(t, c, password, console())
	t.Logf("whole test: %s", time.Since(start).Round(100*time.Millisecond))
}

// rescueListed is the instance's rescue_state as instance list shows it.
func rescueListed(t *testing.T, c *cluster, name string) string {
	t.Helper()
	out, err := c.corral("instance", "list", "--no-headers", "--separator", " ", "-o", "name,rescue_state", name)
	if err != nil {
		t.Fatalf("instance list: %v\n%s", err, out)
	}
	return strings.TrimSpace(out)
}

// checkRescueInfo checks that instance info and list show the rescue.
func checkRescueInfo(t *testing.T, c *cluster, name string) {
	t.Helper()
	if got := rescueListed(t, c, name); got != name+" rescue" {
		t.Fatalf("instance list -o name,rescue_state: %q, want %q", got, name+" rescue")
	}
	out, err := c.corral("instance", "info", name)
	if err != nil {
		t.Fatalf("instance info: %v\n%s", err, out)
	}
	for _, want := range []string{"  Status: rescue (target rescue)\n", "    Conditions:\n", "      - Rescue: True (Rescued) since ",
		": runs the rescue ramdisk: log in as rescue on the console or with ssh\n"} {
		if !strings.Contains(out, want) {
			t.Fatalf("instance info does not show %q:\n%s", want, out)
		}
	}
}

// checkNoRescueSecret checks that neither the rescue password nor its
// hash is in the rescue job as `corral job info` shows it, the daemons'
// logs or the console log.
func checkNoRescueSecret(t *testing.T, c *cluster, password, consoleLog string) {
	t.Helper()
	ids, err := c.corral("job", "list", "--no-headers", "--separator", " ", "-o", "id,summary")
	if err != nil {
		t.Fatalf("job list: %v\n%s", err, ids)
	}
	var jobs []string
	for _, l := range strings.Split(ids, "\n") {
		if f := strings.Fields(l); len(f) == 2 && strings.HasPrefix(f[1], "INSTANCE_RESCUE") {
			jobs = append(jobs, f[0])
		}
	}
	if len(jobs) != 1 {
		t.Fatalf("want one rescue job, got %v in\n%s", jobs, ids)
	}
	info, err := c.corral("job", "info", jobs[0])
	if err != nil || !strings.Contains(info, "rescue_password_hash") {
		t.Fatalf("job info %s: %v\n%s", jobs[0], err, info)
	}
	secrets := []string{password, "$5$"}
	for _, s := range secrets {
		if strings.Contains(info, s) {
			t.Fatalf("job info shows %q:\n%s", s, info)
		}
		if strings.Contains(consoleLog, s) {
			t.Fatalf("the console log holds %q", s)
		}
	}
	for _, p := range c.st.Procs {
		raw, _ := os.ReadFile(p.Log)
		for _, s := range secrets {
			if bytes.Contains(raw, []byte(s)) {
				t.Fatalf("%s's log holds %q", p.Name, s)
			}
		}
	}
}
