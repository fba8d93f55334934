package nodeapi

// Hotplug changes a running instance (Ganeti's hotplug_device and
// instance_balloon_memory, plus block_resize after a disk grew).
const Hotplug = "instance_hotplug"

// Hotplug actions and targets.
const (
	HotplugAdd    = "add"
	HotplugRemove = "remove"
	HotplugCheck  = "check" // only say whether hotplug is possible
	HotplugMemory = "memory"
	HotplugResize = "resize"
	HotplugDisk   = "disk"
	HotplugNIC    = "nic"
)

// HotplugArgs is one change to a running instance. Instance describes the
// instance with the device (for an add or resize: the configuration after
// the change; for a remove: before it); Index is the device's position.
type HotplugArgs struct {
	Instance  InstanceSpec `json:"instance"`
	Action    string       `json:"action"`
	Target    string       `json:"target"`
	Index     int          `json:"index"`
	MemoryMiB int64        `json:"memory,omitempty"`
}
