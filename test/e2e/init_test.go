package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/corral/corral/internal/bootstrap"
	"github.com/corral/corral/internal/devcluster"
	"github.com/corral/corral/internal/store/boltstore"
)

// TestClusterInitBackupDestroy walks the production path by hand: cluster
// init (twice: refused), the daemons started as an operator would, a
// backup of the live store, then cluster destroy.
func TestClusterInitBackupDestroy(t *testing.T) {
	requireRoot(t)
	dir, err := os.MkdirTemp("", "corral-init-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	_ = os.Chmod(dir, 0o755)
	run := fmt.Sprintf("/run/crl-t%d", os.Getpid())
	defer os.RemoveAll(run)
	ips, rpcPort, joinPort, err := devcluster.PickAddresses(1)
	if err != nil {
		t.Fatal(err)
	}
	env := append(os.Environ(), "CORRAL_STATE_DIR="+dir, "CORRAL_RUN_DIR="+run)
	corral := func(args ...string) (string, error) {
		cmd := exec.Command(filepath.Join(binDir, "corral"), args...)
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	initArgs := []string{"cluster", "init", "--master-name", "m1", "--master-ip", ips[0],
		"--rpc-port", strconv.Itoa(rpcPort), "--join-port", strconv.Itoa(joinPort), "--enabled-hypervisors", "fake", "test.cluster"}
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

	// Start the daemons as an operator would.
	node := exec.Command(filepath.Join(binDir, "corral-node"), "--state-dir", l.NodeDir(""), "--run-dir", l.NodeRunDir(""),
		"--listen", fmt.Sprintf("%s:%d", ips[0], rpcPort), "--hypervisors", "fake")
	node.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	nodeLog, _ := os.Create(filepath.Join(dir, "node.log"))
	node.Stdout, node.Stderr = nodeLog, nodeLog
	if err := node.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = node.Process.Kill(); _ = node.Wait() }()
	// corrald refuses root.
	if out, err := exec.Command(filepath.Join(binDir, "corrald"), "--state-dir", dir, "--run-dir", run).CombinedOutput(); err == nil || !strings.Contains(string(out), "must not run as root") {
		t.Fatalf("corrald as root: %v %s", err, out)
	}
	acct, _ := bootstrap.Lookup(bootstrap.MasterUser)
	gid, _ := bootstrap.GroupID(bootstrap.AdminGroup)
	master := exec.Command(filepath.Join(binDir, "corrald"), "--state-dir", dir, "--run-dir", run)
	master.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Credential: &syscall.Credential{Uid: uint32(acct.UID), Gid: uint32(acct.GID), Groups: []uint32{uint32(gid)}}}
	masterLog, _ := os.Create(filepath.Join(dir, "corrald.log"))
	master.Stdout, master.Stderr = masterLog, masterLog
	if err := master.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = master.Process.Kill(); _ = master.Wait() }()
	waitFor(t, 30*time.Second, "corrald's LUXI socket", func() bool {
		_, err := corral("cluster", "info")
		return err == nil
	})
	st, err := os.Stat(l.Socket())
	if err != nil || st.Mode().Perm() != 0o660 || int(st.Sys().(*syscall.Stat_t).Gid) != gid {
		t.Fatalf("LUXI socket %v: mode %v gid %v, want 0660 group %s", err, st.Mode().Perm(), st.Sys().(*syscall.Stat_t).Gid, bootstrap.AdminGroup)
	}
	if out, err := corral("cluster", "verify"); err != nil {
		nl, _ := os.ReadFile(filepath.Join(dir, "node.log"))
		t.Fatalf("verify: %v\n%s\n%s", err, out, nl)
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
	done := make(chan error, 1)
	go func() { done <- master.Wait() }()
	select {
	case <-done:
	case <-time.After(15 * time.Second):
		t.Fatal("corrald still runs after destroy")
	}
	if _, err := os.Stat(l.MasterDir()); !os.IsNotExist(err) {
		t.Fatalf("master state left after destroy: %v", err)
	}
}
