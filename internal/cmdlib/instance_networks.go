package cmdlib

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"sort"
	"strings"

	"github.com/corral/corral/internal/config"
	"github.com/corral/corral/internal/ecode"
	"github.com/corral/corral/internal/ippool"
	"github.com/corral/corral/internal/locking"
)

// nicIPPool is the NIC ip value that asks for an address from the pool of
// the NIC's network (Ganeti's NIC_IP_POOL).
const nicIPPool = "pool"

// nicNetworkLocks are the exclusive locks of the networks an instance
// create's NICs name (known ones; Prereq reports the others): taking
// addresses from a pool, and the group connection the NICs rely on, must
// not race with another create, a modify or a disconnect.
func nicNetworkLocks(p *Processor, nics []any) []locking.Request {
	var uuids []string
	for _, r := range nics {
		m, _ := r.(map[string]any)
		uuids = addNetworkNamed(p, uuids, m["network"])
	}
	return exclusiveNetLocks(uuids)
}

// addNetworkNamed adds the uuid of the network a NIC parameter names to
// uuids, unless it is none, unknown (Prereq reports it) or there already.
func addNetworkNamed(p *Processor, uuids []string, v any) []string {
	name, _ := v.(string)
	if name == "" || strings.EqualFold(name, valueNone) {
		return uuids
	}
	if n, ok := p.Cfg.Network(name); ok && !slices.Contains(uuids, n.UUID) {
		uuids = append(uuids, n.UUID)
	}
	return uuids
}

// exclusiveNetLocks locks the networks uuids exclusively, in a fixed
// order; nothing for none.
func exclusiveNetLocks(uuids []string) []locking.Request {
	if len(uuids) == 0 {
		return nil
	}
	sort.Strings(uuids)
	return []locking.Request{netLock(locking.Exclusive, uuids...)}
}

// instanceNetworkLocks are the exclusive locks of the networks an existing
// instance's NICs are on (its removal gives their addresses back).
func instanceNetworkLocks(p *Processor, name string) []locking.Request {
	i, ok := p.Cfg.Instance(name)
	if !ok {
		return nil
	}
	var uuids []string
	for _, n := range i.NICs {
		if n.Network != "" && !slices.Contains(uuids, n.Network) {
			uuids = append(uuids, n.Network)
		}
	}
	if len(uuids) == 0 {
		return nil
	}
	sort.Strings(uuids)
	return []locking.Request{netLock(locking.Exclusive, uuids...)}
}

// checkNICNetwork is Ganeti's syntax check of one NIC's network, mode,
// link and ip values (before the node is known): it resolves the network
// name to its uuid in n.Network.
func checkNICNetwork(p *Processor, n *config.NIC, modeGiven, linkGiven bool) error {
	if strings.EqualFold(n.Network, valueNone) {
		n.Network = ""
	}
	if n.Network != "" {
		if modeGiven || linkGiven {
			return ecode.Errorf(ecode.Inval, "If network is given, no mode or link is allowed to be passed")
		}
		net, err := p.Cfg.MustNetwork(n.Network)
		if err != nil {
			return err
		}
		n.Network = net.UUID
	}
	switch {
	case n.IP == "" || strings.EqualFold(n.IP, valueNone):
		n.IP = ""
	case strings.EqualFold(n.IP, nicIPPool):
		if n.Network == "" {
			return ecode.Errorf(ecode.Inval, "if ip=pool, parameter network must be passed too")
		}
		n.IP = nicIPPool
	default:
		if _, err := netip.ParseAddr(n.IP); err != nil {
			return ecode.Errorf(ecode.Inval, "Invalid IP address '%s'", n.IP)
		}
	}
	return nil
}

// networkMACPrefix is the MAC prefix of a NIC on a network: the network's
// own when it has one, else the cluster's.
func networkMACPrefix(p *Processor, c *config.Cluster, netUUID string) string {
	if netUUID != "" {
		if n, ok := p.Cfg.Network(netUUID); ok && n.MACPrefix != "" {
			return n.MACPrefix
		}
	}
	return c.MACPrefix
}

// applyNICNetworks gives the NICs on networks the mode, link and VLAN of
// the primary node's group connection, and checks that their addresses
// can be had: a free one for ip=pool, an explicit one free inside the
// network. The addresses themselves are taken by reserveNICAddrs, in the
// transaction that adds the instance.
func applyNICNetworks(p *Processor, nics []config.NIC, node *config.Node, conflictsCheck bool) error {
	g, ok := p.Cfg.Group(node.Group)
	if !ok {
		return ecode.Errorf(ecode.NoEnt, "Node group of node %s not known", node.Name)
	}
	pools := map[string]*ippool.Pool{}
	for i := range nics {
		nic := &nics[i]
		if nic.Network == "" {
			if conflictsCheck && nic.IP != "" {
				if err := checkIPOutsideGroupNetworks(p, g, nic.IP); err != nil {
					return err
				}
			}
			continue
		}
		net, err := p.Cfg.MustNetwork(nic.Network)
		if err != nil {
			return err
		}
		params, ok := g.Networks[net.UUID]
		if !ok {
			return ecode.Errorf(ecode.Inval, "No netparams found for network %s. Probably not connected to node's %s nodegroup", net.Name, node.Name)
		}
		nic.Mode, nic.Link, nic.VLAN = params.Mode, params.Link, params.VLAN
		pool := pools[net.UUID]
		if pool == nil {
			if pool, err = ippool.Open(net); err != nil {
				return ecode.Errorf(ecode.State, "Cannot read the IP address pool of network '%s': %s", net.Name, err)
			}
			pools[net.UUID] = pool
		}
		switch nic.IP {
		case "":
		case nicIPPool:
			if _, err := pool.Take(); err != nil {
				return ecode.Errorf(ecode.State, "Unable to get a free IP for NIC %d from the address pool", i)
			}
		default:
			if used, err := pool.InUse(nic.IP); err != nil || used {
				return ecode.Errorf(ecode.NotUnique, "IP address %s already in use or does not belong to network %s", nic.IP, net.Name)
			}
			_ = pool.Reserve(nic.IP, false)
		}
	}
	return nil
}

// checkIPOutsideGroupNetworks refuses, as Ganeti's conflict check does, an
// address of a NIC on no network that lies in a network connected to the
// node's group.
func checkIPOutsideGroupNetworks(p *Processor, g *config.NodeGroup, ip string) error {
	for uuid := range g.Networks {
		net, ok := p.Cfg.Network(uuid)
		if !ok {
			continue
		}
		if pool, err := ippool.Open(net); err == nil && pool.Contains(ip) {
			return ecode.Errorf(ecode.State, "The requested IP address (%s) belongs to network %s, but the target NIC does not.", ip, net.Name)
		}
	}
	return nil
}

// reserveNICAddrs takes the addresses of an instance's NICs from their
// networks' pools, as the networks are now (the caller holds their locks),
// writing the NICs' addresses into inst and the networks into s's
// transaction.
func reserveNICAddrs(ctx context.Context, s *StepCtx, inst *config.Instance) error {
	return changeNICAddrs(ctx, s, inst, true)
}

// releaseNICAddrs gives the addresses of an instance's NICs back to their
// networks' pools in s's transaction.
func releaseNICAddrs(ctx context.Context, s *StepCtx, inst *config.Instance) error {
	return changeNICAddrs(ctx, s, inst, false)
}

func changeNICAddrs(ctx context.Context, s *StepCtx, inst *config.Instance, take bool) error {
	nets := map[string]*config.Network{}
	pools := map[string]*ippool.Pool{}
	var order []string
	for i := range inst.NICs {
		nic := &inst.NICs[i]
		if nic.Network == "" || nic.IP == "" {
			continue
		}
		pool := pools[nic.Network]
		if pool == nil {
			net, ok := s.Cfg().Network(nic.Network)
			if !ok {
				if take {
					return ecode.ExecErrorf("Network %s of NIC %d disappeared", nic.Network, i)
				}
				continue
			}
			var err error
			if pool, err = ippool.Open(net); err != nil {
				return ecode.ExecErrorf("Cannot read the IP address pool of network '%s': %w", net.Name, err)
			}
			nets[net.UUID], pools[net.UUID] = net, pool
			order = append(order, net.UUID)
		}
		name := nets[nic.Network].Name
		switch {
		case take && nic.IP == nicIPPool:
			ip, err := pool.Take()
			if err != nil {
				return ecode.Errorf(ecode.State, "Unable to get a free IP for NIC %d from the address pool", i)
			}
			nic.IP = ip
			s.Logf(ctx, "Chose IP %s from network %s", ip, name)
		case take:
			if err := pool.Reserve(nic.IP, false); err != nil {
				return ecode.Errorf(ecode.NotUnique, "IP address %s already in use or does not belong to network %s", nic.IP, name)
			}
		default:
			if !pool.Contains(nic.IP) {
				continue
			}
			if err := pool.Release(nic.IP, false); err != nil {
				s.Logf(ctx, "Warning: %v", fmt.Errorf("releasing the address of NIC %d: %w", i, err))
			}
		}
	}
	for _, u := range order {
		pools[u].Update(nets[u])
		s.Tx().PutNetwork(nets[u])
	}
	return nil
}
