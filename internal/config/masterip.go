package config

import (
	"net/netip"

	"github.com/corral/corral/internal/ecode"
)

// DefaultMasterNetmask is the master IP's prefix length when none is set
// and the cluster IP is IPv4 or unset (Ganeti's default); an IPv6 one gets
// 128.
const DefaultMasterNetmask = 32

// MasterIPNetmask is the master IP's prefix length in effect.
func (c *Cluster) MasterIPNetmask() int {
	if c.MasterNetmask != 0 {
		return c.MasterNetmask
	}
	if a, err := netip.ParseAddr(c.ClusterIP); err == nil && a.Is6() && !a.Is4In6() {
		return 128
	}
	return DefaultMasterNetmask
}

// CheckMasterNetwork validates master network parameters: a cluster IP
// ("" for none) needs a network device, and the netmask (a prefix length)
// must suit the address's family.
func CheckMasterNetwork(ip, netdev string, netmask int) error {
	if netdev != "" && !validNetdev(netdev) {
		return ecode.Errorf(ecode.Inval, "Invalid master network device '%s'", netdev)
	}
	bits := 32
	if ip != "" {
		addr, err := netip.ParseAddr(ip)
		if err != nil || addr.Zone() != "" {
			return ecode.Errorf(ecode.Inval, "Invalid cluster IP address '%s'", ip)
		}
		if addr.IsUnspecified() || addr.IsLoopback() || addr.IsMulticast() {
			return ecode.Errorf(ecode.Inval, "The cluster IP address '%s' cannot be a floating address", ip)
		}
		if netdev == "" {
			return ecode.Errorf(ecode.Inval, "A cluster IP address needs a master network device (master_netdev)")
		}
		bits = addr.BitLen()
	}
	if netmask != 0 && (netmask < 1 || netmask > bits) {
		return ecode.Errorf(ecode.Inval, "Invalid master netmask %d (a prefix length from 1 to %d)", netmask, bits)
	}
	return nil
}

// validNetdev accepts a Linux network device name.
func validNetdev(s string) bool {
	if len(s) > 15 || s == "." || s == ".." || s[0] == '-' {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-' || r == '.') {
			return false
		}
	}
	return true
}
