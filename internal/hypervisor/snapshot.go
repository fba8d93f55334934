package hypervisor

import "context"

// DiskSnapshotter is implemented by hypervisors that can copy a disk of a
// running instance as it is at one moment, while the guest keeps running
// (the point-in-time copy an export of a running instance reads).
type DiskSnapshotter interface {
	// SnapshotDisk copies disk index of the running instance into target,
	// an existing file of the disk's size the caller created and removes.
	// It returns once the copy is complete; the copy holds the disk's
	// content as of the moment the call began, whatever the guest writes
	// meanwhile.
	SnapshotDisk(ctx context.Context, name string, index int, target string) error
}
