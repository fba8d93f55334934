package cmdlib

import (
	"context"
	"net/netip"

	"github.com/corral/corral/internal/config"
	"github.com/corral/corral/internal/hypervisor"
)

// hvXenHVM is the other hypervisor Ganeti gives a network port (its
// HTS_REQ_PORT); Corral does not run it, but an imported configuration may
// name it.
const hvXenHVM = "xen-hvm"

// hypervisorTakesPort reports whether Ganeti allocates a network_port for
// every instance of hv when it is created (HTS_REQ_PORT).
func hypervisorTakesPort(hv string) bool { return hv == hvKVM || hv == hvXenHVM }

// consoleListensOnTCP reports whether an instance's filled hypervisor
// parameters put a console on a TCP port: VNC bound to an IP address, or
// SPICE.
func consoleListensOnTCP(hv config.Params) bool {
	s := hv.Strings()
	if _, err := netip.ParseAddr(s[hvVNCBindAddress]); err == nil {
		return true
	}
	return s[hypervisor.ParamSpiceBind] != ""
}

// assignNetworkPort gives inst the lowest free port of the cluster's range
// if it has none. The caller puts inst in s's transaction; the port's index
// key makes the commit fail if another job took the same port meanwhile.
func assignNetworkPort(ctx context.Context, s *StepCtx, inst *config.Instance) error {
	if inst.NetworkPort != 0 {
		return nil
	}
	port, err := s.Cfg().FreeNetworkPort()
	if err != nil {
		return err
	}
	inst.NetworkPort = port
	s.Logf(ctx, "Allocated network port %d to instance %s", port, inst.Name)
	return nil
}
