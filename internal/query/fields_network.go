package query

import (
	"slices"
	"strings"

	"github.com/corral/corral/internal/config"
	"github.com/corral/corral/internal/ippool"
)

// NetworkRow is one network with what its fields need from the rest of
// the configuration: its pool (nil when its maps cannot be read), the
// node groups connected to it as Ganeti lists them ([name, mode, link,
// vlan]) and the names of the instances with a NIC on it.
type NetworkRow struct {
	Net       *config.Network
	Pool      *ippool.Pool
	Groups    [][]string
	Instances []string
}

// Networks is the network resource, with Ganeti 3.0's fields
// (src/Ganeti/Query/Network.hs).
func Networks() *Resource[*NetworkRow] {
	maybe := func(get func(*config.Network) string) func(*NetworkRow) (any, int) {
		return func(r *NetworkRow) (any, int) {
			if v := get(r.Net); v != "" {
				return ok(v)
			}
			return nil, RSUnavail
		}
	}
	pool := func(get func(*ippool.Pool) any) func(*NetworkRow) (any, int) {
		return func(r *NetworkRow) (any, int) {
			if r.Pool == nil {
				return nil, RSUnavail
			}
			return ok(get(r.Pool))
		}
	}
	return NewResource("network", []Field[*NetworkRow]{
		{Name: "name", Title: "Network", Kind: KText, Doc: "Name", Get: func(r *NetworkRow) (any, int) { return ok(r.Net.Name) }},
		{Name: "uuid", Title: "UUID", Kind: KText, Doc: "Network UUID", Get: func(r *NetworkRow) (any, int) { return ok(r.Net.UUID) }},
		{Name: "network", Title: "Subnet", Kind: KText, Doc: "IPv4 subnet", Get: func(r *NetworkRow) (any, int) { return ok(r.Net.Network) }},
		{Name: "gateway", Title: "Gateway", Kind: KOther, Doc: "IPv4 gateway", Get: maybe(func(n *config.Network) string { return n.Gateway })},
		{Name: "network6", Title: "IPv6Subnet", Kind: KOther, Doc: "IPv6 subnet", Get: maybe(func(n *config.Network) string { return n.Network6 })},
		{Name: "gateway6", Title: "IPv6Gateway", Kind: KOther, Doc: "IPv6 gateway", Get: maybe(func(n *config.Network) string { return n.Gateway6 })},
		{Name: "mac_prefix", Title: "MacPrefix", Kind: KOther, Doc: "MAC address prefix", Get: maybe(func(n *config.Network) string { return n.MACPrefix })},
		{Name: "free_count", Title: "FreeCount", Kind: KNumber, Doc: "Number of available addresses", Get: pool(func(p *ippool.Pool) any { return p.FreeCount() })},
		{Name: "reserved_count", Title: "ReservedCount", Kind: KNumber, Doc: "Number of reserved addresses", Get: pool(func(p *ippool.Pool) any { return p.ReservedCount() })},
		{Name: "map", Title: "Map", Kind: KText, Doc: "Actual mapping", Get: pool(func(p *ippool.Pool) any { return p.Map() })},
		{Name: "external_reservations", Title: "ExternalReservations", Kind: KText, Doc: "External reservations", Get: pool(func(p *ippool.Pool) any {
			return strings.Join(p.ExternalReservations(), ", ")
		})},
		{Name: "group_cnt", Title: "NodeGroups", Kind: KNumber, Doc: "Number of nodegroups", Get: func(r *NetworkRow) (any, int) { return ok(len(r.Groups)) }},
		{Name: "group_list", Title: "GroupList", Kind: KOther, Doc: "List of nodegroups (group name, NIC mode, NIC link)", Get: func(r *NetworkRow) (any, int) {
			if r.Groups == nil {
				return ok([][]string{})
			}
			return ok(r.Groups)
		}},
		{Name: "inst_cnt", Title: "Instances", Kind: KNumber, Doc: "Number of instances", Get: func(r *NetworkRow) (any, int) { return ok(len(r.Instances)) }},
		{Name: "inst_list", Title: "InstanceList", Kind: KOther, Doc: "List of instances", Get: func(r *NetworkRow) (any, int) { return ok(nonNil(r.Instances)) }},
		{Name: "ctime", Title: "CTime", Kind: KTimestamp, Doc: "Creation timestamp", Get: func(r *NetworkRow) (any, int) { return ok(r.Net.CTime) }},
		{Name: "mtime", Title: "MTime", Kind: KTimestamp, Doc: "Modification timestamp", Get: func(r *NetworkRow) (any, int) { return ok(r.Net.MTime) }},
		{Name: "serial_no", Title: "SerialNo", Kind: KNumber, Doc: "Network object serial number, incremented on each modification", Get: func(r *NetworkRow) (any, int) { return ok(r.Net.Serial) }},
		{Name: "tags", Title: "Tags", Kind: KOther, Doc: "Tags", Get: func(r *NetworkRow) (any, int) { return ok(tags(r.Net.Tags)) }},
	})
}

// NetworkRows builds the rows of networks from the configuration: the
// groups connected to each (in uuid order, as Ganeti's configuration map
// lists them) and the instances with a NIC on it (likewise).
func NetworkRows(nets []*config.Network, groups []*config.NodeGroup, insts []*config.Instance) []*NetworkRow {
	groups, insts = slices.Clone(groups), slices.Clone(insts)
	slices.SortFunc(groups, func(a, b *config.NodeGroup) int { return strings.Compare(a.UUID, b.UUID) })
	slices.SortFunc(insts, func(a, b *config.Instance) int { return strings.Compare(a.UUID, b.UUID) })
	rows := make([]*NetworkRow, 0, len(nets))
	for _, n := range nets {
		r := &NetworkRow{Net: n}
		if p, err := ippool.Open(n); err == nil {
			r.Pool = p
		}
		for _, g := range groups {
			if np, ok := g.Networks[n.UUID]; ok {
				r.Groups = append(r.Groups, []string{g.Name, np.Mode, np.Link, np.VLAN})
			}
		}
		for _, i := range insts {
			if slices.ContainsFunc(i.NICs, func(nic config.NIC) bool { return nic.Network == n.UUID }) {
				r.Instances = append(r.Instances, i.Name)
			}
		}
		rows = append(rows, r)
	}
	return rows
}
