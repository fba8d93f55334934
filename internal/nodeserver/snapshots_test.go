package nodeserver

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/corral/corral/internal/ecode"
	"github.com/corral/corral/internal/hypervisor"
	"github.com/corral/corral/internal/hypervisor/fake"
	"github.com/corral/corral/internal/nodeapi"
)

// runningFakeInstance gives s the fake hypervisor and starts inst (whose
// disk must exist) on it.
func runningFakeInstance(t *testing.T, s *Server, inst nodeapi.InstanceSpec) {
	t.Helper()
	h, err := fake.New(filepath.Join(s.opts.StateDir, "fake"), hypervisor.NodeResources{MemoryTotalMiB: 4096, MemoryFreeMiB: 4096, CPUs: 2})
	if err != nil {
		t.Fatal(err)
	}
	s.hvs = map[string]hypervisor.Hypervisor{hypervisor.Fake: h}
	s.opts.Hypervisors = []string{hypervisor.Fake}
	s.snaps = &snapshotStore{dir: filepath.Join(s.opts.StateDir, "snapshots"), log: s.log}
	spec, err := s.hvSpec(inst)
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Start(context.Background(), spec); err != nil {
		t.Fatal(err)
	}
}

func pattern(b byte, n int) []byte { return bytes.Repeat([]byte{b}, n) }

// A copy of a running instance's disk holds the disk as it was when the
// copy was made: an export (raw and through the OS script) reads the copy,
// not what the disk holds later. Removing a copy deletes its file and
// record; a restarted daemon sweeps the copies left behind.
func TestDiskSnapshotExportRemoveSweep(t *testing.T) {
	a, b := testNode(t, "node-a"), testNode(t, "node-b")
	dummyOS(t, a)
	inst := testInstance(1)
	inst.Hypervisor, inst.MemoryMiB, inst.VCPUs = hypervisor.Fake, 128, 1
	disk := createDisk(t, a, inst)
	before := pattern('A', 1<<20)
	if err := os.WriteFile(disk, before, 0o600); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()

	// Not running: nothing is copied and nothing is recorded.
	a.hvs = nil
	runningFakeInstance(t, a, inst)
	other := inst
	other.UUID = "0b8ab3f4-3d0c-4a52-9d70-6c1d0b7e1f09"
	if _, err := a.diskSnapshot(ctx, nodeapi.DiskSnapshotArgs{Instance: other}); err == nil {
		t.Fatal("snapshot of an instance that does not run (another uuid) succeeded")
	}
	if recs, _ := os.ReadDir(a.snaps.dir); len(recs) != 0 {
		t.Fatalf("a refused snapshot left records: %v", recs)
	}

	r, err := a.diskSnapshot(ctx, nodeapi.DiskSnapshotArgs{Instance: inst})
	if err != nil {
		t.Fatal(err)
	}
	snaps := r.(nodeapi.DiskSnapshotReply).Snapshots
	if len(snaps) != 1 || snaps[0].Disk != 0 || snaps[0].SizeMiB != 1 || !snapshotNameRE.MatchString(snaps[0].Name) {
		t.Fatalf("snapshot reply %+v", snaps)
	}
	name := snaps[0].Name
	rec, err := a.snaps.load(name)
	if err != nil {
		t.Fatal(err)
	}
	if filepath.Dir(rec.Path) != filepath.Dir(disk) || !strings.HasPrefix(filepath.Base(rec.Path), ".") {
		t.Fatalf("copy %s is not a hidden file next to the disk %s", rec.Path, disk)
	}
	// The fake's file backend does not list the copy as a disk.
	found, err := a.storage["file"].List(ctx)
	if err != nil || len(found) != 1 || found[0].Path != disk {
		t.Fatalf("disks listed: %+v, %v", found, err)
	}

	// The guest writes after the copy was made.
	if err := os.WriteFile(disk, pattern('B', 1<<20), 0o600); err != nil {
		t.Fatal(err)
	}

	for _, kind := range []string{nodeapi.IODisk, nodeapi.IOScript} {
		optA, optB := pairOptions(t, a, b, "none")
		file := "disk0-" + kind
		imp := startImport(t, b, nodeapi.ImportStartArgs{Options: optB, Component: "disk0",
			IO: nodeapi.ImpExpIO{Kind: nodeapi.IOFile, ExportName: inst.Name, FileName: file}})
		exp := startExport(t, a, nodeapi.ExportStartArgs{Options: optA, Component: "disk0", Host: imp.Host, Port: imp.Port,
			IO: nodeapi.ImpExpIO{Kind: kind, Instance: inst, Disk: 0, SizeMiB: 1, Snapshot: name}})
		checkOK(t, waitDone(t, a, exp), len(before))
		checkOK(t, waitDone(t, b, imp.Name), len(before))
		got, err := os.ReadFile(filepath.Join(b.opts.ExportDir, inst.Name+".new", file))
		if err != nil || !bytes.Equal(got, before) {
			t.Fatalf("%s export of the snapshot: %d bytes, first %q, err %v; want the disk as it was", kind, len(got), got[:min(len(got), 1)], err)
		}
	}

	// A copy is only read for its own instance's disk, and never written.
	wrong := nodeapi.ImpExpIO{Kind: nodeapi.IODisk, Instance: other, Disk: 0, SizeMiB: 1, Snapshot: name}
	wrong.Instance.Disks = inst.Disks
	if _, err := a.exportDiskImage(wrong); err == nil || !strings.Contains(err.Error(), "not a copy") {
		t.Fatalf("snapshot read for another instance: %v", err)
	}
	optA, _ := pairOptions(t, a, b, "none")
	if _, err := a.importStart(ctx, nodeapi.ImportStartArgs{Options: optA, Component: "disk0",
		IO: nodeapi.ImpExpIO{Kind: nodeapi.IODisk, Instance: inst, Disk: 0, SizeMiB: 1, Snapshot: name}}); err == nil {
		t.Fatal("an import into a snapshot was accepted")
	}

	// Remove: the file and its record go; a second removal succeeds.
	for range 2 {
		if _, err := a.diskSnapshotRemove(ctx, nodeapi.DiskSnapshotRemoveArgs{Names: []string{name}}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := os.Stat(rec.Path); !os.IsNotExist(err) {
		t.Fatalf("removed copy still there: %v", err)
	}
	if _, err := a.snaps.load(name); ecode.ClassOf(err) != ecode.NoEnt {
		t.Fatalf("removed copy still recorded: %v", err)
	}
	if _, err := a.exportDiskImage(nodeapi.ImpExpIO{Kind: nodeapi.IODisk, Instance: inst, Disk: 0, Snapshot: name}); ecode.ClassOf(err) != ecode.NoEnt {
		t.Fatalf("export of a removed copy: %v", err)
	}

	// A copy nobody removed is swept when the daemon starts again.
	r, err = a.diskSnapshot(ctx, nodeapi.DiskSnapshotArgs{Instance: inst})
	if err != nil {
		t.Fatal(err)
	}
	left, err := a.snaps.load(r.(nodeapi.DiskSnapshotReply).Snapshots[0].Name)
	if err != nil {
		t.Fatal(err)
	}
	restarted := &snapshotStore{dir: a.snaps.dir, log: a.log}
	restarted.sweep()
	if _, err := os.Stat(left.Path); !os.IsNotExist(err) {
		t.Fatalf("leftover copy not swept: %v", err)
	}
	if recs, _ := os.ReadDir(a.snaps.dir); len(recs) != 0 {
		t.Fatalf("records left after the sweep: %v", recs)
	}
	entries, _ := os.ReadDir(filepath.Dir(disk))
	if len(entries) != 1 {
		t.Fatalf("files next to the disk after the sweep: %v", entries)
	}
}

// Names that are not the daemon's own are refused before any file is
// touched.
func TestDiskSnapshotRemoveRefusesBadNames(t *testing.T) {
	s := testNode(t, "node-a")
	s.snaps = &snapshotStore{dir: filepath.Join(s.opts.StateDir, "snapshots"), log: s.log}
	for _, n := range []string{"../x", "snap-../../etc", "snap-0123", ""} {
		if _, err := s.diskSnapshotRemove(context.Background(), nodeapi.DiskSnapshotRemoveArgs{Names: []string{n}}); ecode.ClassOf(err) != ecode.Inval {
			t.Errorf("remove %q: %v", n, err)
		}
	}
}
