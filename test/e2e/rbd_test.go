package e2e

import (
	"bytes"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/corral/corral/internal/cephtest"
)

// TestRBDInstance: a two-node cluster whose nodes share one real Ceph; a
// kvm guest installed by the tiny OS onto an rbd disk boots from it (its
// marker is read back from the image), qemu reaches Ceph through librbd with
// its own copy of the key, both nodes see the image, modify -t moves the
// bytes file and back unchanged, the running guest migrates live between
// the nodes and back, modify -t moves it to sharedfile and back, and
// remove leaves no image.
func TestRBDInstance(t *testing.T) {
	requireRoot(t)
	requireQemu(t)
	ceph := cephtest.Start(t, cephtest.Options{})
	img := guestImage(t)
	c := newCluster(t, clusterOpts{nodes: 2, hypervisors: []string{"kvm", "fake"}, imageDir: img, watcher: 2 * time.Second})
	c.mustSucceed(map[string]any{"OP_ID": "OP_CLUSTER_SET_PARAMS", "enabled_disk_templates": []any{"file", "diskless", "rbd"}})
	c.mustSucceed(map[string]any{"OP_ID": "OP_GROUP_SET_PARAMS", "group_name": "default", "diskparams": map[string]any{
		"rbd": map[string]any{"pool": ceph.Pool, "conf": ceph.Conf, "keyring": ceph.Keyring}}})

	c.mustSucceed(map[string]any{
		"OP_ID": "OP_INSTANCE_CREATE", "instance_name": "vm1", "disk_template": "rbd",
		"disks": []any{map[string]any{"size": 64}}, "os_type": "tiny+default", "nics": []any{},
		"hypervisor": "kvm", "beparams": map[string]any{"memory": 256}, "pnode": "node1",
		"osparams": map[string]any{"marker": "rbd-marker"},
	})
	uuid := c.instanceField("vm1", "uuid").(string)
	images := func() []string {
		out, err := ceph.Run("rbd", "ls", ceph.Pool)
		if err != nil {
			t.Fatal(err)
		}
		return strings.Fields(out)
	}
	ls := images()
	if len(ls) != 1 || !strings.HasPrefix(ls[0], uuid+".") {
		t.Fatalf("pool holds %v, want one image of %s", ls, uuid)
	}
	image := ceph.Pool + "/" + ls[0]

	logs, _ := filepath.Glob(filepath.Join(c.st.RunDir, "node1", "kvm", "*", "serial.log"))
	if len(logs) != 1 {
		t.Fatalf("want one serial log, got %v", logs)
	}
	waitFor(t, 120*time.Second, "the guest's boot marker (read from its rbd disk)", func() bool {
		b, _ := os.ReadFile(logs[0])
		return strings.Contains(string(b), "CORRAL-GUEST-BOOTED name=vm1 marker=rbd-marker")
	})
	pids := qemuPIDs(uuid)
	if len(pids) != 1 {
		t.Fatalf("qemu processes %v", pids)
	}
	cmdline, _ := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pids[0]), "cmdline"))
	if !strings.Contains(string(cmdline), "file=rbd:"+image+":id=admin:conf=") || strings.Contains(string(cmdline), ceph.Keyring) {
		t.Fatalf("qemu's drive does not use its own copies through librbd: %q", cmdline)
	}
	runDir := filepath.Dir(logs[0])
	st, err := os.Stat(filepath.Join(runDir, "ceph-disk0.keyring"))
	if err != nil || st.Mode().Perm() != 0o400 {
		t.Fatalf("qemu's keyring: %v %v", err, st)
	}
	if uid := procUID(t, pids[0]); uid == 0 {
		t.Fatal("qemu runs as root")
	}

	c.mustSucceed(map[string]any{"OP_ID": "OP_INSTANCE_SHUTDOWN", "instance_name": "vm1", "timeout": 60})
	if _, err := os.Stat(filepath.Join(runDir, "ceph-disk0.keyring")); err == nil {
		t.Error("qemu's copy of the key outlived the instance")
	}
	// The image is the Ceph cluster's: both nodes reach it with the same
	// parameters (here the same files; on real nodes each node's own).
	before := rbdBytes(t, ceph, image)
	if !bytes.Contains(before, []byte("rbd-marker")) {
		t.Fatal("the image does not hold the OS's marker")
	}

	// rbd -> file: the file holds the same bytes, the image is gone.
	if out, err := c.corral("instance", "modify", "-t", "file", "vm1"); err != nil {
		t.Fatalf("modify -t file: %v\n%s", err, out)
	}
	if tmpl := c.instanceField("vm1", "disk_template"); tmpl != "file" {
		t.Fatalf("disk_template %v after conversion", tmpl)
	}
	file := findDiskFile(t, c.st.StateDir, uuid)
	if got, _ := os.ReadFile(file); !bytes.Equal(got, before) {
		t.Fatalf("file disk differs from the rbd image (%d vs %d bytes)", len(got), len(before))
	}
	if ls := images(); len(ls) != 0 {
		t.Fatalf("images left after conversion to file: %v", ls)
	}

	// file -> rbd: the image holds the file's bytes, the file is gone.
	if out, err := c.corral("instance", "modify", "-t", "rbd", "vm1"); err != nil {
		t.Fatalf("modify -t rbd: %v\n%s", err, out)
	}
	if got := rbdBytes(t, ceph, image); !bytes.Equal(got, before) {
		t.Fatal("rbd image differs from the file disk after conversion back")
	}
	if _, err := os.Stat(file); err == nil {
		t.Error("file disk left after conversion to rbd")
	}

	c.mustSucceed(map[string]any{"OP_ID": "OP_INSTANCE_STARTUP", "instance_name": "vm1"})
	waitFor(t, 120*time.Second, "the guest booting again from the converted image", func() bool {
		logs, _ := filepath.Glob(filepath.Join(c.st.RunDir, "node1", "kvm", "*", "serial.log"))
		if len(logs) != 1 {
			return false
		}
		b, _ := os.ReadFile(logs[0])
		return strings.Contains(string(b), "marker=rbd-marker")
	})

	// Live migration through librbd, there and back, while the guest
	// counts on its console: each node's qemu opens the same image.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	c.mustSucceed(map[string]any{"OP_ID": "OP_CLUSTER_SET_PARAMS", "hvparams": map[string]any{
		"kvm": map[string]any{"migration_port": strconv.Itoa(port), "migration_bandwidth": "1000"}}})
	m := &migrationCluster{cluster: c, uuid: uuid}
	m.migrate("node1", "node2", fmt.Sprintf("(i=0; while true; do i=$((i+1)); echo CNT $i; usleep %d; done) &", counterPeriod.Microseconds()))
	m.migrate("node2", "node1", "")

	// rbd -> sharedfile -> rbd for the stopped instance: the same bytes
	// each way, and the old disk gone.
	c.mustSucceed(map[string]any{"OP_ID": "OP_INSTANCE_SHUTDOWN", "instance_name": "vm1", "timeout": 60})
	before = rbdBytes(t, ceph, image)
	shared, err := os.MkdirTemp("", "corral-shared-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(shared) })
	if out, err := c.corral("cluster", "modify", "--enabled-disk-templates", "file,diskless,rbd,sharedfile", "--shared-file-storage-dir", shared); err != nil {
		t.Fatalf("cluster modify: %v\n%s", err, out)
	}
	if out, err := c.corral("instance", "modify", "-t", "sharedfile", "vm1"); err != nil {
		t.Fatalf("modify -t sharedfile: %v\n%s", err, out)
	}
	sfile := findDiskFile(t, shared, uuid)
	if got, _ := os.ReadFile(sfile); !bytes.Equal(got, before) {
		t.Fatal("the sharedfile disk differs from the rbd image")
	}
	if ls := images(); len(ls) != 0 {
		t.Fatalf("images left after conversion to sharedfile: %v", ls)
	}
	if out, err := c.corral("instance", "modify", "-t", "rbd", "vm1"); err != nil {
		t.Fatalf("modify -t rbd from sharedfile: %v\n%s", err, out)
	}
	if got := rbdBytes(t, ceph, image); !bytes.Equal(got, before) {
		t.Fatal("rbd image differs from the sharedfile disk after conversion back")
	}
	if _, err := os.Stat(sfile); err == nil {
		t.Error("sharedfile disk left after conversion to rbd")
	}

	c.mustSucceed(map[string]any{"OP_ID": "OP_INSTANCE_REMOVE", "instance_name": "vm1", "shutdown_timeout": 30})
	if ls := images(); len(ls) != 0 {
		t.Fatalf("images left after instance remove: %v", ls)
	}
}

func rbdBytes(t *testing.T, ceph *cephtest.Cluster, image string) []byte {
	t.Helper()
	p := filepath.Join(t.TempDir(), "export.raw")
	if _, err := ceph.Run("rbd", "export", "--no-progress", image, p); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func findDiskFile(t *testing.T, root, uuid string) string {
	t.Helper()
	var found string
	_ = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && filepath.Base(filepath.Dir(p)) == uuid && strings.HasSuffix(p, ".raw") {
			found = p
		}
		return nil
	})
	if found == "" {
		t.Fatalf("no file disk of %s under %s", uuid, root)
	}
	return found
}
