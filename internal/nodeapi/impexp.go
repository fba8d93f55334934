package nodeapi

// Node RPCs of exports, imports and moves (Ganeti's names where Ganeti has
// the call).
const (
	X509CertCreate = "x509_cert_create"
	X509CertRemove = "x509_cert_remove"
	ImportStart    = "import_start"
	ExportStart    = "export_start"
	ImpExpStatus   = "impexp_status"
	ImpExpAbort    = "impexp_abort"
	ImpExpCleanup  = "impexp_cleanup"
	ExportList     = "export_list"
	ExportInfo     = "export_info"
	ExportRemove   = "export_remove"
	ExportFinalize = "finalize_export"
)

// X509CertCreateArgs asks a node for a short-lived transfer certificate.
// The node keeps the private key; only the certificate leaves it.
type X509CertCreateArgs struct {
	// Validity in seconds; the node caps it at 7 days.
	Validity int64 `json:"validity"`
}

// X509CertCreateReply names the key (the directory it lives in on the
// node, x509-<timestamp>-<random>) and carries the self-signed certificate.
type X509CertCreateReply struct {
	Name    string `json:"name"`
	CertPEM string `json:"cert"`
}

// X509CertRemoveArgs deletes a transfer key and its certificate. Removing
// a key that is already gone succeeds.
type X509CertRemoveArgs struct {
	Name string `json:"name"`
}

// Transfer I/O kinds: where an export reads and where an import writes.
const (
	// IODisk is the instance disk itself, raw.
	IODisk = "disk"
	// IOScript is the OS definition's export (stdout) or import (stdin)
	// script for the disk.
	IOScript = "script"
	// IOFile is a disk image in the node's export directory.
	IOFile = "file"
)

// ImpExpOptions are the transfer settings both ends must agree on.
type ImpExpOptions struct {
	// KeyName is this node's transfer key (from x509_cert_create): the
	// certificate this end presents.
	KeyName string `json:"key_name"`
	// PeerCertPEM is the one certificate the other end may present;
	// nothing else is accepted (no CA, no chain).
	PeerCertPEM string `json:"peer_cert"`
	// Compress is none, gzip, gzip-fast, gzip-slow or zstd.
	Compress string `json:"compress"`
	// Magic is the stream's handshake value (M=<magic> leads the data).
	Magic string `json:"magic"`
	// ConnectTimeout: an export's per-attempt connect timeout, an
	// import's wait for its one connection (seconds; 0: the default).
	ConnectTimeout int `json:"connect_timeout"`
	// ConnectRetries is how often an export retries its connection.
	ConnectRetries int `json:"connect_retries"`
}

// ImpExpIO says where data comes from or goes.
type ImpExpIO struct {
	Kind     string       `json:"kind"` // IODisk, IOScript or IOFile
	Instance InstanceSpec `json:"instance"`
	Disk     int          `json:"disk"` // disk index
	// ExportName and FileName locate an IOFile image: the export of
	// instance ExportName, file FileName in it. An import writes into the
	// export being built (<name>.new), an export reads a finished one.
	ExportName string `json:"export_name,omitempty"`
	FileName   string `json:"file_name,omitempty"`
	// SizeMiB is the expected size, for progress (0: unknown).
	SizeMiB int64 `json:"size,omitempty"`
	// DebugLevel is passed to OS scripts.
	DebugLevel int `json:"debug,omitempty"`
	// Snapshot, for an export's IODisk or IOScript source, names a copy
	// DiskSnapshot made of the disk: the export reads it instead of the
	// running instance's disk.
	Snapshot string `json:"snapshot,omitempty"`
}

// ImportStartArgs starts a listener that accepts one connection and writes
// what it receives to IO.
type ImportStartArgs struct {
	Options   ImpExpOptions `json:"options"`
	IO        ImpExpIO      `json:"io"`
	Component string        `json:"component"` // e.g. disk0, for names and logs
}

// ImportStartReply names the import and where it listens.
type ImportStartReply struct {
	Name string `json:"name"`
	Host string `json:"host"`
	Port int    `json:"port"`
}

// ExportStartArgs starts sending IO to an import listening at Host:Port.
type ExportStartArgs struct {
	Options   ImpExpOptions `json:"options"`
	IO        ImpExpIO      `json:"io"`
	Host      string        `json:"host"`
	Port      int           `json:"port"`
	Component string        `json:"component"`
}

// ExportStartReply names the export.
type ExportStartReply struct {
	Name string `json:"name"`
}

// ImpExpNames lists transfers by name (status, abort, cleanup); a status
// call with no names asks for every transfer on the node.
type ImpExpNames struct {
	Names []string `json:"names"`
}

// TransferStatus is one transfer's state, with Ganeti's status-file fields.
type TransferStatus struct {
	Name       string  `json:"name"`
	Known      bool    `json:"known"` // false: no such transfer on the node
	Kind       string  `json:"kind"`  // import or export
	Age        float64 `json:"age"`   // seconds since it started
	ListenPort int     `json:"listen_port,omitempty"`
	Connected  bool    `json:"connected"`
	Bytes      int64   `json:"bytes"`
	MiB        float64 `json:"progress_mbytes"`
	Throughput float64 `json:"progress_throughput"` // MiB/s
	ETA        float64 `json:"progress_eta"`        // seconds, 0 when unknown
	Percent    float64 `json:"progress_percent"`    // 0 when unknown
	Done       bool    `json:"done"`
	OK         bool    `json:"ok"` // with Done: finished without error
	Error      string  `json:"error_message,omitempty"`
	// Recent holds the last lines an OS script printed.
	Recent []string `json:"recent_output,omitempty"`
}

// ImpExpStatusReply lists the asked transfers in order.
type ImpExpStatusReply struct {
	Status []TransferStatus `json:"status"`
}

// ExportListReply names the finished exports on a node.
type ExportListReply struct {
	Names []string `json:"names"`
}

// ExportNameArgs names one export (info, remove).
type ExportNameArgs struct {
	Name string `json:"name"`
}

// ExportInfoReply is one export's metadata file (config.ini, Ganeti's
// format) and where the export lives.
type ExportInfoReply struct {
	Path   string `json:"path"`
	Config string `json:"config"`
}

// ExportFinalizeArgs writes the metadata of the export being built
// (<name>.new) and makes it the export of that instance, replacing an older
// one.
type ExportFinalizeArgs struct {
	Name   string `json:"name"`
	Config string `json:"config"`
}
