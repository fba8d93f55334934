package kvm

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"github.com/corral/corral/internal/ecode"
	"github.com/corral/corral/internal/hypervisor"
	"github.com/corral/corral/internal/storage"
)

// cephFile is the confined qemu's copy of an rbd disk's ceph.conf
// ("conf") or keyring ("keyring") in the instance's run directory.
func cephFile(dir string, index int, kind string) string {
	return filepath.Join(dir, "ceph-disk"+strconv.Itoa(index)+"."+kind)
}

// rbdFileName is qemu's rbd: file name of a disk: librbd with the copies
// of the configuration and of the client's key.
func rbdFileName(d hypervisor.DiskSpec, dir string) string {
	r := d.RBD
	return fmt.Sprintf("rbd:%s/%s:id=%s:conf=%s:keyring=%s", r.Pool, r.Image, r.Client,
		cephFile(dir, d.Index, "conf"), cephFile(dir, d.Index, "keyring"))
}

// writeCephFiles gives qemu what librbd reads for each rbd disk: a copy of
// the node's ceph.conf and a keyring with only the disk's client key, both
// owned by qemu's uid and readable by it alone (0400), in the instance's
// run directory (itself 0750, qemu's). They go with the directory when the
// instance stops.
func writeCephFiles(disks []hypervisor.DiskSpec, dir string, uid, gid int) error {
	for _, d := range disks {
		if d.RBD == nil {
			continue
		}
		conf, err := os.ReadFile(d.RBD.Conf)
		if err != nil {
			return ecode.Errorf(ecode.Environ, "disk %d: reading ceph configuration: %w", d.Index, err)
		}
		key, err := storage.ClientKeyring(d.RBD.Keyring, d.RBD.Client)
		if err != nil {
			return fmt.Errorf("disk %d: %w", d.Index, err)
		}
		for kind, data := range map[string][]byte{"conf": conf, "keyring": key} {
			if err := writeOwned(cephFile(dir, d.Index, kind), data, uid, gid); err != nil {
				return ecode.Errorf(ecode.Environ, "disk %d: writing qemu's ceph %s: %w", d.Index, kind, err)
			}
		}
	}
	return nil
}

// writeOwned creates p with mode 0400 for uid (root keeps it when uid < 0)
// before any byte is written, so the key is never readable by others.
func writeOwned(p string, data []byte, uid, gid int) error {
	f, err := os.OpenFile(p, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o400)
	if err != nil {
		return err
	}
	if uid >= 0 {
		if err := f.Chown(uid, gid); err != nil {
			f.Close()
			return err
		}
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
