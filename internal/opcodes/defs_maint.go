package opcodes

// Bounds of OP_CLUSTER_COMMAND and OP_CLUSTER_COPY_FILE.
const (
	DefaultCommandTimeout = 300
	MaxCommandTimeout     = 24 * 3600
	// MaxCopyFileBytes bounds a copied file: the job holding it is one
	// store record while the op runs.
	MaxCopyFileBytes = 512 << 10
)

// maintDefs are Ganeti's cluster maintenance opcodes: disk checks and
// repairs, configuration redistribution, the master IP and node power.
func maintDefs() []Def {
	nodes := Param{Name: "nodes", Type: TStringList, Default: []any{}, Doc: "names of the nodes (empty: every online node)"}
	group := Param{Name: "group_name", Type: TMaybeString, Default: nil, Doc: "only the nodes of this node group"}
	return []Def{
		{ID: "OP_CLUSTER_VERIFY_DISKS", Doc: "check the disks of every instance, one OP_GROUP_VERIFY_DISKS job per node group", Params: []Param{
			{Name: "group_name", Type: TMaybeString, Default: nil, Doc: "check only this node group"},
		}},
		{ID: "OP_GROUP_VERIFY_DISKS", KeyPrm: "group_name", Doc: "check the disks of the instances of a node group: missing or shorter than recorded", Params: []Param{
			{Name: "group_name", Type: TNEString, Required: true, Doc: "node group name"},
		}},
		{ID: "OP_CLUSTER_COMMAND", RootOnly: true, Doc: "run a shell command as root on nodes through their node daemons, the master last (Corral only; gnt-cluster command runs it over SSH)", Params: []Param{
			{Name: "command", Type: TNEString, Required: true, Doc: "the command, run by /bin/sh -c"},
			nodes, group,
			{Name: "timeout", Type: TNonNegInt, Default: float64(DefaultCommandTimeout), Max: MaxCommandTimeout, MaxDoc: "1 day", Doc: "seconds the command may run on each node before it is killed"},
		}},
		{ID: "OP_CLUSTER_COPY_FILE", RootOnly: true, Doc: "write a file, owned by root, on nodes through their node daemons, the master's node excluded (Corral only; gnt-cluster copyfile copies it over SSH)", Params: []Param{
			{Name: "path", Type: TNEString, Required: true, Doc: "absolute path of the file on the nodes"},
			{Name: "content", Type: TString, Required: true, Sensitive: Secret, Doc: "the file's content, base64; kept in the job only while the op runs"},
			{Name: "mode", Type: TNonNegInt, Default: float64(0o644), Max: 0o777, Doc: "the file's permission bits (rwx for owner, group, others)"},
			nodes, group,
		}},
		{ID: "OP_CLUSTER_REDIST_CONF", Doc: "write again what the nodes keep from the configuration: every node's SSH key files and, in Ganeti drop-in mode, the ssconf files", Params: nil},
		{ID: "OP_CLUSTER_ACTIVATE_MASTER_IP", Doc: "put the cluster IP (the floating master address) on the master network device of the node the master runs on", Params: nil},
		{ID: "OP_CLUSTER_DEACTIVATE_MASTER_IP", Doc: "take the cluster IP off the master network device of the node the master runs on", Params: nil},
		{ID: "OP_CLUSTER_RENAME", KeyPrm: "name", Doc: "rename the cluster", Params: []Param{
			{Name: "name", Type: TNEString, Required: true, Doc: "the cluster's new name"},
		}},
		{ID: "OP_NODE_POWERCYCLE", KeyPrm: "node_name", Doc: "power cycle a node through the bare-metal machine its ndparam machine names: a child OP_MACHINE_POWER job reboots it", Params: []Param{
			{Name: "node_name", Type: TNEString, Required: true, Doc: "node name"},
			{Name: "node_uuid", Type: TMaybeString, Default: nil, Doc: "node uuid: must match node_name"},
			{Name: "force", Type: TBool, Default: false, Doc: "power cycle the master's node too"},
		}},
		{ID: "OP_CLUSTER_REPAIR_DISK_SIZES", Doc: "record in the configuration the sizes the disks really have on their nodes", Params: []Param{
			{Name: "instances", Type: TStringList, Default: []any{}, Doc: "names of the instances to repair (empty: all)"},
		}},
	}
}
