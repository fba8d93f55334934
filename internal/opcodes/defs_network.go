package opcodes

// networkDefs are the network opcodes (OP_NETWORK_*), with Ganeti 3.0's
// parameters (src/Ganeti/OpCodes.hs). Optional values are null when not
// given; "none" clears a value on modify, as in Ganeti.
func networkDefs() []Def {
	name := Param{Name: "network_name", Type: TNEString, Required: true, Doc: "network name"}
	gateway := Param{Name: "gateway", Type: TMaybeString, Default: nil, Doc: "IPv4 gateway (an address in the network)"}
	network6 := Param{Name: "network6", Type: TMaybeString, Default: nil, Doc: "IPv6 subnet"}
	gateway6 := Param{Name: "gateway6", Type: TMaybeString, Default: nil, Doc: "IPv6 gateway"}
	macPrefix := Param{Name: "mac_prefix", Type: TMaybeString, Default: nil, Doc: "MAC prefix of the network's NICs (three octets), overriding the cluster's"}
	addReserved := Param{Name: "add_reserved_ips", Type: TAny, Default: nil, Doc: "IPv4 addresses to reserve externally (list)"}
	conflicts := Param{Name: "conflicts_check", Type: TBool, Default: true, Doc: "check for IP addresses in use that conflict with the network"}
	group := Param{Name: "group_name", Type: TNEString, Required: true, Doc: "node group name"}
	return []Def{
		{ID: "OP_NETWORK_ADD", KeyPrm: "network_name", Doc: "add a network with its IPv4 address pool", Params: []Param{name,
			{Name: "network", Type: TNEString, Required: true, Doc: "IPv4 subnet (CIDR), from /16 to /30"},
			gateway, network6, gateway6, macPrefix, addReserved, conflicts,
			{Name: "tags", Type: TStringList, Default: []any{}, Doc: "network tags"},
		}},
		{ID: "OP_NETWORK_REMOVE", KeyPrm: "network_name", Doc: "remove a network connected to no node group", Params: []Param{name,
			{Name: "force", Type: TBool, Default: false, Doc: "force the operation"},
		}},
		{ID: "OP_NETWORK_SET_PARAMS", KeyPrm: "network_name", Doc: "change a network's gateways, IPv6 subnet, MAC prefix or external reservations", Params: []Param{name,
			gateway, network6, gateway6, macPrefix, addReserved,
			{Name: "remove_reserved_ips", Type: TAny, Default: nil, Doc: "IPv4 addresses to release from the external reservations (list)"},
		}},
		{ID: "OP_NETWORK_CONNECT", KeyPrm: "network_name", Doc: "connect a network to a node group with a NIC mode, link and VLAN", Params: []Param{group, name,
			{Name: "network_mode", Type: TNEString, Required: true, Doc: "NIC mode of the group's NICs on the network: bridged | routed"},
			{Name: "network_link", Type: TNEString, Required: true, Doc: "NIC link (the bridge, or the routing table)"},
			{Name: "network_vlan", Type: TString, Default: "", Doc: "VLAN of the group's NICs on the network"},
			conflicts,
		}},
		{ID: "OP_NETWORK_DISCONNECT", KeyPrm: "network_name", Doc: "disconnect a network from a node group", Params: []Param{group, name}},
	}
}
