package bootstrap

import (
	"github.com/corral/corral/internal/config"
	"github.com/corral/corral/internal/hypervisor"
)

// confinedDefaults makes a cluster initialised with a uid pool confine qemu
// by default: each instance under its own pool uid, jailed in an empty
// chroot. Values the caller set with -H win.
func confinedDefaults(o InitOptions, hvp map[string]config.Params) {
	if len(o.UIDPool) == 0 {
		return
	}
	p := hvp[hypervisor.KVM]
	if p == nil {
		return
	}
	set := o.HVParams[hypervisor.KVM]
	if _, ok := set[hypervisor.ParamSecurityModel]; !ok {
		p[hypervisor.ParamSecurityModel] = hypervisor.SecurityPool
	}
	if _, ok := set[hypervisor.ParamUseChroot]; !ok {
		p[hypervisor.ParamUseChroot] = true
	}
}
