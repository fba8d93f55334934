package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/corral/corral/internal/failpoint"
)

// TestRecreateDisks recreates the disk of a stopped file instance with the
// CLI and with Ganeti's RAPI client: the node's image is replaced by an
// empty one of the recorded or the newly given size.
func TestRecreateDisks(t *testing.T) {
	requireRoot(t)
	c := newCluster(t, clusterOpts{nodes: 1, hypervisors: []string{"fake"}})
	c.mustSucceed(map[string]any{"OP_ID": "OP_INSTANCE_CREATE", "instance_name": "web1", "disk_template": "file",
		"disks": []any{map[string]any{"size": 64}}, "nics": []any{}, "os_type": "tiny+default",
		"hypervisor": "fake", "start": true})

	out, err := c.corral("instance", "activate-disks", "web1")
	if err != nil {
		t.Fatalf("activate-disks: %v\n%s", err, out)
	}
	_, path, _ := strings.Cut(strings.TrimSpace(out), ":disk/0:")
	if path == "" {
		t.Fatalf("no disk path in %q", out)
	}
	// scribble writes a marker into the image and checks it is there.
	scribble := func(t *testing.T) {
		t.Helper()
		f, err := os.OpenFile(path, os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.WriteAt([]byte("old contents"), 4096); err != nil {
			t.Fatal(err)
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
	}
	// emptyOf checks the image is all zeros and of the given size.
	emptyOf := func(t *testing.T, step string, mib int64) {
		t.Helper()
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%s: %v", step, err)
		}
		if int64(len(b)) != mib<<20 {
			t.Errorf("%s: image is %d bytes, want %d", step, len(b), mib<<20)
		}
		if i := bytes.IndexFunc(b, func(r rune) bool { return r != 0 }); i >= 0 {
			t.Errorf("%s: image has data at offset %d, want only zeros", step, i)
		}
	}

	scribble(t)
	if out, err := c.corral("instance", "recreate-disks", "web1"); err == nil || !strings.Contains(out, "is marked to be up, cannot recreate disks") {
		t.Fatalf("recreate-disks of a running instance: %v\n%s", err, out)
	}
	if out, err := c.corral("instance", "shutdown", "web1"); err != nil {
		t.Fatalf("shutdown: %v\n%s", err, out)
	}
	if out, err := c.corral("instance", "recreate-disks", "web1"); err != nil {
		t.Fatalf("recreate-disks: %v\n%s", err, out)
	}
	emptyOf(t, "recreate", 64)

	scribble(t)
	if out, err := c.corral("instance", "recreate-disks", "--disk", "0:size=96M", "web1"); err != nil {
		t.Fatalf("recreate-disks --disk 0:size=96M: %v\n%s", err, out)
	}
	emptyOf(t, "recreate with a new size", 96)
	if out, err := c.corral("instance", "list", "--no-headers", "-o", "disk.sizes", "web1"); err != nil || strings.TrimSpace(out) != "96M" {
		t.Errorf("disk.sizes after recreate with a new size: %q, %v", out, err)
	}

	t.Run("ganeti-rapi-client", func(t *testing.T) {
		requireRAPIClient(t)
		s := devRAPI(t, c)
		scribble(t)
		r := s.py(t, "recreate", "web1")
		if v, _ := r["recreate"].(map[string]any); v["ok"] != true || v["status"] != "success" {
			t.Fatalf("RecreateInstanceDisks: %v", r["recreate"])
		}
		emptyOf(t, "recreate through RAPI", 96)
	})
	if out, err := c.corral("instance", "startup", "web1"); err != nil {
		t.Fatalf("startup after recreate: %v\n%s", err, out)
	}
}

// TestRecreateDisksResumesAfterMasterCrash kills corrald once the node has
// made the new disk but before the step committed: the resumed step sends
// the same remove and create again, the node answers both from its record,
// and the new, empty disk stays.
func TestRecreateDisksResumesAfterMasterCrash(t *testing.T) {
	requireRoot(t)
	// The watcher would start jobs of its own, passing the failpoint.
	c := newCluster(t, clusterOpts{nodes: 1, hypervisors: []string{"fake"}, watcher: time.Hour})
	op := createOp("rc1", "node2", 16)
	op["start"] = false
	c.mustSucceed(op)
	out, err := c.corral("instance", "activate-disks", "rc1")
	if err != nil {
		t.Fatalf("activate-disks: %v\n%s", err, out)
	}
	_, path, _ := strings.Cut(strings.TrimSpace(out), ":disk/0:")
	if err := os.WriteFile(path, bytes.Repeat([]byte{0xaa}, 16<<20), 0o600); err != nil {
		t.Fatal(err)
	}

	c.stopDaemon("corrald")
	off, nodeOff := c.logSize("corrald"), c.logSize("corral-node node2")
	// rpc-returned passes once per node call of a step: the remove, then
	// the create.
	p := c.startDaemon("corrald", failpoint.EnvVar+"="+failpoint.RPCReturned+"=2")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	id, err := c.luxi.SubmitJob(ctx, []any{map[string]any{"OP_ID": "OP_INSTANCE_RECREATE_DISKS", "instance_name": "rc1"}})
	cancel()
	if err != nil {
		t.Fatal(err)
	}
	c.waitInjectedCrash("corrald", p.PID, off, failpoint.RPCReturned, 2)
	c.startDaemon("corrald")
	if status, res := c.waitJob(id, time.Minute); status != "success" {
		t.Fatalf("recreate job %d after the restart: %s %s", id, status, toJSON(res))
	}
	log := c.logSince("corral-node node2", nodeOff)
	for _, seq := range []int{1, 2} {
		opID := fmt.Sprintf("op=job/%d/op/0/step/1/%d", id, seq)
		replayed := false
		for _, line := range strings.Split(log, "\n") {
			replayed = replayed || (strings.Contains(line, "rpc answered from operation record") && strings.Contains(line, opID))
		}
		if !replayed {
			t.Errorf("node2 did not answer the repeated call %s from its record:\n%s", opID, log)
		}
	}
	b, err := os.ReadFile(path)
	if err != nil || len(b) != 16<<20 || bytes.IndexByte(b, 0xaa) >= 0 {
		t.Fatalf("disk after the resumed recreate: %d bytes, old data present: %v, %v", len(b), bytes.IndexByte(b, 0xaa) >= 0, err)
	}
}
