package cmdlib

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/corral/corral/internal/config"
	"github.com/corral/corral/internal/ippool"
)

// verifyNetworks checks the networks' pools against the NICs that use
// them, and addresses used twice (Ganeti's VerifyConfig check, keyed as
// Ganeti keys NIC addresses: by link, address and network).
func (lu *clusterVerifyLU) verifyNetworks(p *Processor) {
	pools := map[string]*ippool.Pool{}
	names := map[string]string{}
	for _, n := range p.Cfg.Networks() {
		names[n.UUID] = n.Name
		pool, err := ippool.Open(n)
		if err != nil {
			lu.errf("network %s: cannot read its address pool: %v", n.Name, err)
			continue
		}
		pools[n.UUID] = pool
	}
	owners := map[string][]string{}
	for _, n := range p.Cfg.Nodes() {
		owners[n.PrimaryIP] = append(owners[n.PrimaryIP], fmt.Sprintf("node:%s/primary", n.Name))
		if n.SecondaryIP != "" && n.SecondaryIP != n.PrimaryIP {
			owners[n.SecondaryIP] = append(owners[n.SecondaryIP], fmt.Sprintf("node:%s/secondary", n.Name))
		}
	}
	held := map[string]map[string]bool{} // network uuid -> addresses NICs hold
	for _, i := range p.Cfg.Instances() {
		for k, nic := range i.NICs {
			if nic.Network != "" {
				lu.verifyNICAddress(i, k, nic, pools, names)
				if held[nic.Network] == nil {
					held[nic.Network] = map[string]bool{}
				}
				held[nic.Network][nic.IP] = true
			}
			if nic.IP == "" {
				continue
			}
			link := "bridge:" + nic.Link
			if nic.Mode == "routed" {
				link = "route:" + nic.Link
			}
			net := nic.Network
			if net == "" {
				net = "None"
			}
			key := link + "/" + nic.IP + "/" + net
			owners[key] = append(owners[key], fmt.Sprintf("instance:%s/nic:%d", i.Name, k))
		}
	}
	keys := make([]string, 0, len(owners))
	for k := range owners {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if o := owners[k]; len(o) > 1 {
			lu.errf("IP address %s is used by multiple owners: %s", k, strings.Join(o, ", "))
		}
	}
	lu.verifyPoolUse(pools, names, held)
}

// verifyNICAddress checks one NIC on a network: the network exists, and
// its address lies inside it, is marked used in the pool, and is not also
// reserved externally.
func (lu *clusterVerifyLU) verifyNICAddress(i *config.Instance, k int, nic config.NIC, pools map[string]*ippool.Pool, names map[string]string) {
	name, known := names[nic.Network]
	if !known {
		lu.errf("instance %s: NIC %d is on network %s, which does not exist", i.Name, k, nic.Network)
		return
	}
	pool := pools[nic.Network]
	if pool == nil || nic.IP == "" {
		return
	}
	if !pool.Contains(nic.IP) {
		lu.errf("instance %s: NIC %d address %s is outside the pool of network %s (%s)", i.Name, k, nic.IP, name, pool.Prefix())
		return
	}
	if used, _ := pool.IsReserved(nic.IP, false); !used {
		lu.errf("instance %s: NIC %d address %s is not reserved in the pool of network %s", i.Name, k, nic.IP, name)
	}
	if ext, _ := pool.IsReserved(nic.IP, true); ext {
		lu.errf("instance %s: NIC %d address %s is also reserved externally in network %s", i.Name, k, nic.IP, name)
	}
}

// verifyPoolUse warns of pool addresses marked used by an instance that no
// NIC holds (leaked reservations).
func (lu *clusterVerifyLU) verifyPoolUse(pools map[string]*ippool.Pool, names map[string]string, held map[string]map[string]bool) {
	uuids := make([]string, 0, len(pools))
	for u := range pools {
		uuids = append(uuids, u)
	}
	slices.SortFunc(uuids, func(a, b string) int { return strings.Compare(names[a], names[b]) })
	for _, u := range uuids {
		var leaked []string
		for _, ip := range pools[u].InstanceReservations() {
			if !held[u][ip] {
				leaked = append(leaked, ip)
			}
		}
		if len(leaked) > 0 {
			lu.warnf("network %s: addresses marked used by instances that no NIC holds: %s", names[u], strings.Join(leaked, ", "))
		}
	}
}
