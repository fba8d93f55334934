package query

import (
	"fmt"
	"strconv"

	"github.com/corral/corral/internal/config"
	"github.com/corral/corral/internal/hypervisor"
)

// Ganeti's MAX_DISKS and MAX_NICS: the per-index fields disk.size/N and
// nic.mac/N exist for every index below these.
const (
	maxDisks = 16
	maxNICs  = 8
)

// Instances is the instance resource: every field of Ganeti 3.0's instance
// query, with the same names, titles and kinds.
func Instances() *Resource[*InstanceRow] {
	var fields []Field[*InstanceRow]
	fields = append(fields, instanceConfigFields()...)
	fields = append(fields, instanceParamFields()...)
	fields = append(fields, instanceDiskFields()...)
	fields = append(fields, instanceNICFields()...)
	fields = append(fields, instanceLiveFields()...)
	return NewResource("instance", withAliases(fields, instanceAliases))
}

// instanceAliases are Ganeti's older names for instance fields.
var instanceAliases = [][2]string{
	{"vcpus", "be/vcpus"}, {"be/memory", "be/maxmem"}, {"sda_size", "disk.size/0"}, {"sdb_size", "disk.size/1"},
	{"ip", "nic.ip/0"}, {"mac", "nic.mac/0"}, {"bridge", "nic.bridge/0"}, {"nic_mode", "nic.mode/0"},
	{"nic_link", "nic.link/0"}, {"nic_network", "nic.network/0"},
}

// withAliases adds each alias as a copy of its target under the new name.
func withAliases[T any](fields []Field[T], aliases [][2]string) []Field[T] {
	byName := make(map[string]Field[T], len(fields))
	for _, f := range fields {
		byName[f.Name] = f
	}
	for _, a := range aliases {
		f, ok := byName[a[1]]
		if !ok {
			panic("query: alias " + a[0] + " of unknown field " + a[1])
		}
		f.Name = a[0]
		fields = append(fields, f)
	}
	return fields
}

func (r *InstanceRow) pnodeField(f func(*config.Node) any) (any, int) {
	if r.PNode == nil {
		return nil, RSUnavail
	}
	return ok(f(r.PNode))
}

func instanceConfigFields() []Field[*InstanceRow] {
	return []Field[*InstanceRow]{
		{Name: "name", Title: "Instance", Kind: KText, Doc: "Instance name", Get: func(r *InstanceRow) (any, int) { return ok(r.Inst.Name) }},
		{Name: "uuid", Title: "UUID", Kind: KText, Doc: "Instance UUID", Get: func(r *InstanceRow) (any, int) { return ok(r.Inst.UUID) }},
		{Name: "os", Title: "OS", Kind: KText, Doc: "Operating system", Get: func(r *InstanceRow) (any, int) { return ok(r.Inst.OS) }},
		{Name: "hypervisor", Title: "Hypervisor", Kind: KText, Doc: "Hypervisor name", Get: func(r *InstanceRow) (any, int) { return ok(r.Inst.Hypervisor) }},
		{Name: "admin_state", Title: "InstanceState", Kind: KText, Doc: "Desired state (up, down, offline)", Get: func(r *InstanceRow) (any, int) { return ok(r.Inst.AdminState) }},
		{Name: "admin_state_source", Title: "InstanceStateSource", Kind: KText, Doc: "Who set the desired state; always admin, Corral has no user shutdown", Get: func(r *InstanceRow) (any, int) { return ok("admin") }},
		{Name: "admin_up", Title: "Autostart", Kind: KBool, Doc: "Whether the instance should be up", Get: func(r *InstanceRow) (any, int) { return ok(r.Inst.AdminState == config.AdminUp) }},
		{Name: "disks_active", Title: "DisksActive", Kind: KBool, Doc: "Whether the disks are in use; Corral's disks are active while the instance is meant to run", Get: func(r *InstanceRow) (any, int) {
			return ok(r.Inst.AdminState == config.AdminUp)
		}},
		{Name: "forthcoming", Title: "Forthcoming", Kind: KBool, Doc: "Whether the instance is only reserved; Corral does not reserve instances", Get: func(r *InstanceRow) (any, int) { return ok(false) }},
		{Name: "pnode", Title: "Primary_node", Kind: KText, Doc: "Primary node", Get: func(r *InstanceRow) (any, int) {
			return r.pnodeField(func(n *config.Node) any { return n.Name })
		}},
		{Name: "pnode.group", Title: "PrimaryNodeGroup", Kind: KText, Doc: "Primary node's group", Get: func(r *InstanceRow) (any, int) {
			if r.PGroup == nil {
				return nil, RSUnavail
			}
			return ok(r.PGroup.Name)
		}},
		{Name: "pnode.group.uuid", Title: "PrimaryNodeGroupUUID", Kind: KText, Doc: "Primary node's group UUID", Get: func(r *InstanceRow) (any, int) {
			return r.pnodeField(func(n *config.Node) any { return n.Group })
		}},
		{Name: "snodes", Title: "Secondary_Nodes", Kind: KOther, Doc: "Secondary nodes (Corral's disk templates have none)", Get: func(r *InstanceRow) (any, int) { return ok([]string{}) }},
		{Name: "snodes.group", Title: "SecondaryNodesGroups", Kind: KOther, Doc: "Secondary nodes' groups", Get: func(r *InstanceRow) (any, int) { return ok([]string{}) }},
		{Name: "snodes.group.uuid", Title: "SecondaryNodesGroupsUUID", Kind: KOther, Doc: "Secondary nodes' group UUIDs", Get: func(r *InstanceRow) (any, int) { return ok([]string{}) }},
		{Name: "disk_template", Title: "Disk_template", Kind: KText, Doc: "Disk template", Get: func(r *InstanceRow) (any, int) { return ok(r.Inst.DiskTemplate) }},
		{Name: "network_port", Title: "Network_port", Kind: KOther, Doc: "Console port", Get: func(r *InstanceRow) (any, int) {
			if r.Inst.NetworkPort == 0 {
				return nil, RSNormal
			}
			return ok(r.Inst.NetworkPort)
		}},
		{Name: "ctime", Title: "CTime", Kind: KTimestamp, Doc: "Creation time", Get: func(r *InstanceRow) (any, int) { return ok(r.Inst.CTime) }},
		{Name: "mtime", Title: "MTime", Kind: KTimestamp, Doc: "Modification time", Get: func(r *InstanceRow) (any, int) { return ok(r.Inst.MTime) }},
		{Name: "serial_no", Title: "SerialNo", Kind: KNumber, Doc: "Serial number", Get: func(r *InstanceRow) (any, int) { return ok(r.Inst.Serial) }},
		{Name: "tags", Title: "Tags", Kind: KOther, Doc: "Tags", Get: func(r *InstanceRow) (any, int) { return ok(tags(r.Inst.Tags)) }},
		{Name: "rescue_state", Title: "Rescue", Kind: KText, Doc: "Where the instance's rescue stands: rescuing, rescue or unrescuing; null when it is not in rescue (Corral only)", Get: func(r *InstanceRow) (any, int) {
			if r.RescueState == "" {
				return ok(nil)
			}
			return ok(r.RescueState)
		}},
	}
}

func (r *InstanceRow) filledBE() config.Params {
	return config.Fill(r.Cluster.BEParams, r.Inst.BEParams)
}

func (r *InstanceRow) filledHV() config.Params {
	return config.InstanceHVParams(r.Cluster, r.Inst)
}

func instanceParamFields() []Field[*InstanceRow] {
	fields := []Field[*InstanceRow]{
		{Name: "beparams", Title: "BackendParameters", Kind: KOther, Doc: "Backend parameters (filled)", Get: func(r *InstanceRow) (any, int) {
			be := r.filledBE()
			be["memory"] = be["maxmem"] // Ganeti's compatibility alias
			return ok(be)
		}},
		{Name: "hvparams", Title: "HypervisorParameters", Kind: KOther, Doc: "Hypervisor parameters (filled)", Get: func(r *InstanceRow) (any, int) { return ok(r.filledHV()) }},
		{Name: "osparams", Title: "OpSysParameters", Kind: KOther, Doc: "OS parameters (filled)", Get: func(r *InstanceRow) (any, int) {
			return ok(config.InstanceOSParams(r.Cluster, r.Inst))
		}},
		{Name: "custom_beparams", Title: "CustomBackendParameters", Kind: KOther, Doc: "Custom backend parameters", Get: func(r *InstanceRow) (any, int) { return ok(emptyIfNil(r.Inst.BEParams)) }},
		{Name: "custom_hvparams", Title: "CustomHypervisorParameters", Kind: KOther, Doc: "Custom hypervisor parameters", Get: func(r *InstanceRow) (any, int) { return ok(emptyIfNil(r.Inst.HVParams)) }},
		{Name: "custom_osparams", Title: "CustomOpSysParameters", Kind: KOther, Doc: "Custom OS parameters", Get: func(r *InstanceRow) (any, int) { return ok(emptyIfNil(r.Inst.OSParams)) }},
		{Name: "custom_nicparams", Title: "CustomNicParameters", Kind: KOther, Doc: "Custom NIC parameters", Get: func(r *InstanceRow) (any, int) {
			out := make([]any, 0, len(r.Inst.NICs))
			for _, n := range r.Inst.NICs {
				out = append(out, map[string]any{"mode": n.Mode, "link": n.Link})
			}
			return ok(out)
		}},
	}
	for _, p := range beParamFields {
		fields = append(fields, Field[*InstanceRow]{Name: "be/" + p.Name, Title: p.Title, Kind: p.Kind,
			Doc: fmt.Sprintf("Backend parameter %s (filled)", p.Name), Get: func(r *InstanceRow) (any, int) {
				return typedParam(r.filledBE(), p)
			}})
	}
	for _, p := range hvParamFields {
		fields = append(fields, Field[*InstanceRow]{Name: "hv/" + p.Name, Title: p.Title, Kind: p.Kind,
			Doc: fmt.Sprintf("Hypervisor parameter %s (filled); unavailable when the hypervisor has no such parameter", p.Name),
			Get: func(r *InstanceRow) (any, int) { return typedParam(r.filledHV(), p) }})
	}
	return fields
}

// paramValue is one parameter of a filled dict, unavailable when absent.
func paramValue(p config.Params, name string) (any, int) {
	v, found := p[name]
	if !found {
		return nil, RSUnavail
	}
	return ok(v)
}

// typedParam is a parameter with the JSON type of its field's kind:
// Corral keeps hypervisor parameters as text, Ganeti answers numbers and
// booleans. Text that does not parse is passed on as it is.
func typedParam(p config.Params, f paramField) (any, int) {
	v, st := paramValue(p, f.Name)
	s, isText := v.(string)
	if st != RSNormal || !isText {
		return v, st
	}
	switch f.Kind {
	case KNumber, KUnit, KFloat:
		if n, err := strconv.ParseFloat(s, 64); err == nil {
			return ok(n)
		}
		if s == "" {
			return ok(nil)
		}
	case KBool:
		if b, err := hypervisor.ParseBool(s); err == nil {
			return ok(b)
		}
	}
	return ok(v)
}

// indexed is the per-index field NAME/i: unavailable past the list's end.
func indexed[T any](name, title string, kind Kind, doc string, max int, count func(T) int, get func(T, int) any) []Field[T] {
	return indexedStatus(name, title, kind, doc, max, count, func(o T, i int) (any, int) { return ok(get(o, i)) })
}

// indexedStatus is indexed for values that may themselves be unavailable.
func indexedStatus[T any](name, title string, kind Kind, doc string, max int, count func(T) int, get func(T, int) (any, int)) []Field[T] {
	out := make([]Field[T], 0, max)
	for i := range max {
		out = append(out, Field[T]{Name: fmt.Sprintf("%s/%d", name, i), Title: fmt.Sprintf("%s/%d", title, i), Kind: kind,
			Doc: fmt.Sprintf("%s of item %d", doc, i), Get: func(o T) (any, int) {
				if i >= count(o) {
					return nil, RSUnavail
				}
				return get(o, i)
			}})
	}
	return out
}

func nilIfEmpty(s string) any {
	if s == "" {
		return nil
	}
	return s
}

func instanceDiskFields() []Field[*InstanceRow] {
	disks := func(r *InstanceRow) int { return len(r.Inst.Disks) }
	fields := []Field[*InstanceRow]{
		{Name: "disk.count", Title: "Disks", Kind: KNumber, Doc: "Number of disks", Get: func(r *InstanceRow) (any, int) { return ok(len(r.Inst.Disks)) }},
		{Name: "disk.sizes", Title: "Disk_sizes", Kind: KOther, Doc: "Disk sizes (MiB)", Get: func(r *InstanceRow) (any, int) {
			out := make([]int64, 0, len(r.Inst.Disks))
			for _, d := range r.Inst.Disks {
				out = append(out, d.SizeMiB)
			}
			return ok(out)
		}},
		{Name: "disk.spindles", Title: "Disk_spindles", Kind: KOther, Doc: "Disk spindles (null: no exclusive storage)", Get: func(r *InstanceRow) (any, int) {
			return ok(make([]any, len(r.Inst.Disks)))
		}},
		{Name: "disk_usage", Title: "DiskUsage", Kind: KUnit, Doc: "Disk space used (MiB)", Get: func(r *InstanceRow) (any, int) {
			var s int64
			for _, d := range r.Inst.Disks {
				s += d.SizeMiB
			}
			return ok(s)
		}},
		{Name: "disk.uuids", Title: "Disk_UUIDs", Kind: KOther, Doc: "Disk UUIDs", Get: func(r *InstanceRow) (any, int) {
			return ok(strs(r.Inst.Disks, func(d config.Disk) string { return d.UUID }))
		}},
		{Name: "disk.names", Title: "Disk_names", Kind: KOther, Doc: "Disk names", Get: func(r *InstanceRow) (any, int) {
			out := make([]any, len(r.Inst.Disks))
			for i, d := range r.Inst.Disks {
				out[i] = nilIfEmpty(d.Name)
			}
			return ok(out)
		}},
	}
	fields = append(fields, indexed("disk.size", "Disk", KUnit, "Disk size (MiB)", maxDisks, disks,
		func(r *InstanceRow, i int) any { return r.Inst.Disks[i].SizeMiB })...)
	// Corral's disks have no spindles: unavailable, as Ganeti's without.
	fields = append(fields, indexedStatus("disk.spindles", "DiskSpindles", KNumber, "Disk spindles", maxDisks, disks,
		func(r *InstanceRow, i int) (any, int) { return nil, RSUnavail })...)
	fields = append(fields, indexed("disk.name", "DiskName", KText, "Disk name", maxDisks, disks,
		func(r *InstanceRow, i int) any { return nilIfEmpty(r.Inst.Disks[i].Name) })...)
	fields = append(fields, indexed("disk.uuid", "DiskUUID", KText, "Disk UUID", maxDisks, disks,
		func(r *InstanceRow, i int) any { return r.Inst.Disks[i].UUID })...)
	return fields
}

// nicView is one NIC with its parameters filled from the cluster's.
type nicView struct {
	config.NIC
	vlan        string
	networkName string
}

func (r *InstanceRow) nics() []nicView {
	out := make([]nicView, len(r.Inst.NICs))
	for i, n := range r.Inst.NICs {
		out[i].NIC = n
		if out[i].Mode == "" {
			out[i].Mode, _ = r.Cluster.NICParams["mode"].(string)
		}
		if out[i].Link == "" {
			out[i].Link, _ = r.Cluster.NICParams["link"].(string)
		}
		out[i].vlan, _ = r.Cluster.NICParams["vlan"].(string)
		if n.Network != "" {
			out[i].vlan = n.VLAN
			out[i].networkName = r.NetworkNames[n.Network]
		}
	}
	return out
}

func (n nicView) bridge() any {
	if n.Mode == "bridged" {
		return n.Link
	}
	return nil
}

// nicList is one attribute of every NIC.
func nicList(f func(nicView) any) func(*InstanceRow) (any, int) {
	return func(r *InstanceRow) (any, int) {
		nics := r.nics()
		out := make([]any, len(nics))
		for i, n := range nics {
			out[i] = f(n)
		}
		return ok(out)
	}
}

// nicAt is one attribute of NIC i (unavailable past the last NIC).
func nicAt(name, title, doc string, f func(nicView) any) []Field[*InstanceRow] {
	return indexed(name, title, KText, doc, maxNICs, func(r *InstanceRow) int { return len(r.Inst.NICs) },
		func(r *InstanceRow, i int) any { return f(r.nics()[i]) })
}

func instanceNICFields() []Field[*InstanceRow] {
	network := func(n nicView) any { return nilIfEmpty(n.Network) }
	networkName := func(n nicView) any { return nilIfEmpty(n.networkName) }
	fields := []Field[*InstanceRow]{
		{Name: "nic.count", Title: "NICs", Kind: KNumber, Doc: "Number of NICs", Get: func(r *InstanceRow) (any, int) { return ok(len(r.Inst.NICs)) }},
		{Name: "nic.macs", Title: "NIC_MACs", Kind: KOther, Doc: "NIC MAC addresses", Get: nicList(func(n nicView) any { return n.MAC })},
		{Name: "nic.ips", Title: "NIC_IPs", Kind: KOther, Doc: "NIC IP addresses", Get: nicList(func(n nicView) any { return nilIfEmpty(n.IP) })},
		{Name: "nic.modes", Title: "NIC_modes", Kind: KOther, Doc: "NIC modes", Get: nicList(func(n nicView) any { return n.Mode })},
		{Name: "nic.links", Title: "NIC_links", Kind: KOther, Doc: "NIC links", Get: nicList(func(n nicView) any { return n.Link })},
		{Name: "nic.vlans", Title: "NIC_VLANs", Kind: KOther, Doc: "NIC VLANs", Get: nicList(func(n nicView) any { return n.vlan })},
		{Name: "nic.bridges", Title: "NIC_bridges", Kind: KOther, Doc: "NIC bridges (bridged mode)", Get: nicList(nicView.bridge)},
		{Name: "nic.uuids", Title: "NIC_UUIDs", Kind: KOther, Doc: "NIC UUIDs", Get: nicList(func(n nicView) any { return n.UUID })},
		{Name: "nic.names", Title: "NIC_Names", Kind: KOther, Doc: "NIC names", Get: nicList(func(n nicView) any { return nilIfEmpty(n.Name) })},
		{Name: "nic.networks", Title: "NIC_networks", Kind: KOther, Doc: "NIC networks (uuids)", Get: nicList(network)},
		{Name: "nic.networks.names", Title: "NIC_networks_names", Kind: KOther, Doc: "NIC network names", Get: nicList(networkName)},
	}
	fields = append(fields, nicAt("nic.mac", "NicMAC", "NIC MAC address", func(n nicView) any { return n.MAC })...)
	fields = append(fields, nicAt("nic.ip", "NicIP", "NIC IP address", func(n nicView) any { return nilIfEmpty(n.IP) })...)
	fields = append(fields, nicAt("nic.mode", "NicMode", "NIC mode", func(n nicView) any { return n.Mode })...)
	fields = append(fields, nicAt("nic.link", "NicLink", "NIC link", func(n nicView) any { return n.Link })...)
	fields = append(fields, nicAt("nic.vlan", "NicVLAN", "NIC VLAN", func(n nicView) any { return n.vlan })...)
	fields = append(fields, nicAt("nic.bridge", "NicBridge", "NIC bridge", nicView.bridge)...)
	fields = append(fields, nicAt("nic.uuid", "NicUUID", "NIC UUID", func(n nicView) any { return n.UUID })...)
	fields = append(fields, nicAt("nic.name", "NicName", "NIC name", func(n nicView) any { return nilIfEmpty(n.Name) })...)
	fields = append(fields, nicAt("nic.network", "NicNetwork", "NIC network", network)...)
	fields = append(fields, nicAt("nic.network.name", "NicNetworkName", "NIC network name", networkName)...)
	return fields
}

// running is the live value f, or why there is none: the primary node's
// state when it did not answer, unavailable when the instance is not running.
func (r *InstanceRow) running(f func() any) (any, int) {
	if r.LiveState != RSNormal {
		return r.live()
	}
	if r.Live == nil {
		return nil, RSUnavail
	}
	return ok(f())
}

func instanceLiveFields() []Field[*InstanceRow] {
	return []Field[*InstanceRow]{
		{Name: "oper_state", Title: "Running", Kind: KBool, Live: true, Doc: "Whether the instance runs", Get: func(r *InstanceRow) (any, int) {
			if r.LiveState != RSNormal {
				return r.live()
			}
			return ok(r.Live != nil)
		}},
		{Name: "oper_ram", Title: "Memory", Kind: KUnit, Live: true, Doc: "Memory in use (MiB)", Get: func(r *InstanceRow) (any, int) {
			return r.running(func() any { return r.Live.MemoryMiB })
		}},
		{Name: "oper_vcpus", Title: "VCPUs", Kind: KNumber, Live: true, Doc: "CPUs in use", Get: func(r *InstanceRow) (any, int) {
			return r.running(func() any { return r.Live.VCPUs })
		}},
		{Name: "status", Title: "Status", Kind: KText, Live: true, Doc: "Combined admin and runtime status", Get: func(r *InstanceRow) (any, int) { return r.Status() }},
		{Name: "console", Title: "Console", Kind: KOther, Live: true, Doc: "How to reach the console; unavailable, Corral hands consoles out per request (corral instance console)", Get: func(r *InstanceRow) (any, int) {
			if r.LiveState != RSNormal {
				return r.live()
			}
			return nil, RSUnavail
		}},
	}
}
