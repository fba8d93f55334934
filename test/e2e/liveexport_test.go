package e2e

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestKVMLiveExport: one guest boot. The guest writes a known pattern to
// its disk and syncs it; `corral backup export --noshutdown` exports the
// running instance from a point-in-time copy of the disk made through
// qemu. The same qemu process runs throughout and the guest still
// answers afterwards, the exported image holds the pattern at its offset,
// and no copy of the disk is left on the node.
func TestKVMLiveExport(t *testing.T) {
	requireRoot(t)
	requireQemu(t)
	img := guestImage(t)
	c := newCluster(t, clusterOpts{hypervisors: []string{"kvm", "fake"}, imageDir: img})
	c.mustSucceed(map[string]any{
		"OP_ID": "OP_INSTANCE_CREATE", "instance_name": "live1", "disk_template": "file",
		"disks": []any{map[string]any{"size": 64}}, "os_type": "tiny+default", "nics": []any{},
		"hypervisor": "kvm", "beparams": map[string]any{"minmem": 128, "maxmem": 128}, "pnode": "node1",
	})
	uuid := c.instanceField("live1", "uuid").(string)
	socks, _ := filepath.Glob(filepath.Join(c.st.RunDir, "node1", "kvm", "*", "serial.sock"))
	logs, _ := filepath.Glob(filepath.Join(c.st.RunDir, "node1", "kvm", "*", "serial.log"))
	if len(socks) != 1 || len(logs) != 1 {
		t.Fatalf("want one serial socket and log, got %v %v", socks, logs)
	}
	waitFor(t, 120*time.Second, "the guest to boot", func() bool {
		b, _ := os.ReadFile(logs[0])
		return strings.Contains(string(b), "CORRAL-GUEST-BOOTED name=live1")
	})
	pids := qemuPIDs(uuid)
	if len(pids) != 1 {
		t.Fatalf("want one qemu process for %s, got %v", uuid, pids)
	}
	g := dialGuestShell(t, socks[0])

	// 40 MiB into the disk, past what the OS's create script writes.
	const offset = 40 << 20
	pattern := "CORRAL-LIVE-EXPORT-PATTERN-" + uuid[:8]
	out := g.run("printf '" + pattern + "' | dd of=/dev/vda bs=512 seek=" + strconv.Itoa(offset/512) + " conv=fsync 2>&1; sync; echo wrote")
	if !strings.Contains(out, "wrote") {
		t.Fatalf("writing the pattern in the guest: %q", out)
	}

	// With the instance to be removed a live export is refused.
	if out, err := c.corral("backup", "export", "-n", "node1", "--noshutdown", "--remove-instance", "live1"); err == nil ||
		!strings.Contains(out, "without shutting it down") {
		t.Fatalf("live export with --remove-instance: %v\n%s", err, out)
	}

	out, err := c.corral("backup", "export", "-n", "node1", "--noshutdown", "live1")
	if err != nil {
		t.Fatalf("live export: %v\n%s", err, out)
	}
	if !strings.Contains(out, "disk/0: snapshot snap-") || !strings.Contains(out, "Removed the disk snapshots on node1") ||
		strings.Contains(out, "Shutting down") {
		t.Errorf("the job log does not tell of the disk snapshot and its removal (or shut the instance down):\n%s", out)
	}
	if p := qemuPIDs(uuid); len(p) != 1 || p[0] != pids[0] {
		t.Fatalf("qemu of live1 is %v after the export, was %v: the instance did not keep running", p, pids)
	}
	if st := c.instanceField("live1", "status"); st != "running" {
		t.Errorf("live1 after its live export is %v, want running", st)
	}
	if out := g.run("echo still-here"); !strings.Contains(out, "still-here") {
		t.Fatalf("the guest does not answer after the export: %q", out)
	}

	dump, err := os.ReadFile(filepath.Join(c.dir, "node1", "export", "live1", "disk0.dump"))
	if err != nil {
		t.Fatal(err)
	}
	if len(dump) != 64<<20 {
		t.Fatalf("exported image is %d bytes, want %d", len(dump), 64<<20)
	}
	if got := dump[offset : offset+len(pattern)]; !bytes.Equal(got, []byte(pattern)) {
		t.Fatalf("exported image at %d holds %q, want %q", offset, got, pattern)
	}

	// No copy left: neither a file next to the disk nor a record.
	files, _ := filepath.Glob(filepath.Join(c.dir, "node1", "storage", "file", uuid, "*"))
	hidden, _ := filepath.Glob(filepath.Join(c.dir, "node1", "storage", "file", uuid, ".*"))
	if len(files) != 1 || len(hidden) != 0 {
		t.Errorf("files of live1's disk directory after the export: %v %v", files, hidden)
	}
	if recs, _ := filepath.Glob(filepath.Join(c.dir, "node1", "snapshots", "*")); len(recs) != 0 {
		t.Errorf("snapshot records left: %v", recs)
	}
}
