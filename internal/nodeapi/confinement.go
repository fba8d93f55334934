package nodeapi

// Confinement is how a node confines an instance's process (the kvm
// driver's hypervisor.Confinement on the wire).
type Confinement struct {
	SecurityModel string   `json:"security_model,omitempty"`
	User          string   `json:"user,omitempty"`
	UID           int      `json:"uid"`
	Chroot        string   `json:"chroot,omitempty"`
	Sandbox       bool     `json:"sandbox"`
	Cgroups       []string `json:"cgroups,omitempty"`
	CgroupError   string   `json:"cgroup_error,omitempty"`
}
