package opcodes

import "slices"

// Defs returns the opcode definitions Corral implements, with Ganeti's
// parameter names. The table is built on each call so no package state can
// be mutated by a caller.
func Defs() []Def {
	return slices.Concat(coreDefs(), tagDefs(), groupDefs(), diskDefs(), osDefs(), backupDefs(), cryptoDefs(), housekeepingDefs(), machineDefs(), instanceRescueDefs(), coeDefs(), evacuateDefs(), migrateDefs(), maintDefs(), networkDefs(), multiAllocDefs(), oobDefs(), storageDefs())
}

// MaxTestDelay bounds OP_TEST_DELAY's duration (seconds) and its repeat
// count: a week is far beyond any test, and far below time.Duration's range.
const MaxTestDelay = 7 * 24 * 3600

// coreDefs are the cluster, node and instance life-cycle opcodes.
func coreDefs() []Def {
	inst := Param{Name: "instance_name", Type: TNEString, Required: true, Doc: "instance name"}
	node := Param{Name: "node_name", Type: TNEString, Required: true, Doc: "node name"}
	force := Param{Name: "force", Type: TBool, Default: false, Doc: "force the operation"}
	shutdownTimeout := Param{Name: "shutdown_timeout", Type: TNonNegInt, Default: float64(120), Doc: "seconds to wait for a clean shutdown"}
	instUUID := Param{Name: "instance_uuid", Type: TMaybeString, Default: nil, Doc: "instance uuid: must match instance_name"}
	nodeUUID := Param{Name: "node_uuid", Type: TMaybeString, Default: nil, Doc: "node uuid: must match node_name"}
	hvState := Param{Name: "hv_state", Type: TAny, Default: nil, Doc: "static hypervisor state: {hypervisor: {cpu_node, cpu_total, mem_hv, mem_node, mem_total}}"}
	diskState := Param{Name: "disk_state", Type: TAny, Default: nil, Doc: "static disk state: {storage type: {unit: {disk_overhead, disk_reserved, disk_total}}}"}
	return []Def{
		{ID: "OP_TEST_DELAY", KeyPrm: "duration", Doc: "sleep for a while (testing)", Params: []Param{
			{Name: "duration", Type: TNonNegFloat, Required: true, Doc: "seconds to sleep", Max: MaxTestDelay, MaxDoc: "7 days"},
			{Name: "on_master", Type: TBool, Default: true, Doc: "sleep on the master"},
			{Name: "on_nodes", Type: TStringList, Default: []any{}, Doc: "node names to sleep on"},
			{Name: "on_node_uuids", Type: TAny, Default: nil, Doc: "node uuids (internal)"},
			{Name: "repeat", Type: TNonNegInt, Default: float64(0), Max: MaxTestDelay, Doc: "repeat the delay this many times, logging each"},
			{Name: "no_locks", Type: TBool, Default: true, Doc: "take no locks"},
			{Name: "interruptible", Type: TBool, Default: false, Doc: "allow cancel while sleeping"},
			// Corral only: no production step is unsafe to repeat, so this
			// is how the handling of an interrupted unsafe step is tested.
			{Name: "unsafe_to_repeat", Type: TBool, Default: false, Doc: "declare the delay step unsafe to repeat (Corral only, for testing): a master restart while it runs fails the op instead of sleeping again"},
			// Corral only: the way to test a step that suspends until an
			// event, across master restarts.
			{Name: "wake_event", Type: TString, Default: "", Doc: "wait suspended, holding no lock, until this event is delivered (LUXI NotifyEvent) or duration passes, instead of sleeping (Corral only, for testing)"},
		}},
		{ID: "OP_CLUSTER_VERIFY", Doc: "verify the cluster", Params: []Param{
			{Name: "group_name", Type: TMaybeString, Default: nil},
			{Name: "error_codes", Type: TBool, Default: false},
			{Name: "debug_simulate_errors", Type: TBool, Default: false},
			{Name: "skip_checks", Type: TStringList, Default: []any{}},
			{Name: "ignore_errors", Type: TStringList, Default: []any{}},
			{Name: "verbose", Type: TBool, Default: false},
			{Name: "verify_clutter", Type: TBool, Default: false, Unsupported: "check of authorized_keys for clutter"},
		}},
		{ID: "OP_CLUSTER_SET_PARAMS", Doc: "change cluster parameters", Params: clusterSetParams()},
		{ID: "OP_CLUSTER_DESTROY", Doc: "destroy the cluster (no instances may exist)", Params: nil},
		{ID: "OP_NODE_ADD", KeyPrm: "node_name", Doc: "add a node that has joined with a token", Params: []Param{
			node,
			{Name: "primary_ip", Type: TMaybeString, Default: nil},
			{Name: "secondary_ip", Type: TMaybeString, Default: nil},
			{Name: "readd", Type: TBool, Default: false},
			{Name: "group", Type: TMaybeString, Default: nil},
			{Name: "master_capable", Type: TAny, Default: nil},
			{Name: "vm_capable", Type: TAny, Default: nil},
			{Name: "ndparams", Type: TAny, Default: nil},
			hvState, diskState,
			{Name: "node_setup", Type: TBool, Default: false, Doc: "set up the node's SSH (Corral follows the cluster's modify_ssh_setup)"},
		}},
		{ID: "OP_NODE_REMOVE", KeyPrm: "node_name", Doc: "remove a node", Params: []Param{node, nodeUUID}},
		{ID: "OP_NODE_SET_PARAMS", KeyPrm: "node_name", Doc: "change a node's flags", Params: []Param{
			node, nodeUUID, force, hvState, diskState,
			{Name: "master_candidate", Type: TAny, Default: nil},
			{Name: "offline", Type: TAny, Default: nil},
			{Name: "drained", Type: TAny, Default: nil},
			{Name: "master_capable", Type: TAny, Default: nil},
			{Name: "vm_capable", Type: TAny, Default: nil},
			{Name: "auto_promote", Type: TBool, Default: false},
			{Name: "ndparams", Type: TAny, Default: nil},
			{Name: "secondary_ip", Type: TMaybeString, Default: nil},
			{Name: "powered", Type: TAny, Default: nil},
		}},
		{ID: "OP_INSTANCE_CREATE", KeyPrm: "instance_name", Doc: "create an instance", Params: []Param{
			inst,
			{Name: "mode", Type: TString, Default: "create", Doc: "create | import | remote-import"},
			{Name: "os_type", Type: TMaybeString, Default: nil},
			{Name: "osparams", Type: TDict, Default: map[string]any{}},
			{Name: "osparams_private", Type: TAny, Default: nil, Sensitive: Private},
			{Name: "osparams_secret", Type: TAny, Default: nil, Sensitive: Secret},
			{Name: "force_variant", Type: TBool, Default: false},
			{Name: "no_install", Type: TAny, Default: nil},
			{Name: "pnode", Type: TMaybeString, Default: nil},
			{Name: "pnode_uuid", Type: TMaybeString, Default: nil, Doc: "primary node uuid: must match pnode"},
			{Name: "snode", Type: TMaybeString, Default: nil, Doc: "secondary node (ignored: Corral's disk templates are not mirrored)"},
			{Name: "snode_uuid", Type: TMaybeString, Default: nil},
			{Name: "iallocator", Type: TMaybeString, Default: nil},
			{Name: "group_name", Type: TMaybeString, Default: nil, Doc: "place the instance in this node group"},
			{Name: "disk_template", Type: TMaybeString, Default: nil, Doc: "the cluster's first enabled disk template when absent"},
			{Name: "disks", Type: TList, Required: true},
			{Name: "nics", Type: TList, Required: true},
			{Name: "hypervisor", Type: TMaybeString, Default: nil},
			{Name: "hvparams", Type: TDict, Default: map[string]any{}},
			{Name: "beparams", Type: TDict, Default: map[string]any{}},
			{Name: "start", Type: TBool, Default: true},
			{Name: "wait_for_sync", Type: TBool, Default: true},
			{Name: "ip_check", Type: TBool, Default: true, Doc: "accepted; Corral does not ping the instance's IP"},
			{Name: "name_check", Type: TBool, Default: true, Doc: "accepted; Corral does not resolve the instance's name"},
			{Name: "conflicts_check", Type: TBool, Default: true},
			{Name: "file_storage_dir", Type: TMaybeString, Default: nil, Unsupported: "per-instance file storage directories"},
			{Name: "file_driver", Type: TMaybeString, Default: nil, Unsupported: "file drivers other than loop", Honoured: []any{"loop"}},
			{Name: "tags", Type: TStringList, Default: []any{}},
			{Name: "src_node", Type: TMaybeString, Default: nil},
			{Name: "src_node_uuid", Type: TMaybeString, Default: nil, Doc: "export node uuid: must match src_node"},
			{Name: "src_path", Type: TMaybeString, Default: nil},
			{Name: "source_handshake", Type: TAny, Default: nil, Doc: "remote-import: the source's signed handshake"},
			{Name: "source_x509_ca", Type: TMaybeString, Default: nil, Doc: "remote-import: the source's signed certificate"},
			{Name: "source_instance_name", Type: TMaybeString, Default: nil, Doc: "remote-import: the instance's name on the source"},
			{Name: "source_shutdown_timeout", Type: TNonNegInt, Default: float64(120)},
			{Name: "compress", Type: TString, Default: "none", Doc: "none | gzip | gzip-fast | gzip-slow | zstd"},
			{Name: "identify_defaults", Type: TBool, Default: false},
			{Name: "opportunistic_locking", Type: TBool, Default: false},
			{Name: "ignore_ipolicy", Type: TBool, Default: false, Doc: "ignore the instance policy's bounds on memory, vcpus and spindle use"},
			{Name: "instance_communication", Type: TBool, Default: false},
			{Name: "helper_startup_timeout", Type: TAny, Default: nil},
			{Name: "helper_shutdown_timeout", Type: TAny, Default: nil},
			{Name: "forthcoming", Type: TBool, Default: false, Unsupported: "forthcoming instances"},
			{Name: "commit", Type: TBool, Default: false, Unsupported: "forthcoming instances to commit"},
		}},
		{ID: "OP_INSTANCE_REMOVE", KeyPrm: "instance_name", Doc: "remove an instance", Params: []Param{
			inst, instUUID, shutdownTimeout,
			{Name: "ignore_failures", Type: TBool, Default: false},
		}},
		{ID: "OP_INSTANCE_STARTUP", KeyPrm: "instance_name", Doc: "start an instance", Params: []Param{
			inst, instUUID, force, shutdownTimeout,
			{Name: "ignore_offline_nodes", Type: TBool, Default: false},
			{Name: "hvparams", Type: TDict, Default: map[string]any{}},
			{Name: "beparams", Type: TDict, Default: map[string]any{}},
			{Name: "no_remember", Type: TBool, Default: false},
			{Name: "startup_paused", Type: TBool, Default: false},
		}},
		{ID: "OP_INSTANCE_SHUTDOWN", KeyPrm: "instance_name", Doc: "stop an instance", Params: []Param{
			inst, instUUID, force,
			{Name: "ignore_offline_nodes", Type: TBool, Default: false},
			{Name: "timeout", Type: TNonNegInt, Default: float64(120), Doc: "seconds to wait for a clean shutdown"},
			{Name: "no_remember", Type: TBool, Default: false},
			{Name: "admin_state_source", Type: TMaybeString, Default: nil},
		}},
		{ID: "OP_INSTANCE_REBOOT", KeyPrm: "instance_name", Doc: "reboot an instance", Params: []Param{
			inst, instUUID, shutdownTimeout,
			{Name: "reboot_type", Type: TString, Default: "soft", Doc: "soft | hard | full"},
			{Name: "ignore_secondaries", Type: TBool, Default: false},
		}},
		{ID: "OP_INSTANCE_REINSTALL", KeyPrm: "instance_name", Doc: "reinstall an instance's OS", Params: []Param{
			inst, instUUID,
			{Name: "os_type", Type: TMaybeString, Default: nil},
			{Name: "force_variant", Type: TBool, Default: false},
			{Name: "osparams", Type: TAny, Default: nil},
			{Name: "osparams_private", Type: TAny, Default: nil, Sensitive: Private},
			{Name: "osparams_secret", Type: TAny, Default: nil, Sensitive: Secret},
		}},
		{ID: "OP_INSTANCE_RENAME", KeyPrm: "instance_name", Doc: "rename an instance", Params: []Param{
			inst, instUUID,
			{Name: "new_name", Type: TNEString, Required: true},
			{Name: "ip_check", Type: TBool, Default: true, Doc: "accepted; Corral does not ping the instance's IP"},
			{Name: "name_check", Type: TBool, Default: true, Doc: "accepted; Corral does not resolve the new name"},
		}},
		{ID: "OP_INSTANCE_SET_PARAMS", KeyPrm: "instance_name", Doc: "change an instance's parameters", Params: []Param{
			inst, instUUID, force,
			{Name: "beparams", Type: TDict, Default: map[string]any{}},
			{Name: "hvparams", Type: TDict, Default: map[string]any{}},
			{Name: "osparams", Type: TAny, Default: nil},
			{Name: "osparams_private", Type: TAny, Default: nil, Sensitive: Private},
			{Name: "os_name", Type: TMaybeString, Default: nil},
			{Name: "force_variant", Type: TBool, Default: false},
			{Name: "nics", Type: TList, Default: []any{}},
			{Name: "disks", Type: TList, Default: []any{}},
			{Name: "offline", Type: TAny, Default: nil},
			{Name: "runtime_mem", Type: TAny, Default: nil},
			{Name: "hotplug", Type: TBool, Default: false},
			{Name: "hotplug_if_possible", Type: TBool, Default: false},
			{Name: "ignore_ipolicy", Type: TBool, Default: false, Doc: "ignore the instance policy's bounds on memory, vcpus and spindle use"},
			{Name: "wait_for_sync", Type: TBool, Default: true},
			{Name: "conflicts_check", Type: TBool, Default: true},
			{Name: "disk_template", Type: TMaybeString, Default: nil, Honoured: []any{"file", "sharedfile", "rbd"}, Unsupported: "conversion to a disk template other than file, sharedfile or rbd"},
			{Name: "ext_params", Type: TDict, Default: map[string]any{}, Unsupported: "ext storage provider"},
			{Name: "file_driver", Type: TMaybeString, Default: nil, Unsupported: "disk template conversion"},
			{Name: "file_storage_dir", Type: TMaybeString, Default: nil, Unsupported: "disk template conversion"},
			{Name: "pnode", Type: TMaybeString, Default: nil, Doc: "new primary node of a stopped instance whose disks every node sees (sharedfile, rbd, diskless)"},
			{Name: "pnode_uuid", Type: TMaybeString, Default: nil, Doc: "new primary node uuid (internal)"},
			{Name: "remote_node", Type: TMaybeString, Default: nil, Unsupported: "conversion to a mirrored disk template"},
			{Name: "remote_node_uuid", Type: TMaybeString, Default: nil, Unsupported: "conversion to a mirrored disk template"},
			{Name: "iallocator", Type: TMaybeString, Default: nil, Unsupported: "disk template conversion"},
			{Name: "instance_communication", Type: TAny, Default: nil, Unsupported: "instance communication network", Honoured: []any{false}},
		}},
		{ID: "OP_INSTANCE_QUERY_DATA", Doc: "detailed instance information", Params: []Param{
			{Name: "instances", Type: TStringList, Default: []any{}},
			{Name: "static", Type: TBool, Default: false},
			{Name: "use_locking", Type: TBool, Default: false},
		}},
	}
}

// clusterSetParams are OP_CLUSTER_SET_PARAMS's parameters: null leaves a
// setting as it is.
func clusterSetParams() []Param {
	return []Param{
		{Name: "candidate_pool_size", Type: TMaybeInt, Default: nil},
		{Name: "max_running_jobs", Type: TMaybeInt, Default: nil},
		{Name: "max_tracked_jobs", Type: TMaybeInt, Default: nil},
		{Name: "job_queue_size", Type: TMaybeInt, Default: nil},
		{Name: "mac_prefix", Type: TMaybeString, Default: nil},
		{Name: "enabled_hypervisors", Type: TAny, Default: nil},
		{Name: "enabled_disk_templates", Type: TAny, Default: nil},
		{Name: "hvparams", Type: TAny, Default: nil},
		{Name: "beparams", Type: TAny, Default: nil},
		{Name: "nicparams", Type: TAny, Default: nil},
		{Name: "ndparams", Type: TAny, Default: nil},
		{Name: "osparams", Type: TAny, Default: nil},
		{Name: "hidden_os", Type: TAny, Default: nil},
		{Name: "blacklisted_os", Type: TAny, Default: nil},
		{Name: "file_storage_dir", Type: TMaybeString, Default: nil},
		{Name: "default_iallocator", Type: TMaybeString, Default: nil},
		{Name: "auto_failover", Type: TAny, Default: nil, Doc: "whether the watcher fails over the instances of a node declared offline (bool; Corral only, off by default)"},
		{Name: "uid_pool", Type: TAny, Default: nil, Doc: "replace the uid pool: list of [low, high] uid ranges"},
		{Name: "add_uids", Type: TAny, Default: nil, Doc: "uid ranges to add to the uid pool"},
		{Name: "remove_uids", Type: TAny, Default: nil, Doc: "uid ranges to remove from the uid pool (each exactly as in it)"},
		{Name: "ssh_key_type", Type: TMaybeString, Default: nil, Doc: "type of new node SSH keys (rsa, ecdsa, ed25519)"},
		{Name: "ssh_key_bits", Type: TMaybeInt, Default: nil, Doc: "size of new node SSH keys"},
		{Name: "modify_ssh_setup", Type: TAny, Default: nil, Doc: "whether Corral manages the nodes' SSH keys (bool)"},
		{Name: "master_capability_rapi_modifiable", Type: TAny, Default: nil, Doc: "whether RAPI may change master_capable; when false only master capable nodes are potential master candidates (bool)"},
		{Name: "force", Type: TBool, Default: false},
		{Name: "hv_state", Type: TAny, Default: nil, Doc: "static hypervisor state: {hypervisor: {cpu_node, cpu_total, mem_hv, mem_node, mem_total}}"},
		{Name: "disk_state", Type: TAny, Default: nil, Doc: "static disk state: {storage type: {unit: {disk_overhead, disk_reserved, disk_total}}}"},
		{Name: "vg_name", Type: TMaybeString, Default: nil, Unsupported: "LVM storage", Honoured: []any{""}},
		{Name: "os_hvp", Type: TAny, Default: nil, Doc: "per-OS hypervisor parameters: {os: {hypervisor: {param: value}}}"},
		{Name: "osparams_private_cluster", Type: TAny, Default: nil, Sensitive: Private, Doc: "private OS parameters per OS: {os: {param: value}}"},
		{Name: "diskparams", Type: TAny, Default: nil, Unsupported: "cluster-wide disk parameters (set them per node group)"},
		{Name: "maintain_node_health", Type: TAny, Default: nil, Unsupported: "node health maintenance", Honoured: []any{false}},
		{Name: "prealloc_wipe_disks", Type: TAny, Default: nil, Unsupported: "wiping of new disks", Honoured: []any{false}},
		{Name: "ipolicy", Type: TAny, Default: nil, Doc: "the cluster's instance policy: Ganeti's ipolicy keys (minmax, std, disk-templates, vcpu-ratio, spindle-ratio)"},
		{Name: "drbd_helper", Type: TMaybeString, Default: nil, Unsupported: "DRBD", Honoured: []any{""}},
		{Name: "default_iallocator_params", Type: TAny, Default: nil, Unsupported: "allocator parameters"},
		{Name: "master_netdev", Type: TMaybeString, Default: nil, Doc: "network device the cluster IP is put on (the IP moves to the new device)"},
		{Name: "master_netmask", Type: TMaybeInt, Default: nil, Doc: "prefix length of the cluster IP"},
		{Name: "cluster_ip", Type: TMaybeString, Default: nil, Doc: "the cluster's floating address, held by the node the master runs on; \"\" removes it (Corral only: Ganeti's follows the cluster name)"},
		{Name: "reserved_lvs", Type: TAny, Default: nil, Unsupported: "LVM storage"},
		{Name: "use_external_mip_script", Type: TAny, Default: nil, Unsupported: "master IP script", Honoured: []any{false}},
		{Name: "modify_etc_hosts", Type: TAny, Default: nil, Unsupported: "management of /etc/hosts", Honoured: []any{false}},
		{Name: "shared_file_storage_dir", Type: TMaybeString, Default: nil, Doc: "directory of the sharedfile template, mounted at this path on every node"},
		{Name: "gluster_storage_dir", Type: TMaybeString, Default: nil, Unsupported: "Gluster storage", Honoured: []any{""}},
		{Name: "install_image", Type: TMaybeString, Default: nil, Unsupported: "OS install helper image", Honoured: []any{""}},
		{Name: "instance_communication_network", Type: TMaybeString, Default: nil, Unsupported: "instance communication network", Honoured: []any{""}},
		{Name: "zeroing_image", Type: TMaybeString, Default: nil, Unsupported: "disk zeroing image", Honoured: []any{""}},
		{Name: "compression_tools", Type: TAny, Default: nil, Unsupported: "configurable compression tools"},
		{Name: "enabled_user_shutdown", Type: TAny, Default: nil, Unsupported: "user shutdown of instances", Honoured: []any{false}},
		{Name: "enabled_data_collectors", Type: TAny, Default: nil, Unsupported: "data collectors"},
		{Name: "data_collector_interval", Type: TAny, Default: nil, Unsupported: "data collectors"},
	}
}

// Default is the table of Defs.
func Default() *Table { return NewTable(Defs()) }
