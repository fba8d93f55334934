package query

import (
	"github.com/corral/corral/internal/config"
	"github.com/corral/corral/internal/locking"
)

// The resources beyond instances, nodes and groups: the cluster itself,
// OS definitions, exports, locks, networks and jobs, each with Ganeti
// 3.0's fields.

// ClusterRow is the cluster, the one row of the cluster resource.
type ClusterRow struct {
	Cluster         *config.Cluster
	MasterName      string
	Drained         bool     // the job queue takes no new jobs
	Now             float64  // to tell whether the watcher pause is over
	Architecture    []string // [word size, machine], as QueryClusterInfo
	SoftwareVersion string
	VCSVersion      string
	ProtocolVersion int
	OSAPIVersion    int
	ExportVersion   int
}

// Cluster is the cluster resource.
func Cluster() *Resource[*ClusterRow] {
	name := func(r *ClusterRow) (any, int) { return ok(r.Cluster.ClusterName) }
	return NewResource("cluster", []Field[*ClusterRow]{
		{Name: "name", Title: "Name", Kind: KText, Doc: "Cluster name", Get: name},
		{Name: "cluster_name", Title: "Name", Kind: KText, Doc: "Cluster name", Get: name},
		{Name: "master_node", Title: "Master", Kind: KText, Doc: "Master node name", Get: func(r *ClusterRow) (any, int) { return ok(r.MasterName) }},
		{Name: "architecture", Title: "ArchInfo", Kind: KOther, Doc: "Word size and machine of the master", Get: func(r *ClusterRow) (any, int) { return ok(r.Architecture) }},
		{Name: "config_version", Title: "ConfigVersion", Kind: KNumber, Doc: "Configuration format version", Get: func(r *ClusterRow) (any, int) { return ok(config.ConfigVersion) }},
		{Name: "drain_flag", Title: "QueueDrained", Kind: KBool, Doc: "Whether the job queue refuses new jobs", Get: func(r *ClusterRow) (any, int) { return ok(r.Drained) }},
		{Name: "export_version", Title: "ExportVersion", Kind: KNumber, Doc: "Export format version", Get: func(r *ClusterRow) (any, int) { return ok(r.ExportVersion) }},
		{Name: "os_api_version", Title: "OsApiVersion", Kind: KNumber, Doc: "Highest OS definition API version", Get: func(r *ClusterRow) (any, int) { return ok(r.OSAPIVersion) }},
		{Name: "protocol_version", Title: "ProtocolVersion", Kind: KNumber, Doc: "Protocol version", Get: func(r *ClusterRow) (any, int) { return ok(r.ProtocolVersion) }},
		{Name: "software_version", Title: "SoftwareVersion", Kind: KText, Doc: "Software version", Get: func(r *ClusterRow) (any, int) { return ok(r.SoftwareVersion) }},
		{Name: "vcs_version", Title: "VCSVersion", Kind: KText, Doc: "Source version", Get: func(r *ClusterRow) (any, int) { return ok(r.VCSVersion) }},
		{Name: "volume_group_name", Title: "VgName", Kind: KText, Doc: "LVM volume group (null: Corral uses no LVM)", Get: func(r *ClusterRow) (any, int) { return ok(nil) }},
		{Name: "watcher_pause", Title: "WatcherPause", Kind: KTimestamp, Doc: "Until when the watcher is paused; unavailable when it is not", Get: func(r *ClusterRow) (any, int) {
			if r.Cluster.WatcherPauseUntil <= r.Now {
				return nil, RSUnavail
			}
			return ok(r.Cluster.WatcherPauseUntil)
		}},
		{Name: "ctime", Title: "CTime", Kind: KTimestamp, Doc: "Creation time", Get: func(r *ClusterRow) (any, int) { return ok(r.Cluster.CTime) }},
		{Name: "mtime", Title: "MTime", Kind: KTimestamp, Doc: "Modification time", Get: func(r *ClusterRow) (any, int) { return ok(r.Cluster.MTime) }},
		{Name: "tags", Title: "Tags", Kind: KOther, Doc: "Tags", Get: func(r *ClusterRow) (any, int) { return ok(tags(r.Cluster.Tags)) }},
	})
}

// OSRow is one OS definition merged over the nodes that answered.
type OSRow struct {
	Name        string
	Valid       bool
	Hidden      bool
	Blacklisted bool
	Trusted     bool
	Variants    []string
	Parameters  [][2]string
	APIVersions []int
	// NodeStatus maps a node name to what it reported for this OS:
	// [[path, valid, error, variants, parameters, api_versions, trusted]]
	// (Ganeti 3.0's seven items), empty when the node lacks the OS.
	NodeStatus map[string][]any
	// OSParams are the cluster's parameters of this OS, keyed by the OS
	// name and by each OS+variant name that has some (the OS query's
	// osparams field keeps the OS+variant names only).
	OSParams map[string]config.Params
	// OSHVParams are the cluster's per-OS hypervisor parameters (os_hvp),
	// keyed as OSParams.
	OSHVParams map[string]map[string]config.Params
}

// OSes is the OS definition resource.
func OSes() *Resource[*OSRow] {
	return NewResource("os", []Field[*OSRow]{
		{Name: "name", Title: "Name", Kind: KText, Doc: "OS name", Get: func(r *OSRow) (any, int) { return ok(r.Name) }},
		{Name: "valid", Title: "Valid", Kind: KBool, Doc: "Whether every node has a valid definition", Get: func(r *OSRow) (any, int) { return ok(r.Valid) }},
		{Name: "hidden", Title: "Hidden", Kind: KBool, Doc: "Whether the OS is hidden", Get: func(r *OSRow) (any, int) { return ok(r.Hidden) }},
		{Name: "blacklisted", Title: "Blacklisted", Kind: KBool, Doc: "Whether the OS is blacklisted", Get: func(r *OSRow) (any, int) { return ok(r.Blacklisted) }},
		{Name: "trusted", Title: "Trusted", Kind: KBool, Doc: "Whether every node trusts the OS", Get: func(r *OSRow) (any, int) { return ok(r.Trusted) }},
		{Name: "variants", Title: "Variants", Kind: KOther, Doc: "Variants every node offers", Get: func(r *OSRow) (any, int) { return ok(nonNil(r.Variants)) }},
		{Name: "api_versions", Title: "ApiVersions", Kind: KOther, Doc: "API versions every node offers", Get: func(r *OSRow) (any, int) {
			if r.APIVersions == nil {
				return ok([]int{})
			}
			return ok(r.APIVersions)
		}},
		{Name: "parameters", Title: "Parameters", Kind: KOther, Doc: "Parameters [name, description] every node offers", Get: func(r *OSRow) (any, int) {
			if r.Parameters == nil {
				return ok([][2]string{})
			}
			return ok(r.Parameters)
		}},
		{Name: "node_status", Title: "NodeStatus", Kind: KOther, Doc: "What each node reported", Get: func(r *OSRow) (any, int) { return ok(r.NodeStatus) }},
		{Name: "os_hvp", Title: "OsHypervisorParams", Kind: KOther, Doc: "The cluster's hypervisor parameters of each OS+variant", Get: func(r *OSRow) (any, int) {
			if r.OSHVParams == nil {
				return ok(map[string]any{})
			}
			return ok(r.OSHVParams)
		}},
		{Name: "osparams", Title: "OsParameters", Kind: KOther, Doc: "The cluster's parameters of each OS+variant", Get: func(r *OSRow) (any, int) {
			if r.OSParams == nil {
				return ok(map[string]config.Params{})
			}
			return ok(r.OSParams)
		}},
	})
}

// ExportRow is one finished export on a node. Export is "" with Status
// set when the node could not be asked.
type ExportRow struct {
	Node   string
	Export string
	Status int
}

// Exports is the export resource.
func Exports() *Resource[*ExportRow] {
	return NewResource("export", []Field[*ExportRow]{
		{Name: "node", Title: "Node", Kind: KText, Doc: "Node name", Get: func(r *ExportRow) (any, int) { return ok(r.Node) }},
		{Name: "export", Title: "Export", Kind: KText, Doc: "Export name", Get: func(r *ExportRow) (any, int) {
			if r.Status != RSNormal {
				return nil, r.Status
			}
			return ok(r.Export)
		}},
	})
}

// Locks is the lock resource: the locks someone holds or waits for.
func Locks() *Resource[*locking.LockInfo] {
	return NewResource("lock", []Field[*locking.LockInfo]{
		{Name: "name", Title: "Name", Kind: KOther, Doc: "Lock name", Get: func(r *locking.LockInfo) (any, int) { return ok(r.Name) }},
		{Name: "mode", Title: "Mode", Kind: KOther, Doc: "Mode the lock is held in (exclusive, shared) or null", Get: func(r *locking.LockInfo) (any, int) {
			if r.Mode == "" {
				return ok(nil)
			}
			return ok(r.Mode)
		}},
		{Name: "owner", Title: "Owner", Kind: KOther, Doc: "Owners of the lock", Get: func(r *locking.LockInfo) (any, int) { return ok(nonNil(r.Owners)) }},
		{Name: "pending", Title: "Pending", Kind: KOther, Doc: "Waiters as [mode, [owner]]", Get: func(r *locking.LockInfo) (any, int) {
			out := make([]any, 0, len(r.Pending))
			for _, p := range r.Pending {
				out = append(out, []any{p.Mode, []string{p.Owner}})
			}
			return ok(out)
		}},
	})
}

// JobRow is one job's values by field name, as the job queue computed
// them; nil for a job the queue does not know.
type JobRow map[string]any

// Jobs is the job resource; the job queue computes the values.
func Jobs() *Resource[JobRow] {
	def := func(name, title string, kind Kind, doc string) Field[JobRow] {
		return Field[JobRow]{Name: name, Title: title, Kind: kind, Doc: doc, Get: func(r JobRow) (any, int) {
			v, found := r[name]
			if !found {
				return nil, RSUnavail
			}
			return ok(v)
		}}
	}
	return NewResource("job", []Field[JobRow]{
		def("id", "ID", KNumber, "Job id"),
		def("status", "Status", KText, "Job status"),
		def("priority", "Priority", KNumber, "Current priority (19 to -20)"),
		def("archived", "Archived", KBool, "Whether the job is archived"),
		def("ops", "OpCodes", KOther, "The opcodes"),
		def("opresult", "OpCode_result", KOther, "Each opcode's result"),
		def("opstatus", "OpCode_status", KOther, "Each opcode's status"),
		def("oplog", "OpCode_log", KOther, "Each opcode's log"),
		def("opstart", "OpCode_start", KOther, "When each opcode started (before locking)"),
		def("opexec", "OpCode_exec", KOther, "When each opcode began executing (after locking)"),
		def("opend", "OpCode_end", KOther, "When each opcode ended"),
		def("oppriority", "OpCode_prio", KOther, "Each opcode's priority"),
		def("summary", "Summary", KOther, "Each opcode's summary"),
		def("received_ts", "Received", KOther, "When the job was received, [seconds, microseconds]"),
		def("start_ts", "Start", KOther, "When the job started, [seconds, microseconds]"),
		def("end_ts", "End", KOther, "When the job ended, [seconds, microseconds]"),
	})
}

// AllDefs describes every field of the named resource (sorted by name, as
// QueryFields answers), and false for an unknown resource.
func AllDefs(resource string) ([]FieldDef, bool) {
	switch resource {
	case "instance":
		return Instances().Defs(nil), true
	case "node":
		return Nodes().Defs(nil), true
	case "group":
		return Groups().Defs(nil), true
	case "job":
		return Jobs().Defs(nil), true
	case "cluster":
		return Cluster().Defs(nil), true
	case "os":
		return OSes().Defs(nil), true
	case "export":
		return Exports().Defs(nil), true
	case "lock":
		return Locks().Defs(nil), true
	case "network":
		return Networks().Defs(nil), true
	case "filter":
		return FilterRules().Defs(nil), true
	}
	return nil, false
}
