package kvm

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/corral/corral/internal/ecode"
	"github.com/corral/corral/internal/hypervisor"
)

var _ hypervisor.DiskSnapshotter = (*Hypervisor)(nil)

const (
	// snapshotPoll is how often a running copy's job is looked at.
	snapshotPoll = 200 * time.Millisecond
	// snapshotCleanupWait bounds taking a copy's job and target node down.
	snapshotCleanupWait = 30 * time.Second
)

// snapshotNode and snapshotJob name the target block node and the backup
// job of disk idx's copy. One copy per disk runs at a time (the instance's
// lock is held), so fixed names let a copy left by a stopped node daemon
// be found and taken down.
func snapshotNode(idx int) string { return "snap" + strconv.Itoa(idx) }
func snapshotJob(idx int) string  { return "snapshot" + strconv.Itoa(idx) }

// qmpJob is one entry of query-jobs.
type qmpJob struct {
	ID     string `json:"id"`
	Status string `json:"status"`
	Error  string `json:"error"`
	Done   int64  `json:"current-progress"`
	Total  int64  `json:"total-progress"`
}

// SnapshotDisk copies disk index into target with a full blockdev-backup:
// qemu copies the disk as it was when the job started, saving each block
// the guest overwrites meanwhile before the write lands. qemu runs
// unprivileged, so the node opens target and hands qemu the descriptor; the
// monitor is released while the job runs (it serves one client at a time)
// and the job is polled on short connections.
func (h *Hypervisor) SnapshotDisk(ctx context.Context, name string, index int, target string) error {
	defer h.lock(name)()
	rec, hv, err := h.running(name)
	if err != nil {
		return err
	}
	var disk *hypervisor.DiskSpec
	for i := range rec.Spec.Disks {
		if rec.Spec.Disks[i].Index == index {
			disk = &rec.Spec.Disks[i]
		}
	}
	if disk == nil {
		return ecode.Errorf(ecode.Inval, "instance %s has no disk %d", name, index)
	}
	if disk.RBD != nil {
		return ecode.Errorf(ecode.State, "disk %d of %s is an rbd image: it is not copied through qemu", index, name)
	}
	sock := rec.path(fileQMP)
	source, err := sourceDevice(ctx, sock, *disk, hv)
	if err != nil {
		return ecode.ExecErrorf("snapshot of disk %d of %s: %w", index, name, err)
	}
	// A copy left by a node daemon that stopped in the middle holds the
	// names: take it down first.
	dropSnapshot(ctx, sock, index)
	if err := startSnapshot(ctx, sock, index, source, target); err != nil {
		dropSnapshot(ctx, sock, index)
		return ecode.ExecErrorf("snapshot of disk %d of %s: %w", index, name, err)
	}
	err = waitSnapshot(ctx, sock, index)
	dropSnapshot(ctx, sock, index)
	if err != nil {
		return ecode.ExecErrorf("snapshot of disk %d of %s: %w", index, name, err)
	}
	return nil
}

// sourceDevice names disk d's root block node for blockdev-backup: a
// paravirtual disk has its fixed drive id (or node name, when hot-added);
// the drives of other disk types get ids from qemu, found by file name.
func sourceDevice(ctx context.Context, sock string, d hypervisor.DiskSpec, hv map[string]string) (string, error) {
	if hotpluggable(hv[hypervisor.ParamDiskType]) {
		return driveID(d.Index), nil
	}
	raw, err := qmpDo(ctx, sock, "query-block", nil)
	if err != nil {
		return "", err
	}
	var blocks []struct {
		Device   string `json:"device"`
		Inserted *struct {
			File     string `json:"file"`
			NodeName string `json:"node-name"`
		} `json:"inserted"`
	}
	if err := json.Unmarshal(raw, &blocks); err != nil {
		return "", fmt.Errorf("query-block: %w", err)
	}
	for _, b := range blocks {
		if b.Inserted == nil || b.Inserted.File != d.Path {
			continue
		}
		if b.Device != "" {
			return b.Device, nil
		}
		return b.Inserted.NodeName, nil
	}
	return "", fmt.Errorf("qemu has no drive with file %s", d.Path)
}

// startSnapshot opens target as a raw block node of qemu's and starts the
// backup job into it.
func startSnapshot(ctx context.Context, sock string, index int, source, target string) error {
	c, err := dialQMP(ctx, sock)
	if err != nil {
		return err
	}
	defer c.Close()
	f, err := os.OpenFile(target, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	raw, err := c.ExecuteWithFD(ctx, "add-fd", map[string]any{"opaque": snapshotNode(index)}, int(f.Fd()))
	if err != nil {
		return err
	}
	var info struct {
		FDSetID int `json:"fdset-id"`
	}
	if err := json.Unmarshal(raw, &info); err != nil {
		return fmt.Errorf("add-fd: %w", err)
	}
	file := map[string]any{"driver": "file", "filename": "/dev/fdset/" + strconv.Itoa(info.FDSetID)}
	_, err = c.Execute(ctx, "blockdev-add", map[string]any{"driver": "raw", "node-name": snapshotNode(index), "file": file})
	// qemu holds its own copy of the descriptor once the node is open.
	_, _ = c.Execute(ctx, "remove-fd", map[string]any{"fdset-id": info.FDSetID})
	if err != nil {
		return err
	}
	_, err = c.Execute(ctx, "blockdev-backup", map[string]any{"job-id": snapshotJob(index), "device": source,
		"target": snapshotNode(index), "sync": "full", "auto-dismiss": false})
	return err
}

// waitSnapshot polls the backup job until it concludes and reports how it
// ended. A cancelled ctx cancels the job.
func waitSnapshot(ctx context.Context, sock string, index int) error {
	for {
		j, found, err := findJob(ctx, sock, snapshotJob(index))
		if err != nil {
			return err
		}
		if !found {
			return fmt.Errorf("backup job %s vanished", snapshotJob(index))
		}
		if j.Status == "concluded" || j.Status == "null" {
			if j.Error != "" {
				return fmt.Errorf("backup job: %s", j.Error)
			}
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(snapshotPoll):
		}
	}
}

func findJob(ctx context.Context, sock, id string) (qmpJob, bool, error) {
	raw, err := qmpDo(ctx, sock, "query-jobs", nil)
	if err != nil {
		return qmpJob{}, false, err
	}
	var jobs []qmpJob
	if err := json.Unmarshal(raw, &jobs); err != nil {
		return qmpJob{}, false, fmt.Errorf("query-jobs: %w", err)
	}
	for _, j := range jobs {
		if j.ID == id {
			return j, true, nil
		}
	}
	return qmpJob{}, false, nil
}

// dropSnapshot takes disk index's copy down whatever its state: it cancels
// the job if it still runs, dismisses it and closes the target node (qemu
// then closes the target file). Nothing there is fine.
func dropSnapshot(ctx context.Context, sock string, index int) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), snapshotCleanupWait)
	defer cancel()
	id := snapshotJob(index)
	for {
		j, found, err := findJob(ctx, sock, id)
		if err != nil || !found {
			break
		}
		if j.Status == "concluded" || j.Status == "null" {
			_, _ = qmpDo(ctx, sock, "job-dismiss", map[string]any{"id": id})
			break
		}
		_, _ = qmpDo(ctx, sock, "job-cancel", map[string]any{"id": id})
		select {
		case <-ctx.Done():
			return
		case <-time.After(snapshotPoll):
		}
	}
	_, _ = qmpDo(ctx, sock, "blockdev-del", map[string]any{"node-name": snapshotNode(index)})
}
