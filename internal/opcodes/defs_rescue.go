package opcodes

// instanceRescueDefs are Corral's rescue of a VM instance: it boots the
// bare-metal agent's rescue ramdisk with its disks attached, and unrescue
// boots its own system again (Corral only; Ganeti has none).
func instanceRescueDefs() []Def {
	inst := Param{Name: "instance_name", Type: TNEString, Required: true, Doc: "instance name"}
	shutdownTimeout := Param{Name: "shutdown_timeout", Type: TNonNegInt, Default: float64(120), Doc: "seconds to wait for a clean shutdown"}
	return []Def{
		{ID: "OP_INSTANCE_RESCUE", KeyPrm: "instance_name", Doc: "stop a kvm instance and start it on the rescue ramdisk, where the user rescue logs in (Corral only)", Params: []Param{
			inst, shutdownTimeout,
			{Name: "rescue_password_hash", Type: TNEString, Required: true, Doc: "crypt(3) hash ($5$ or $6$) of the rescue user's password (the CLI hashes it; the clear password never reaches the master)", Sensitive: Secret},
			{Name: "ssh_public_keys", Type: TStringList, Default: []any{}, Doc: "SSH public keys for the rescue user"},
		}},
		{ID: "OP_INSTANCE_UNRESCUE", KeyPrm: "instance_name", Doc: "stop a rescued instance, remove its rescue ramdisk and start its own system (Corral only)", Params: []Param{
			inst, shutdownTimeout,
		}},
	}
}
