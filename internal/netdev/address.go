package netdev

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"

	"github.com/corral/corral/internal/ecode"
)

// An address on a device, as the cluster's floating master address is
// kept: the node that holds it adds it to its master network device and
// removes it when the role moves. Both are idempotent, so a retried or
// repeated call succeeds.

// ipAddrInfo is the part of "ip -j addr show" output this package reads.
type ipAddrInfo struct {
	IfName   string `json:"ifname"`
	AddrInfo []struct {
		Local     string `json:"local"`
		PrefixLen int    `json:"prefixlen"`
	} `json:"addr_info"`
}

// DeviceAddresses lists the addresses on device dev, each with its prefix
// length. A missing device is an Environ error.
func (l Links) DeviceAddresses(ctx context.Context, dev string) ([]netip.Prefix, error) {
	if err := checkIfName(dev); err != nil {
		return nil, err
	}
	link, err := l.Link(ctx, dev)
	if err != nil {
		return nil, err
	}
	if link == nil {
		return nil, ecode.Errorf(ecode.Environ, "network device %s does not exist", dev)
	}
	out, err := l.run(ctx, "-j", "addr", "show", "dev", dev)
	if err != nil {
		return nil, err
	}
	return parseAddresses(out)
}

func parseAddresses(data []byte) ([]netip.Prefix, error) {
	var raw []ipAddrInfo
	if err := json.Unmarshal(data, &raw); err != nil {
		return nil, fmt.Errorf("netdev: cannot parse ip's address list: %w", err)
	}
	var out []netip.Prefix
	for _, r := range raw {
		for _, a := range r.AddrInfo {
			addr, err := netip.ParseAddr(a.Local)
			if err != nil {
				continue // an address family this package does not read
			}
			p := netip.PrefixFrom(addr, a.PrefixLen)
			if !p.IsValid() {
				return nil, fmt.Errorf("netdev: address %s/%d of %s has an invalid prefix length", a.Local, a.PrefixLen, r.IfName)
			}
			out = append(out, p)
		}
	}
	return out, nil
}

// HasAddress reports whether addr is on device dev, with any prefix length.
func (l Links) HasAddress(ctx context.Context, dev string, addr netip.Addr) (bool, error) {
	cur, err := l.DeviceAddresses(ctx, dev)
	if err != nil {
		return false, err
	}
	for _, p := range cur {
		if p.Addr() == addr {
			return true, nil
		}
	}
	return false, nil
}

// AddAddress puts the address p (its address and prefix length) on device
// dev, labelled dev:0 as Ganeti's master-ip-setup labels the master IP. An
// address already there with the same prefix length is left alone; with
// another length it is replaced. It reports whether it changed anything.
func (l Links) AddAddress(ctx context.Context, dev string, p netip.Prefix) (bool, error) {
	if !p.IsValid() || p.Addr().Zone() != "" {
		return false, ecode.Errorf(ecode.Inval, "invalid address %s", p)
	}
	cur, err := l.DeviceAddresses(ctx, dev)
	if err != nil {
		return false, err
	}
	for _, c := range cur {
		if c.Addr() != p.Addr() {
			continue
		}
		if c.Bits() == p.Bits() {
			return false, nil
		}
		if _, err := l.run(ctx, "addr", "del", c.String(), "dev", dev); err != nil {
			return false, err
		}
	}
	args := []string{"addr", "add", p.String(), "dev", dev}
	if len(dev)+2 <= maxIfName && p.Addr().Is4() {
		args = append(args, "label", dev+":0")
	}
	if _, err := l.run(ctx, args...); err != nil {
		return false, err
	}
	return true, nil
}

// DeleteAddress removes addr from device dev, whatever its prefix length.
// An address that is not there, or a device that does not exist, is not an
// error. It reports whether it changed anything.
func (l Links) DeleteAddress(ctx context.Context, dev string, addr netip.Addr) (bool, error) {
	if !addr.IsValid() {
		return false, ecode.Errorf(ecode.Inval, "invalid address %s", addr)
	}
	if err := checkIfName(dev); err != nil {
		return false, err
	}
	link, err := l.Link(ctx, dev)
	if err != nil || link == nil {
		return false, err
	}
	cur, err := l.DeviceAddresses(ctx, dev)
	if err != nil {
		return false, err
	}
	changed := false
	for _, c := range cur {
		if c.Addr() == addr {
			if _, err := l.run(ctx, "addr", "del", c.String(), "dev", dev); err != nil {
				return changed, err
			}
			changed = true
		}
	}
	return changed, nil
}
