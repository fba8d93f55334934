package config

import "slices"

// Network is Ganeti's network: an IPv4 subnet with an address pool, an
// optional IPv6 subnet and MAC prefix, connected to node groups (see
// NodeGroup.Networks). The pool is kept as Ganeti keeps it: two strings of
// '0' and '1', one character per address of the subnet, for addresses
// used by instances (Reservations) and those reserved outside the cluster
// (ExtReservations: the network and broadcast addresses, the gateway, and
// whatever the operator reserved). Package ippool reads and changes them.
type Network struct {
	Meta
	Network         string `json:"network"`
	Gateway         string `json:"gateway,omitempty"`
	Network6        string `json:"network6,omitempty"`
	Gateway6        string `json:"gateway6,omitempty"`
	MACPrefix       string `json:"mac_prefix,omitempty"`
	Reservations    string `json:"reservations"`
	ExtReservations string `json:"ext_reservations"`
}

// Clone returns a copy for modification.
func (n *Network) Clone() *Network {
	c := *n
	c.Tags = slices.Clone(n.Tags)
	return &c
}

// NetParams are the NIC parameters a node group gives the NICs on one of
// its networks (Ganeti's nicparams: mode, link, vlan).
type NetParams struct {
	Mode string `json:"mode"`
	Link string `json:"link"`
	VLAN string `json:"vlan"`
}
