package master

import (
	"github.com/corral/corral/internal/config"
	"github.com/corral/corral/internal/hypervisor"
)

// pruneHVParams removes from the fake hypervisor's cluster parameters
// (hvparams and os_hvp) the names its table lacks, and returns them as
// "[os:]fake/name". Clusters made when the fake hypervisor shared the kvm
// table hold kvm's names for it, which its node would now refuse at every
// start. Other hypervisors' parameters are left as they are.
func pruneHVParams(c *config.Cluster) []string {
	var dropped []string
	prune := func(where, hv string, p config.Params) {
		if hv != hypervisor.Fake {
			return
		}
		known := hypervisor.DefaultParams(hv)
		for k := range p {
			if _, ok := known[k]; !ok {
				delete(p, k)
				dropped = append(dropped, where+hv+"/"+k)
			}
		}
	}
	for hv, p := range c.HVParams {
		prune("", hv, p)
	}
	for os, hvs := range c.OSHVParams {
		for hv, p := range hvs {
			prune(os+":", hv, p)
		}
	}
	return dropped
}
