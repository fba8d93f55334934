package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/corral/corral/internal/bootstrap"
	"github.com/corral/corral/internal/store/boltstore"
)

// TestClusterInitBackupDestroy walks the production path by hand: cluster
// init (twice: refused), the daemons started as an operator would, a
// backup of the live store, then cluster destroy.
func TestClusterInitBackupDestroy(t *testing.T) {
	requireRoot(t)
	h := newHandCluster(t, "t")
	dir, run, corral := h.dir, h.run, h.corral
	initArgs := h.initArgs("test.cluster")
	if out, err := corral(initArgs...); err != nil {
		t.Fatalf("init: %v\n%s", err, out)
	}
	if out, err := corral(initArgs...); err == nil || !strings.Contains(out, "already initialised") {
		t.Fatalf("second init: %v\n%s", err, out)
	}
	l := bootstrap.Layout{StateDir: dir, RunDir: run}
	for _, c := range []struct {
		path string
		mode os.FileMode
	}{{l.MasterDir(), 0o700}, {filepath.Join(l.MasterDir(), "ca.key"), 0o400}, {filepath.Join(l.MasterDir(), "cluster-domain-secret"), 0o400}, {l.NodeDir(""), 0o700}} {
		st, err := os.Stat(c.path)
		if err != nil || st.Mode().Perm() != c.mode {
			t.Fatalf("%s: %v mode %v, want %v", c.path, err, st.Mode().Perm(), c.mode)
		}
	}
	secret, _ := os.ReadFile(filepath.Join(l.MasterDir(), "cluster-domain-secret"))
	if s := strings.TrimSpace(string(secret)); len(s) != 40 {
		t.Fatalf("domain secret %q is not 40 hex chars", s)
	}

	// Start the daemons as an operator would; corrald refuses root.
	h.startNode()
	if out, err := exec.Command(filepath.Join(binDir, "corrald"), "--state-dir", dir, "--run-dir", run).CombinedOutput(); err == nil || !strings.Contains(string(out), "must not run as root") {
		t.Fatalf("corrald as root: %v %s", err, out)
	}
	masterExited := h.startMaster()
	gid, _ := bootstrap.GroupID(bootstrap.AdminGroup)
	st, err := os.Stat(l.Socket())
	if err != nil || st.Mode().Perm() != 0o660 || int(st.Sys().(*syscall.Stat_t).Gid) != gid {
		t.Fatalf("LUXI socket %v: mode %v gid %v, want 0660 group %s", err, st.Mode().Perm(), st.Sys().(*syscall.Stat_t).Gid, bootstrap.AdminGroup)
	}
	if out, err := corral("cluster", "verify"); err != nil {
		t.Fatalf("verify: %v\n%s\n%s", err, out, h.log("node.log"))
	}

	backup := filepath.Join(dir, "backup.db")
	if out, err := corral("cluster", "backup", backup); err != nil {
		t.Fatalf("backup: %v\n%s", err, out)
	}
	bs, err := boltstore.Open(backup, boltstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	kv, err := bs.Get(context.Background(), "/config/cluster")
	bs.Close()
	if err != nil || kv == nil || !strings.Contains(string(kv.Value), "test.cluster") {
		t.Fatalf("backup lacks the cluster object: %v %v", kv, err)
	}

	if out, err := corral("cluster", "destroy"); err == nil || !strings.Contains(out, "--yes-do-it") {
		t.Fatalf("destroy without confirmation: %v %s", err, out)
	}
	if out, err := corral("cluster", "destroy", "--yes-do-it"); err != nil {
		t.Fatalf("destroy: %v\n%s", err, out)
	}
	select {
	case <-masterExited:
	case <-time.After(15 * time.Second):
		t.Fatal("corrald still runs after destroy")
	}
	if _, err := os.Stat(l.MasterDir()); !os.IsNotExist(err) {
		t.Fatalf("master state left after destroy: %v", err)
	}
}
