package cmdlib

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/corral/corral/internal/config"
	"github.com/corral/corral/internal/ecode"
	"github.com/corral/corral/internal/ippool"
	"github.com/corral/corral/internal/locking"
	"github.com/corral/corral/internal/opcodes"
)

// NICs on networks through OP_INSTANCE_SET_PARAMS: Prereq checks that the
// new NICs' addresses can be had, and the "update" step takes and gives
// back the addresses in the transaction that writes the instance, so a
// modify that fails or is refused holds nothing.

// networkName is the name of a network by uuid ("" for none or unknown).
func networkName(p *Processor, uuid string) string {
	if uuid == "" {
		return ""
	}
	if n, ok := p.Cfg.Network(uuid); ok {
		return n.Name
	}
	return uuid
}

// modifyNetworkLocks are the exclusive locks of the networks a modify may
// take addresses from or give them back to: those of the instance's NICs
// now and those its NIC modifications name.
func modifyNetworkLocks(p *Processor, op *opcodes.Op) []locking.Request {
	var uuids []string
	if i, ok := p.Cfg.Instance(op.Str("instance_name")); ok {
		for _, n := range i.NICs {
			if n.Network != "" && !slices.Contains(uuids, n.Network) {
				uuids = append(uuids, n.Network)
			}
		}
	}
	for _, r := range op.List("nics") {
		l, _ := r.([]any)
		if len(l) == 0 {
			continue
		}
		m, _ := l[len(l)-1].(map[string]any)
		uuids = addNetworkNamed(p, uuids, m["network"])
	}
	return exclusiveNetLocks(uuids)
}

// modifyNICNetwork applies a NIC modification's network and ip to n, as
// Ganeti's: network=NAME moves the NIC to that network (it takes the mode
// and link of the primary node group's connection), network=none takes it
// off; ip=pool asks the NIC's network, new or kept, for a free address; an
// address must be free in the NIC's network. An ip not given keeps the
// NIC's, to be held in the new network when the network changes. The
// addresses change hands when the modify commits (moveNICAddrs).
func modifyNICNetwork(p *Processor, n *config.NIC, idx int, node *config.Node, params map[string]any) ([][2]any, error) {
	netRaw, netGiven := params["network"]
	ipRaw, ipGiven := params["ip"]
	if !netGiven && !ipGiven {
		return nil, nil
	}
	old := *n
	var changes [][2]any
	if netGiven {
		name, _ := netRaw.(string)
		n.Network = ""
		if name != "" && !strings.EqualFold(name, valueNone) {
			net, err := p.Cfg.MustNetwork(name)
			if err != nil {
				return nil, err
			}
			n.Network = net.UUID
		}
		changes = append(changes, [2]any{fmt.Sprintf("nic.network/%d", idx), netRaw})
	}
	if ipGiven {
		ip, _ := ipRaw.(string)
		switch {
		case ip == "" || strings.EqualFold(ip, valueNone):
			n.IP = ""
		case strings.EqualFold(ip, nicIPPool):
			n.IP = nicIPPool
		default:
			if _, err := netip.ParseAddr(ip); err != nil {
				return nil, ecode.Errorf(ecode.Inval, "Invalid IP address '%s'", ip)
			}
			n.IP = ip
		}
		changes = append(changes, [2]any{fmt.Sprintf("nic.ip/%d", idx), ipRaw})
	}
	if n.IP == nicIPPool && n.Network == "" {
		return nil, ecode.Errorf(ecode.Inval, "If ip=pool, parameter network cannot be none")
	}
	if n.Network == "" {
		if old.Network != "" && !ipGiven && n.IP != "" {
			// The address belonged to the network the NIC leaves.
			if net, ok := p.Cfg.Network(old.Network); ok {
				if pool, err := ippool.Open(net); err == nil && pool.Contains(n.IP) {
					n.IP = ""
				}
			}
		}
		return changes, nil
	}
	if n.Network == old.Network && n.IP == old.IP {
		return changes, nil // already held
	}
	g, ok := p.Cfg.Group(node.Group)
	if !ok {
		return nil, ecode.Errorf(ecode.NoEnt, "Node group of node %s not known", node.Name)
	}
	net, err := p.Cfg.MustNetwork(n.Network)
	if err != nil {
		return nil, err
	}
	conn, ok := g.Networks[net.UUID]
	if !ok {
		return nil, ecode.Errorf(ecode.Inval, "No netparams found for network %s. Probably not connected to node's %s nodegroup", net.Name, node.Name)
	}
	n.Mode, n.Link, n.VLAN = conn.Mode, conn.Link, conn.VLAN
	pool, err := ippool.Open(net)
	if err != nil {
		return nil, ecode.Errorf(ecode.State, "Cannot read the IP address pool of network '%s': %s", net.Name, err)
	}
	switch {
	case n.IP == "":
	case n.IP == nicIPPool:
		if _, err := pool.Take(); err != nil {
			return nil, ecode.Errorf(ecode.State, "Unable to get a free IP for NIC %d from the address pool", idx)
		}
	case n.Network == old.Network && n.IP == old.IP:
	default:
		if used, err := pool.InUse(n.IP); err != nil || used {
			return nil, ecode.Errorf(ecode.NotUnique, "IP address %s already in use or does not belong to network %s", n.IP, net.Name)
		}
	}
	return changes, nil
}

// moveNICAddrs makes the networks' pools hold the addresses of nics, an
// instance's new NICs, instead of those of old, its NICs until now, in s's
// transaction: an address a NIC keeps in the same network stays held, one
// a NIC leaves (removed, moved to another network or address) is given
// back, and a new one is taken (ip=pool: the first free one, written into
// the NIC).
func moveNICAddrs(ctx context.Context, s *StepCtx, old, nics []config.NIC) error {
	held := map[string]config.NIC{}
	for _, o := range old {
		held[o.UUID] = o
	}
	kept := func(n config.NIC) bool {
		o, ok := held[n.UUID]
		return ok && n.IP != nicIPPool && o.Network == n.Network && o.IP == n.IP
	}
	pools := newNICPools(s)
	next := map[string]config.NIC{}
	for _, n := range nics {
		next[n.UUID] = n
	}
	for _, o := range old {
		if o.Network == "" || o.IP == "" {
			continue
		}
		if n, ok := next[o.UUID]; ok && kept(n) {
			continue
		}
		pool, _, err := pools.get(o.Network)
		if err != nil || pool == nil || !pool.Contains(o.IP) {
			continue // a network gone, or an address outside it: nothing held
		}
		if err := pool.Release(o.IP, false); err != nil {
			s.Logf(ctx, "Warning: releasing address %s of a NIC: %v", o.IP, err)
		}
	}
	for i := range nics {
		n := &nics[i]
		if n.Network == "" || n.IP == "" || kept(*n) {
			continue
		}
		pool, net, err := pools.get(n.Network)
		if err != nil {
			return err
		}
		if pool == nil {
			return ecode.ExecErrorf("Network %s of NIC %d disappeared", n.Network, i)
		}
		if n.IP == nicIPPool {
			ip, err := pool.Take()
			if err != nil {
				return ecode.Errorf(ecode.State, "Unable to get a free IP for NIC %d from the address pool", i)
			}
			n.IP = ip
			s.Logf(ctx, "Chose IP %s from network %s", ip, net.Name)
			continue
		}
		if err := pool.Reserve(n.IP, false); err != nil {
			return ecode.Errorf(ecode.NotUnique, "IP address %s already in use or does not belong to network %s", n.IP, net.Name)
		}
	}
	pools.put()
	return nil
}

// nicPools are the pools of the networks a step changes, opened once each
// from the configuration as it is now.
type nicPools struct {
	s     *StepCtx
	nets  map[string]*config.Network
	pools map[string]*ippool.Pool
	order []string
}

func newNICPools(s *StepCtx) *nicPools {
	return &nicPools{s: s, nets: map[string]*config.Network{}, pools: map[string]*ippool.Pool{}}
}

// get opens the pool of network uuid; nil when the network is gone.
func (ps *nicPools) get(uuid string) (*ippool.Pool, *config.Network, error) {
	if pool, ok := ps.pools[uuid]; ok {
		return pool, ps.nets[uuid], nil
	}
	net, ok := ps.s.Cfg().Network(uuid)
	if !ok {
		return nil, nil, nil
	}
	pool, err := ippool.Open(net)
	if err != nil {
		return nil, nil, ecode.ExecErrorf("Cannot read the IP address pool of network '%s': %w", net.Name, err)
	}
	ps.nets[uuid], ps.pools[uuid] = net, pool
	ps.order = append(ps.order, uuid)
	return pool, net, nil
}

// put writes the changed pools into the step's transaction.
func (ps *nicPools) put() {
	for _, u := range ps.order {
		ps.pools[u].Update(ps.nets[u])
		ps.s.Tx().PutNetwork(ps.nets[u])
	}
}
