package e2e

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestKVMConfinedByUIDPool boots two kvm instances with security_model pool
// and use_chroot under TCG: each qemu runs under its own uid from the
// cluster's pool, none as root, jailed in its chroot; a third instance finds
// the pool exhausted and says so.
func TestKVMConfinedByUIDPool(t *testing.T) {
	requireRoot(t)
	requireQemu(t)
	img := guestImage(t)
	c := newCluster(t, clusterOpts{hypervisors: []string{"kvm", "fake"}, imageDir: img})

	// Uids far above any real account, so nothing else runs under them.
	const low, high = 3998000, 3998001
	pool := strconv.Itoa(low) + "-" + strconv.Itoa(high)
	if out, err := c.corral("cluster", "modify", "--uid-pool", pool); err != nil {
		t.Fatalf("cluster modify --uid-pool: %v\n%s", err, out)
	}
	if out, err := c.corral("cluster", "modify", "--add-uids", "3998100", "--remove-uids", "3998100"); err != nil {
		t.Fatalf("cluster modify --add-uids/--remove-uids: %v\n%s", err, out)
	}
	if out, _ := c.corral("cluster", "info", "--json"); !strings.Contains(strings.Join(strings.Fields(out), ""), "[3998000,3998001]") {
		t.Fatalf("cluster info does not show the uid pool:\n%s", out)
	}

	create := func(name string, start bool) map[string]any {
		return map[string]any{
			"OP_ID": "OP_INSTANCE_CREATE", "instance_name": name, "disk_template": "file",
			"disks": []any{map[string]any{"size": 32}}, "nics": []any{}, "os_type": "tiny+default",
			"hypervisor": "kvm", "beparams": map[string]any{"memory": 128}, "pnode": "node1",
			"hvparams": map[string]any{"security_model": "pool", "use_chroot": true},
			"osparams": map[string]any{"marker": "sec-" + name}, "start": start,
		}
	}
	// One job, two instances: they boot side by side.
	c.mustSucceed(create("sec1", true), create("sec2", true))

	uids := map[int]string{}
	for _, name := range []string{"sec1", "sec2"} {
		uuid := c.instanceField(name, "uuid").(string)
		pids := qemuPIDs(uuid)
		if len(pids) != 1 {
			t.Fatalf("%s: want one qemu process, got %v", name, pids)
		}
		uid := procUID(t, pids[0])
		if uid == 0 {
			t.Fatalf("%s: qemu (pid %d) runs as root", name, pids[0])
		}
		if uid < low || uid > high {
			t.Fatalf("%s: qemu runs as uid %d, outside the pool %s", name, uid, pool)
		}
		if other, dup := uids[uid]; dup {
			t.Fatalf("%s and %s share uid %d", name, other, uid)
		}
		uids[uid] = name
		root, err := os.Readlink(filepath.Join("/proc", strconv.Itoa(pids[0]), "root"))
		if err != nil || !strings.Contains(root, "kvm-chroot") {
			t.Fatalf("%s: qemu's root is %q (%v), want its chroot", name, root, err)
		}
		serial := filepath.Join(c.st.RunDir, "node1", "kvm", strings.ToLower(uuid[:8]), "serial.log")
		waitFor(t, 120*time.Second, name+"'s boot marker", func() bool {
			b, _ := os.ReadFile(serial)
			return strings.Contains(string(b), "marker=sec-"+name)
		})
		out, err := c.corral("instance", "info", name)
		if err != nil || !strings.Contains(out, strconv.Itoa(uid)) || !strings.Contains(out, "kvm-chroot") {
			t.Fatalf("instance info %s does not show its confinement: %v\n%s", name, err, out)
		}
		t.Logf("instance info %s:\n%s", name, out)
	}
	// No qemu of this cluster runs as root.
	for _, uuid := range []string{c.instanceField("sec1", "uuid").(string), c.instanceField("sec2", "uuid").(string)} {
		for _, pid := range qemuPIDs(uuid) {
			if procUID(t, pid) == 0 {
				t.Fatalf("qemu %d runs as root", pid)
			}
		}
	}

	// Verify finds nothing wrong with confined instances.
	if out, err := c.corral("cluster", "verify"); err != nil {
		t.Fatalf("cluster verify with confined guests: %v\n%s", err, out)
	}

	// The pool is exhausted: a third instance cannot start, and says why.
	c.mustSucceed(create("sec3", false))
	msg := c.mustFail("insufficient_resources", map[string]any{"OP_ID": "OP_INSTANCE_STARTUP", "instance_name": "sec3"})
	if !strings.Contains(msg, "no free uid in the pool "+pool+": 2 instances use them") {
		t.Fatalf("exhausted pool error: %s", msg)
	}

	// Shutting one down gives its uid back.
	uid1 := 0
	for u, n := range uids {
		if n == "sec1" {
			uid1 = u
		}
	}
	lock := filepath.Join(c.st.RunDir, "node1", "kvm", "uidpool", strconv.Itoa(uid1))
	if _, err := os.Stat(lock); err != nil {
		t.Fatalf("lock file of sec1's uid: %v", err)
	}
	c.mustSucceed(map[string]any{"OP_ID": "OP_INSTANCE_SHUTDOWN", "instance_name": "sec1", "timeout": 30})
	if _, err := os.Stat(lock); !os.IsNotExist(err) {
		t.Fatalf("uid %d still taken after sec1 stopped: %v", uid1, err)
	}
}
