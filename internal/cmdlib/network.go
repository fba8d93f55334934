package cmdlib

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/corral/corral/internal/config"
	"github.com/corral/corral/internal/ecode"
	"github.com/corral/corral/internal/engine"
	"github.com/corral/corral/internal/ippool"
	"github.com/corral/corral/internal/locking"
	"github.com/corral/corral/internal/opcodes"
)

// networkUnits are the units of the network opcodes (Ganeti's
// lib/cmdlib/network.py): networks with IPv4 address pools, connected to
// node groups with the NIC mode, link and VLAN their instances' NICs get.
func (p *Processor) networkUnits() []engine.Op {
	return []engine.Op{
		p.unit("OP_NETWORK_ADD", func() LU { return &networkAddLU{} }),
		p.unit("OP_NETWORK_REMOVE", func() LU { return &networkRemoveLU{} }),
		p.unit("OP_NETWORK_SET_PARAMS", func() LU { return &networkSetParamsLU{} }),
		p.unit("OP_NETWORK_CONNECT", func() LU { return &networkConnectLU{} }),
		p.unit("OP_NETWORK_DISCONNECT", func() LU { return &networkDisconnectLU{} }),
	}
}

// valueNone clears an optional value on modify (Ganeti's VALUE_NONE).
const valueNone = "none"

func netLock(mode locking.Mode, uuids ...string) locking.Request {
	return locking.Request{Level: locking.LevelNetwork, Names: uuids, Mode: mode}
}

// networkNameRE keeps names usable as RAPI path segments; Ganeti only asks
// for a non-empty string.
var networkNameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)

var netMACPrefixRE = regexp.MustCompile(`^(?i)[0-9a-f]{2}:[0-9a-f]{2}:[0-9a-f]{2}$`)

// normalizeMACPrefix is Ganeti's three-octet prefix check, lower-cased.
func normalizeMACPrefix(s string) (string, error) {
	if !netMACPrefixRE.MatchString(s) {
		return "", ecode.Errorf(ecode.Inval, "Invalid MAC address prefix '%s'", s)
	}
	return strings.ToLower(s), nil
}

// addrList reads an optional list of IPv4 addresses.
func addrList(op *opcodes.Op, key string) ([]string, error) {
	raw, ok := op.Params[key].([]any)
	if !ok {
		if op.Params[key] != nil {
			return nil, ecode.Errorf(ecode.Inval, "%s must be a list of IPv4 addresses", key)
		}
		return nil, nil
	}
	out := make([]string, 0, len(raw))
	for _, v := range raw {
		s, _ := v.(string)
		if _, err := ippool.ParseAddr4(s); err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}

// networkOf resolves an op's network_name for its Locks (the uuid when
// known, else the name, which Prereq then reports as unknown).
func networkOf(p *Processor, op *opcodes.Op) string {
	if n, ok := p.Cfg.Network(op.Str("network_name")); ok {
		return n.UUID
	}
	return op.Str("network_name")
}

// checkNetworkAddrs validates the optional gateway and IPv6 values of n.
func checkNetworkAddrs(n *config.Network) error {
	prefix, err := ippool.ParseNetwork(n.Network)
	if err != nil {
		return err
	}
	if n.Gateway != "" {
		gw, err := ippool.ParseAddr4(n.Gateway)
		if err != nil {
			return err
		}
		if !prefix.Contains(gw) {
			return ecode.Errorf(ecode.Inval, "Gateway %s is not inside network %s", n.Gateway, n.Network)
		}
	}
	if n.Network6 != "" {
		if _, err := ippool.ParseNetwork6(n.Network6); err != nil {
			return err
		}
	}
	if n.Gateway6 != "" {
		if _, err := ippool.ParseAddr6(n.Gateway6); err != nil {
			return err
		}
	}
	return nil
}

type networkAddLU struct {
	Net   *config.Network `json:"network"`
	Notes []string        `json:"notes,omitempty"` // logged by the step
}

// Adding takes no network lock: the store's name index refuses a second
// network of the same name.
func (lu *networkAddLU) Locks(p *Processor, op *opcodes.Op) []locking.Request {
	return []locking.Request{bgl(locking.Shared)}
}

func (lu *networkAddLU) Prereq(ctx context.Context, p *Processor, op *opcodes.Op) error {
	name := op.Str("network_name")
	if !networkNameRE.MatchString(name) {
		return ecode.Errorf(ecode.Inval, "Invalid network name '%s': use letters, digits, '.', '_' and '-' (at most 128, starting with a letter or digit)", name)
	}
	if n, ok := p.Cfg.Network(name); ok {
		return ecode.Errorf(ecode.Exists, "Desired network name '%s' already exists as a network (UUID: %s)", name, n.UUID)
	}
	n := &config.Network{Meta: config.Meta{UUID: config.NewUUID(), Name: name}, Network: op.Str("network"),
		Gateway: op.Str("gateway"), Network6: op.Str("network6"), Gateway6: op.Str("gateway6")}
	if mp := op.Str("mac_prefix"); mp != "" {
		var err error
		if n.MACPrefix, err = normalizeMACPrefix(mp); err != nil {
			return err
		}
	}
	if err := checkNetworkAddrs(n); err != nil {
		return err
	}
	for _, t := range op.Strings("tags") {
		if err := opcodes.ValidateTag(t); err != nil {
			return err
		}
	}
	n.Tags = sortedTags(op.Strings("tags"))
	reserved, err := addrList(op, "add_reserved_ips")
	if err != nil {
		return err
	}
	pool, err := ippool.Initialize(n)
	if err != nil {
		return ecode.ExecErrorf("Cannot create IP address pool for network '%s': %s", name, err)
	}
	if op.Bool("conflicts_check") {
		// The nodes' addresses inside the network are not for instances.
		for _, node := range p.Cfg.Nodes() {
			for _, ip := range slices.Compact([]string{node.PrimaryIP, node.SecondaryIP}) {
				if !pool.Contains(ip) {
					continue
				}
				if err := pool.Reserve(ip, true); err != nil {
					lu.Notes = append(lu.Notes, fmt.Sprintf("Warning: Cannot reserve IP address '%s' of node '%s': %s", ip, node.Name, err))
				} else {
					lu.Notes = append(lu.Notes, fmt.Sprintf("Reserved IP address of node '%s' (%s)", node.Name, ip))
				}
			}
		}
	}
	for _, ip := range reserved {
		if err := pool.Reserve(ip, true); err != nil {
			return ecode.ExecErrorf("Cannot reserve IP address '%s': %s", ip, err)
		}
	}
	pool.Update(n)
	lu.Net = n
	return nil
}

func (lu *networkAddLU) Steps() []Step {
	return []Step{{"add", func(ctx context.Context, s *StepCtx) error {
		for _, m := range lu.Notes {
			s.Logf(ctx, "%s", m)
		}
		s.Tx().PutNetwork(lu.Net.Clone())
		return nil
	}}}
}

func (lu *networkAddLU) Result() any { return nil }

type networkRemoveLU struct {
	UUID string `json:"uuid"`
	Name string `json:"name"`
}

// Groups connect to a network under the network's lock (shared) and the
// group's: the exclusive network lock keeps the check below true.
func (lu *networkRemoveLU) Locks(p *Processor, op *opcodes.Op) []locking.Request {
	return []locking.Request{bgl(locking.Shared), netLock(locking.Exclusive, networkOf(p, op))}
}

func (lu *networkRemoveLU) Prereq(ctx context.Context, p *Processor, op *opcodes.Op) error {
	n, err := p.Cfg.MustNetwork(op.Str("network_name"))
	if err != nil {
		return err
	}
	if groups := connectedGroups(p, n.UUID); len(groups) > 0 {
		return ecode.Errorf(ecode.State, "Network still connected (to node groups %s)", strings.Join(groups, ", "))
	}
	if users := networkUsers(p, n.UUID); len(users) > 0 {
		return ecode.Errorf(ecode.State, "Network '%s' is still used by the NICs of instances %s", n.Name, strings.Join(users, ", "))
	}
	lu.UUID, lu.Name = n.UUID, n.Name
	return nil
}

// connectedGroups names the groups connected to a network, sorted.
func connectedGroups(p *Processor, uuid string) []string {
	var out []string
	for _, g := range p.Cfg.Groups() {
		if _, ok := g.Networks[uuid]; ok {
			out = append(out, g.Name)
		}
	}
	return out
}

// networkUsers names the instances with a NIC on a network, sorted.
func networkUsers(p *Processor, uuid string) []string {
	var out []string
	for _, i := range p.Cfg.Instances() {
		if slices.ContainsFunc(i.NICs, func(n config.NIC) bool { return n.Network == uuid }) {
			out = append(out, i.Name)
		}
	}
	return out
}

func (lu *networkRemoveLU) Steps() []Step {
	return []Step{{"remove", func(ctx context.Context, s *StepCtx) error {
		n, ok := s.Cfg().Network(lu.UUID)
		if !ok {
			return ecode.ExecErrorf("Network '%s' with UUID %s disappeared", lu.Name, lu.UUID)
		}
		s.Tx().DeleteNetwork(n)
		return nil
	}}}
}

func (lu *networkRemoveLU) Result() any { return nil }

type networkSetParamsLU struct {
	Net   *config.Network `json:"network"`
	Notes []string        `json:"notes,omitempty"`
}

func (lu *networkSetParamsLU) Locks(p *Processor, op *opcodes.Op) []locking.Request {
	return []locking.Request{bgl(locking.Shared), netLock(locking.Exclusive, networkOf(p, op))}
}

// optional reads a modify value: given is false for null or "", and
// clear is true for "none".
func optional(op *opcodes.Op, key string) (value string, given, clear bool) {
	v := op.Str(key)
	if v == "" {
		return "", false, false
	}
	return v, true, strings.EqualFold(v, valueNone)
}

func (lu *networkSetParamsLU) Prereq(ctx context.Context, p *Processor, op *opcodes.Op) error {
	add, err := addrList(op, "add_reserved_ips")
	if err != nil {
		return err
	}
	remove, err := addrList(op, "remove_reserved_ips")
	if err != nil {
		return err
	}
	gw, gwGiven, gwClear := optional(op, "gateway")
	if gwGiven && (len(add) > 0 || len(remove) > 0) {
		return ecode.Errorf(ecode.Inval, "Cannot modify gateway and reserved ips at once")
	}
	n, err := p.Cfg.MustNetwork(op.Str("network_name"))
	if err != nil {
		return err
	}
	pool, err := ippool.Open(n)
	if err != nil {
		return ecode.ExecErrorf("Cannot read the IP address pool of network '%s': %s", n.Name, err)
	}
	note := func(format string, args ...any) { lu.Notes = append(lu.Notes, fmt.Sprintf(format, args...)) }
	if gwGiven {
		if gwClear {
			gw = ""
		} else if used, err := pool.IsReserved(gw, false); err != nil {
			return ecode.Errorf(ecode.Inval, "Invalid gateway: %s", err)
		} else if used {
			return ecode.Errorf(ecode.State, "Gateway IP address '%s' is already reserved", gw)
		}
		if gw == n.Gateway {
			note("Warning: Gateway is already %s", gw)
		} else {
			if gw != "" {
				if err := pool.Reserve(gw, true); err != nil {
					return ecode.Errorf(ecode.State, "Cannot reserve the gateway: %s", err)
				}
			}
			if n.Gateway != "" {
				if err := pool.Release(n.Gateway, true); err != nil {
					note("Warning: Cannot release the old gateway %s: %s", n.Gateway, err)
				}
			}
			n.Gateway = gw
		}
	}
	for _, ip := range add {
		if err := pool.Reserve(ip, true); err != nil {
			note("Warning: Cannot reserve IP address %s: %s", ip, err)
		}
	}
	for _, ip := range remove {
		if ip == n.Gateway {
			note("Warning: Cannot unreserve Gateway's IP")
			continue
		}
		if err := pool.Release(ip, true); err != nil {
			note("Warning: Cannot release IP address %s: %s", ip, err)
		}
	}
	if v, given, clear := optional(op, "mac_prefix"); given {
		if clear {
			n.MACPrefix = ""
		} else if n.MACPrefix, err = normalizeMACPrefix(v); err != nil {
			return err
		}
	}
	for key, field := range map[string]*string{"network6": &n.Network6, "gateway6": &n.Gateway6} {
		if v, given, clear := optional(op, key); given {
			*field = v
			if clear {
				*field = ""
			}
		}
	}
	if err := checkNetworkAddrs(n); err != nil {
		return err
	}
	pool.Update(n)
	lu.Net = n
	return nil
}

func (lu *networkSetParamsLU) Steps() []Step {
	return []Step{{"update", func(ctx context.Context, s *StepCtx) error {
		for _, m := range lu.Notes {
			s.Logf(ctx, "%s", m)
		}
		s.Tx().PutNetwork(lu.Net.Clone())
		return nil
	}}}
}

func (lu *networkSetParamsLU) Result() any { return nil }

// checkVLAN refuses a VLAN on a connection: the nodes' kernel here has
// neither bridge VLAN filtering nor 802.1Q devices, so a VLAN could not be
// put on the NICs' taps, and one recorded but not applied would join the
// NICs to the untagged network instead (docs/ARCHITECTURE.md).
func checkVLAN(v string) error {
	if v == "" {
		return nil
	}
	return ecode.Errorf(ecode.Inval, "Network VLANs are not available in this version (VLAN '%s'): the nodes' kernel has no bridge VLAN filtering", v)
}

// groupInstances returns the instances whose primary node is in a group.
func groupInstances(p *Processor, group string) []*config.Instance {
	var out []*config.Instance
	for _, i := range p.Cfg.Instances() {
		if n, ok := p.Cfg.Node(i.PrimaryNode); ok && n.Group == group {
			out = append(out, i)
		}
	}
	return out
}

// networkConflicts lists, as Ganeti's warning does, the NICs of instances
// that match; nil when none does.
func networkConflicts(insts []*config.Instance, match func(config.NIC) bool) []string {
	var out []string
	for _, i := range insts {
		var nics []string
		for k, nic := range i.NICs {
			if match(nic) {
				nics = append(nics, fmt.Sprintf("nic%d/%s", k, nic.IP))
			}
		}
		if len(nics) > 0 {
			out = append(out, i.Name+": "+strings.Join(nics, ", "))
		}
	}
	return out
}

func conflictError(netName, action, group string, conflicts []string) error {
	return ecode.Errorf(ecode.State, "Conflicting IP addresses found;  remove/modify the corresponding network interfaces (addresses from network '%s', which is about to %s node group '%s', are in use: %s)",
		netName, action, group, strings.Join(conflicts, ", "))
}

type networkConnectLU struct {
	Group     string           `json:"group"`
	Network   string           `json:"network"`
	Params    config.NetParams `json:"params"`
	Connected bool             `json:"connected"` // already connected: nothing to do
	Name      string           `json:"name"`
	GroupName string           `json:"group_name"`
}

func (lu *networkConnectLU) Locks(p *Processor, op *opcodes.Op) []locking.Request {
	reqs := []locking.Request{bgl(locking.Shared), netLock(locking.Shared, networkOf(p, op))}
	if g, ok := p.Cfg.Group(op.Str("group_name")); ok {
		reqs = append(reqs, groupLock(locking.Exclusive, g.UUID))
	}
	return reqs
}

func (lu *networkConnectLU) Prereq(ctx context.Context, p *Processor, op *opcodes.Op) error {
	n, err := p.Cfg.MustNetwork(op.Str("network_name"))
	if err != nil {
		return err
	}
	g, err := p.mustGroup(op.Str("group_name"))
	if err != nil {
		return err
	}
	lu.Params = config.NetParams{Mode: op.Str("network_mode"), Link: op.Str("network_link"), VLAN: op.Str("network_vlan")}
	switch lu.Params.Mode {
	case "bridged", "routed":
	case "openvswitch":
		return ecode.Errorf(ecode.Inval, "NIC mode 'openvswitch' is not available in this version (no Open vSwitch on the nodes)")
	default:
		return ecode.Errorf(ecode.Inval, "Invalid NIC mode '%s'", lu.Params.Mode)
	}
	if err := checkVLAN(lu.Params.VLAN); err != nil {
		return err
	}
	lu.Group, lu.Network, lu.Name, lu.GroupName = g.UUID, n.UUID, n.Name, g.Name
	if _, ok := g.Networks[n.UUID]; ok {
		lu.Connected = true
		return nil
	}
	if op.Bool("conflicts_check") {
		pool, err := ippool.Open(n)
		if err != nil {
			return ecode.ExecErrorf("Cannot read the IP address pool of network '%s': %s", n.Name, err)
		}
		c := networkConflicts(groupInstances(p, g.UUID), func(nic config.NIC) bool { return nic.IP != "" && pool.Contains(nic.IP) })
		if len(c) > 0 {
			return conflictError(n.Name, "connect to", g.Name, c)
		}
	}
	return nil
}

func (lu *networkConnectLU) Steps() []Step {
	return []Step{{"connect", func(ctx context.Context, s *StepCtx) error {
		if lu.Connected {
			s.Logf(ctx, "Warning: Network '%s' is already mapped to group '%s'", lu.Name, lu.GroupName)
			return nil
		}
		g, ok := s.Cfg().Group(lu.Group)
		if !ok {
			return ecode.ExecErrorf("Node group %s disappeared", lu.GroupName)
		}
		if g.Networks == nil {
			g.Networks = map[string]config.NetParams{}
		}
		g.Networks[lu.Network] = lu.Params
		s.Tx().PutGroup(g)
		return nil
	}}}
}

func (lu *networkConnectLU) Result() any { return nil }

type networkDisconnectLU struct {
	Group     string `json:"group"`
	Network   string `json:"network"`
	Connected bool   `json:"connected"`
	Name      string `json:"name"`
	GroupName string `json:"group_name"`
}

// Instance creates that put a NIC on the network hold its lock
// exclusively, so the check for users below stays true.
func (lu *networkDisconnectLU) Locks(p *Processor, op *opcodes.Op) []locking.Request {
	reqs := []locking.Request{bgl(locking.Shared), netLock(locking.Exclusive, networkOf(p, op))}
	if g, ok := p.Cfg.Group(op.Str("group_name")); ok {
		reqs = append(reqs, groupLock(locking.Exclusive, g.UUID))
	}
	return reqs
}

func (lu *networkDisconnectLU) Prereq(ctx context.Context, p *Processor, op *opcodes.Op) error {
	n, err := p.Cfg.MustNetwork(op.Str("network_name"))
	if err != nil {
		return err
	}
	g, err := p.mustGroup(op.Str("group_name"))
	if err != nil {
		return err
	}
	lu.Group, lu.Network, lu.Name, lu.GroupName = g.UUID, n.UUID, n.Name, g.Name
	if _, ok := g.Networks[n.UUID]; !ok {
		return nil
	}
	lu.Connected = true
	c := networkConflicts(groupInstances(p, g.UUID), func(nic config.NIC) bool { return nic.Network == n.UUID })
	if len(c) > 0 {
		return conflictError(n.Name, "disconnect from", g.Name, c)
	}
	return nil
}

func (lu *networkDisconnectLU) Steps() []Step {
	return []Step{{"disconnect", func(ctx context.Context, s *StepCtx) error {
		if !lu.Connected {
			s.Logf(ctx, "Warning: Network '%s' is not mapped to group '%s'", lu.Name, lu.GroupName)
			return nil
		}
		g, ok := s.Cfg().Group(lu.Group)
		if !ok {
			return ecode.ExecErrorf("Node group %s disappeared", lu.GroupName)
		}
		delete(g.Networks, lu.Network)
		s.Tx().PutGroup(g)
		return nil
	}}}
}

func (lu *networkDisconnectLU) Result() any { return nil }
