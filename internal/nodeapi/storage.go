package nodeapi

// StorageList reports a node's storage units of one type (Ganeti's
// storage_list), for OP_NODE_QUERY_STORAGE. Read-only.
const StorageList = "storage_list"

// Storage unit types a node reports (Ganeti's ST_FILE and ST_SHARED_FILE).
const (
	StorageTypeFile       = "file"
	StorageTypeSharedFile = "sharedfile"
)

// StorageListArgs names the type; Dir is the cluster's
// shared_file_storage_dir for sharedfile (a file unit is the node's own
// file storage directory). Used asks for the sizes of the files under
// the directory too, which walks it.
type StorageListArgs struct {
	Type string `json:"type"`
	Dir  string `json:"dir,omitempty"`
	Used bool   `json:"used,omitempty"`
}

// StorageUnit is one storage unit of a node: its name (the directory) and
// sizes in MiB.
type StorageUnit struct {
	Name    string `json:"name"`
	SizeMiB int64  `json:"size"`
	FreeMiB int64  `json:"free"`
	UsedMiB int64  `json:"used"`
}
