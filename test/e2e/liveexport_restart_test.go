package e2e

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/corral/corral/internal/failpoint"
)

// TestLiveExportAcrossRestarts: corrald dies right after the node copied a
// running (fake) instance's disk for an export with shutdown=false.
// Restarted, the job resumes with the same copy, the export holds the
// disk and the copy is removed. The second time corral-node restarts too
// before corrald comes back: the new node daemon sweeps the recorded copy
// at once, and the resumed export fails naming the lost copy, leaving
// nothing behind. The instance runs throughout.
func TestLiveExportAcrossRestarts(t *testing.T) {
	// The watcher would start jobs of its own and pass the failpoint.
	c := newCluster(t, clusterOpts{nodes: 1, hypervisors: []string{"fake"}, watcher: time.Hour})
	c.mustSucceed(createOp("lx1", "node1", 8))
	uuid := c.instanceField("lx1", "uuid").(string)
	sums := c.fillRandom("node1", "lx1")
	diskDir := filepath.Join(c.dir, "node1", "storage", "file", uuid)
	snapRecords := filepath.Join(c.dir, "node1", "snapshots")
	copies := func() []string {
		hidden, _ := filepath.Glob(filepath.Join(diskDir, ".*"))
		recs, _ := filepath.Glob(filepath.Join(snapRecords, "*"))
		return append(hidden, recs...)
	}
	export := map[string]any{"OP_ID": "OP_BACKUP_EXPORT", "instance_name": "lx1", "mode": "local", "target_node": "node1", "shutdown": false}
	// The export's first node call from a step is the disk copy.
	crashAfterCopy := func() int64 {
		t.Helper()
		c.stopDaemon("corrald")
		off := c.logSize("corrald")
		p := c.startDaemon("corrald", failpoint.EnvVar+"="+failpoint.RPCReturned+"=1")
		id := c.submitOne(export)
		c.waitInjectedCrash("corrald", p.PID, off, failpoint.RPCReturned, 1)
		if len(copies()) != 2 {
			t.Fatalf("after the copy, want its file and record, got %v", copies())
		}
		return id
	}

	id := crashAfterCopy()
	c.startDaemon("corrald")
	if st, res := c.waitJob(id, time.Minute); st != "success" {
		t.Fatalf("resumed live export: %s %s", st, toJSON(res))
	}
	dump, err := os.ReadFile(filepath.Join(c.dir, "node1", "export", "lx1", "disk0.dump"))
	if err != nil {
		t.Fatal(err)
	}
	if s := sha256.Sum256(dump); hex.EncodeToString(s[:]) != sums[0] {
		t.Error("the exported image differs from the disk")
	}
	if left := copies(); len(left) != 0 {
		t.Errorf("copies left after the resumed export: %v", left)
	}

	id = crashAfterCopy()
	c.stopDaemon("corral-node node1")
	c.startDaemon("corral-node node1")
	if left := copies(); len(left) != 0 {
		t.Errorf("the restarted node daemon did not sweep the copy: %v", left)
	}
	c.startDaemon("corrald")
	st, res := c.waitJob(id, time.Minute)
	if st != "error" || !strings.Contains(toJSON(res), "does not exist on this node") {
		t.Fatalf("export of a swept copy: %s %s", st, toJSON(res))
	}
	if left := copies(); len(left) != 0 {
		t.Errorf("copies left after the failed export: %v", left)
	}
	if st := c.instanceField("lx1", "status"); st != "running" {
		t.Errorf("lx1 is %v, want running", st)
	}
}
