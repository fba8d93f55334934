package hypervisor

import "context"

// Hotplugger is implemented by hypervisors that change a running
// instance's devices and memory (Ganeti's hotplug and runtime_mem). Devices
// are named by their index in the instance's configuration; the caller has
// made the disk's storage and the NIC's tap ready before an add.
type Hotplugger interface {
	// HotplugSupported says why devices cannot be hot-added to or removed
	// from the running instance, nil when they can.
	HotplugSupported(ctx context.Context, name string) error
	HotAddDisk(ctx context.Context, name string, d DiskSpec) error
	HotRemoveDisk(ctx context.Context, name string, index int) error
	HotAddNIC(ctx context.Context, name string, n NICSpec) error
	HotRemoveNIC(ctx context.Context, name string, index int) error
	// SetMemory asks the guest's balloon for a new memory size.
	SetMemory(ctx context.Context, name string, mib int64) error
	// ResizeDisk tells the running instance that disk index grew.
	ResizeDisk(ctx context.Context, name string, index int, mib int64) error
}
