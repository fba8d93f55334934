package hypervisor

// Confinement says how an instance's process is confined on its node, as
// shown by `corral instance info`. Empty fields mean "not confined this way".
type Confinement struct {
	// SecurityModel is the hvparam in force at start: none, user or pool.
	SecurityModel string `json:"security_model,omitempty"`
	// User is the user qemu switched to: a name, or "uid:gid" for a pool uid
	// without one.
	User string `json:"user,omitempty"`
	UID  int    `json:"uid"`
	// Chroot is the empty directory qemu is jailed in.
	Chroot  string `json:"chroot,omitempty"`
	Sandbox bool   `json:"sandbox"`
	// Cgroups lists the cgroup directories holding the process.
	Cgroups []string `json:"cgroups,omitempty"`
	// CgroupError says why no cgroup could be set up; the instance runs
	// anyway.
	CgroupError string `json:"cgroup_error,omitempty"`
}
