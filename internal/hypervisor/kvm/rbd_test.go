package kvm

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/corral/corral/internal/hypervisor"
)

func TestBuildCommandRBDDrive(t *testing.T) {
	spec := testSpec(nil)
	spec.Disks = []hypervisor.DiskSpec{{Index: 0, Path: "rbd:vms/i.d.rbd",
		RBD: &hypervisor.RBDImage{Pool: "vms", Image: "i.d.rbd", Client: "corral", Conf: "/etc/ceph/ceph.conf", Keyring: "/etc/ceph/k"}}}
	rt := testRuntime()
	rt.CephFiles = "/run/c/6f1c2a3b"
	argv, err := BuildCommand(spec, rt)
	if err != nil {
		t.Fatal(err)
	}
	want := "file=rbd:vms/i.d.rbd:id=corral:conf=/run/c/6f1c2a3b/ceph-disk0.conf:keyring=/run/c/6f1c2a3b/ceph-disk0.keyring,format=raw,if=none,id=drive0,cache=none"
	if i := slices.Index(argv, "-drive"); i < 0 || argv[i+1] != want {
		t.Fatalf("argv %q\nwant -drive %s", argv, want)
	}
	if strings.Contains(strings.Join(argv, " "), "/etc/ceph") {
		t.Error("qemu is pointed at the node's own ceph files")
	}
}

func TestWriteCephFilesGivesOnlyTheClientKey(t *testing.T) {
	src, run := t.TempDir(), t.TempDir()
	conf, kr := filepath.Join(src, "ceph.conf"), filepath.Join(src, "keyring")
	os.WriteFile(conf, []byte("[global]\nmon host = 127.0.0.1\n"), 0o644)
	os.WriteFile(kr, []byte("[client.admin]\n\tkey = ADMINKEY\n[client.corral]\n\tkey = CORRALKEY\n"), 0o600)
	disks := []hypervisor.DiskSpec{{Index: 0, Path: "/x"}, {Index: 1, RBD: &hypervisor.RBDImage{Pool: "p", Image: "i", Client: "corral", Conf: conf, Keyring: kr}}}
	if err := writeCephFiles(disks, run, os.Getuid(), os.Getgid()); err != nil {
		t.Fatal(err)
	}
	key, err := os.ReadFile(cephFile(run, 1, "keyring"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(key), "CORRALKEY") || strings.Contains(string(key), "ADMINKEY") {
		t.Errorf("qemu's keyring %q", key)
	}
	for _, kind := range []string{"conf", "keyring"} {
		st, err := os.Stat(cephFile(run, 1, kind))
		if err != nil || st.Mode().Perm() != 0o400 {
			t.Errorf("%s: %v, mode %v; want 0400", kind, err, st.Mode())
		}
	}
	if _, err := os.Stat(cephFile(run, 0, "conf")); err == nil {
		t.Error("ceph files written for a file disk")
	}
}
