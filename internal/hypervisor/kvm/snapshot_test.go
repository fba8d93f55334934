package kvm

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/corral/corral/internal/hypervisor"
)

// TestSnapshotDiskInQemu copies the disk of a real qemu (no guest: the
// firmware finds nothing to boot) running as the unprivileged qemu user
// into a root-owned file, for a paravirtual disk (found by its drive id)
// and an ide one (found by file name). The copy equals the disk, qemu
// keeps running and holds no job or block node of the copy afterwards,
// and a target of the wrong size fails without leaving either.
func TestSnapshotDiskInQemu(t *testing.T) {
	if _, err := exec.LookPath("qemu-system-x86_64"); err != nil {
		requireQemu(t, "qemu-system-x86_64 is not installed")
	}
	uid, gid := qemuUID(t)
	ctx := context.Background()
	h, err := New(Options{RunDir: shortDir(t), StateDir: t.TempDir(), CgroupMountinfo: "none"})
	if err != nil {
		t.Fatal(err)
	}
	for _, diskType := range []string{hypervisor.TypeParavirtual, "ide"} {
		t.Run(diskType, func(t *testing.T) {
			dir := shortDir(t)
			if err := os.Chmod(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			data := make([]byte, 4<<20)
			rand.Read(data[512:]) // an empty boot sector: nothing to boot
			disk := filepath.Join(dir, "disk0")
			if err := os.WriteFile(disk, data, 0o600); err != nil {
				t.Fatal(err)
			}
			if uid >= 0 {
				if err := os.Chown(disk, uid, gid); err != nil {
					t.Fatal(err)
				}
			}
			name := "snap-" + diskType + ".example.org"
			spec := hypervisor.InstanceSpec{Name: name, UUID: randomUUID(t), MemoryMiB: 64, VCPUs: 1,
				HVParams: map[string]string{hypervisor.ParamDiskType: diskType},
				Disks:    []hypervisor.DiskSpec{{Index: 0, Path: disk, SizeMiB: 4}}}
			t.Cleanup(func() { _ = h.Stop(context.Background(), name, 0, true) })
			if err := h.Start(ctx, spec); err != nil {
				t.Fatal(err)
			}
			info, err := h.Info(ctx, name)
			if err != nil || info == nil {
				t.Fatalf("Info: %+v, %v", info, err)
			}

			target := filepath.Join(dir, ".disk0.copy")
			if err := os.WriteFile(target, nil, 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Truncate(target, int64(len(data))); err != nil {
				t.Fatal(err)
			}
			if err := h.SnapshotDisk(ctx, name, 0, target); err != nil {
				t.Fatal(err)
			}
			got, err := os.ReadFile(target)
			if err != nil || !bytes.Equal(got, data) {
				t.Fatalf("the copy differs from the disk (%d bytes, %v)", len(got), err)
			}
			leftovers(t, h, name)

			// A target of another size: qemu refuses the job.
			if err := os.Truncate(target, 1<<20); err != nil {
				t.Fatal(err)
			}
			if err := h.SnapshotDisk(ctx, name, 0, target); err == nil {
				t.Fatal("a copy into a target of the wrong size succeeded")
			}
			leftovers(t, h, name)
			if err := h.SnapshotDisk(ctx, name, 3, target); err == nil || !strings.Contains(err.Error(), "no disk 3") {
				t.Fatalf("copy of a disk the instance does not have: %v", err)
			}
			if after, err := h.Info(ctx, name); err != nil || after == nil || after.PID != info.PID {
				t.Fatalf("qemu after the copies: %+v, %v (was pid %d)", after, err, info.PID)
			}
		})
	}
}

// leftovers fails when qemu still holds a job or the block node of a copy.
func leftovers(t *testing.T, h *Hypervisor, name string) {
	t.Helper()
	rec, _, err := h.running(name)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	raw, err := qmpDo(ctx, rec.path(fileQMP), "query-jobs", nil)
	if err != nil || string(raw) != "[]" {
		t.Fatalf("jobs left: %s, %v", raw, err)
	}
	raw, err = qmpDo(ctx, rec.path(fileQMP), "query-named-block-nodes", nil)
	if err != nil {
		t.Fatal(err)
	}
	var nodes []struct {
		NodeName string `json:"node-name"`
	}
	if err := json.Unmarshal(raw, &nodes); err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes {
		if n.NodeName == snapshotNode(0) {
			t.Fatalf("block node %s left", n.NodeName)
		}
	}
}
