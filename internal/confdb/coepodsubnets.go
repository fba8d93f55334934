package confdb

import (
	"net/netip"
	"strings"
	"time"

	"github.com/corral/corral/internal/config"
	"github.com/corral/corral/internal/ecode"
)

// COEPodNetwork is where kubelet workers' pod subnets come from, a /24
// each, unique on the Corral node that runs the worker (its bridge and
// routes are the node's).
var COEPodNetwork = netip.MustParsePrefix("10.244.0.0/16")

// COEPodSubnetBits is the size of one worker's pod subnet.
const COEPodSubnetBits = 24

// A COE cluster's index values: "<node uuid>/<subnet>" of each kubelet
// worker.
func podSubnetCount(c *config.COECluster) int { return len(c.PodSubnets) }
func podSubnetKey(c *config.COECluster, k int) string {
	return c.PodSubnets[k].Host + "/" + c.PodSubnets[k].Subnet
}

// podSubnetHold is a subnet handed out to owner, not committed yet.
type podSubnetHold struct {
	owner string
	until time.Time
}

// FreeCOEPodSubnet hands out a pod subnet of COEPodNetwork on the Corral
// node host (a uuid) for owner ("<cluster uuid>/<kube node>"): the lowest
// that no COE cluster holds on that node, no other caller was handed
// meanwhile, and that contains none of avoid (the node's addresses).
// owner asking again before its commit gets the same one. The caller
// records it in the cluster's PodSubnets in a transaction, whose commit
// fails if another cluster took it all the same; a hold lapses after
// portHold.
func (db *DB) FreeCOEPodSubnet(host, owner string, avoid []netip.Addr) (netip.Prefix, error) {
	if host == "" || strings.Contains(host, "/") {
		return netip.Prefix{}, ecode.Errorf(ecode.Inval, "pod subnet: bad node uuid %q", host)
	}
	db.mu.Lock()
	defer db.mu.Unlock()
	now := db.now()
	if db.podSubnetsHeld == nil {
		db.podSubnetsHeld = map[string]podSubnetHold{}
	}
	taken := db.coe.podSubnets.owner
	for v, h := range db.podSubnetsHeld {
		if _, committed := taken[v]; committed || !now.Before(h.until) {
			delete(db.podSubnetsHeld, v)
		}
	}
	for v, h := range db.podSubnetsHeld {
		if h.owner == owner && strings.HasPrefix(v, host+"/") {
			return netip.MustParsePrefix(strings.TrimPrefix(v, host+"/")), nil
		}
	}
	base := COEPodNetwork.Masked().Addr().As4()
	n := 1 << (COEPodSubnetBits - COEPodNetwork.Bits())
	for k := range n {
		a := base
		a[1] |= byte(k >> 8)
		a[2] = byte(k)
		p := netip.PrefixFrom(netip.AddrFrom4(a), COEPodSubnetBits)
		v := host + "/" + p.String()
		if _, ok := taken[v]; ok {
			continue
		}
		if _, ok := db.podSubnetsHeld[v]; ok {
			continue
		}
		clash := false
		for _, addr := range avoid {
			clash = clash || p.Contains(addr)
		}
		if clash {
			continue
		}
		db.podSubnetsHeld[v] = podSubnetHold{owner: owner, until: now.Add(portHold)}
		return p, nil
	}
	return netip.Prefix{}, ecode.Errorf(ecode.NoRes, "no pod subnet of %s is free on node %s", COEPodNetwork, host)
}
