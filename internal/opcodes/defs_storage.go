package opcodes

// storageDefs are Ganeti's node storage unit opcodes (gnt-node
// list-storage, modify-storage, repair-storage). Corral's nodes report
// storage units of types file and sharedfile; the LVM operations are
// refused (cmdlib/node_storage.go).
func storageDefs() []Def {
	return []Def{
		{ID: "OP_NODE_QUERY_STORAGE", Doc: "list the storage units of nodes: size, used and free space of their file storage directories", Params: []Param{
			{Name: "output_fields", Type: TStringList, Required: true, Doc: "fields to return: node, type, name, size, used, free, allocatable"},
			{Name: "storage_type", Type: TMaybeString, Default: nil, Doc: "storage type: file or sharedfile (null: that of the first enabled disk template)"},
			{Name: "nodes", Type: TStringList, Default: []any{}, Doc: "node names (all nodes when empty)"},
			{Name: "name", Type: TMaybeString, Default: nil, Doc: "only the storage unit of this name"},
		}},
		{ID: "OP_NODE_MODIFY_STORAGE", KeyPrm: "node_name", Doc: "change a storage unit of a node (Ganeti: an LVM physical volume's allocatable flag; refused on Corral's nodes)", Params: []Param{
			{Name: "node_name", Type: TNEString, Required: true, Doc: "node name"},
			{Name: "node_uuid", Type: TMaybeString, Default: nil, Doc: "node uuid: must match node_name"},
			{Name: "storage_type", Type: TNEString, Required: true, Doc: "storage type"},
			{Name: "name", Type: TMaybeString, Default: nil, Doc: "storage unit name"},
			{Name: "changes", Type: TDict, Required: true, Doc: "fields to change and their new values"},
		}},
		{ID: "OP_REPAIR_NODE_STORAGE", KeyPrm: "node_name", Doc: "repair a storage unit of a node (Ganeti: an LVM volume group's consistency; refused on Corral's nodes)", Params: []Param{
			{Name: "node_name", Type: TNEString, Required: true, Doc: "node name"},
			{Name: "node_uuid", Type: TMaybeString, Default: nil, Doc: "node uuid: must match node_name"},
			{Name: "storage_type", Type: TNEString, Required: true, Doc: "storage type"},
			{Name: "name", Type: TMaybeString, Default: nil, Doc: "storage unit name"},
			{Name: "ignore_consistency", Type: TBool, Default: false, Doc: "go on when an instance of the node has faulty disks"},
		}},
	}
}
