package nodeapi

// Point-in-time copies of a running instance's disks, for an export that
// does not shut the instance down (Ganeti's gnt-backup export --noshutdown
// snapshots the disks the same way).
const (
	// DiskSnapshot copies disks of a running instance through its
	// hypervisor while it keeps running.
	DiskSnapshot = "instance_disk_snapshot"
	// DiskSnapshotRemove deletes copies; unknown names are ignored.
	DiskSnapshotRemove = "instance_disk_snapshot_remove"
)

// DiskSnapshotArgs names the running instance and the disks to copy (all
// when Disks is empty).
type DiskSnapshotArgs struct {
	Instance InstanceSpec `json:"instance"`
	Disks    []int        `json:"disks,omitempty"`
}

// DiskSnapshotReply lists the copies made, one per disk, in disk order.
type DiskSnapshotReply struct {
	Snapshots []DiskSnapshotInfo `json:"snapshots"`
}

// DiskSnapshotInfo is one copy: a transfer reads it when its ImpExpIO
// names it (Snapshot), instead of the live disk.
type DiskSnapshotInfo struct {
	Disk    int     `json:"disk"`
	Name    string  `json:"name"`
	SizeMiB int64   `json:"size"`
	Seconds float64 `json:"seconds"` // how long the copy took
}

// DiskSnapshotRemoveArgs names copies to delete.
type DiskSnapshotRemoveArgs struct {
	Names []string `json:"names"`
}
