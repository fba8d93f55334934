package nodeapi

// A VM instance's rescue: the node writes the instance's rescue initrd (the
// agent ramdisk's with the rescue user's file appended) and tells the
// master the kernel and initrd to start the instance with; cleanup removes
// the initrd.
const (
	InstanceRescuePrepare = "instance_rescue_prepare"
	InstanceRescueCleanup = "instance_rescue_cleanup"
)

// InstanceRescuePrepareArgs carry what the rescue user gets: the crypt
// hash ($5$ or $6$) of its password and SSH public keys.
type InstanceRescuePrepareArgs struct {
	InstanceUUID       string   `json:"instance_uuid"`
	RescuePasswordHash string   `json:"rescue_password_hash"`
	SSHPublicKeys      []string `json:"ssh_public_keys,omitempty"`
}

// InstanceRescuePrepareReply names the files on the node the instance is
// started with (hvparams kernel_path and initrd_path for this start).
type InstanceRescuePrepareReply struct {
	KernelPath string `json:"kernel_path"`
	InitrdPath string `json:"initrd_path"`
}

// InstanceRescueCleanupArgs names the instance whose rescue initrd goes.
type InstanceRescueCleanupArgs struct {
	InstanceUUID string `json:"instance_uuid"`
}
