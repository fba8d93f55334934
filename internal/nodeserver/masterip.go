package nodeserver

import (
	"context"
	"net/netip"

	"github.com/corral/corral/internal/ecode"
	"github.com/corral/corral/internal/netdev"
	"github.com/corral/corral/internal/nodeapi"
)

// The cluster's floating master address: the master tells the node it
// runs on to put the address on the master network device, and the others
// to take it off. The node uses ip(8) as for its other devices, in
// Options.MasterIPNetns when set.

func (s *Server) masterIPLinks() netdev.Links {
	return netdev.Links{Netns: s.opts.MasterIPNetns}
}

// masterIPPrefix checks the master network parameters.
func masterIPPrefix(a nodeapi.MasterIPArgs) (netip.Prefix, error) {
	addr, err := netip.ParseAddr(a.Address)
	if err != nil || addr.Zone() != "" {
		return netip.Prefix{}, ecode.Errorf(ecode.Inval, "Invalid master IP address '%s'", a.Address)
	}
	if a.Netdev == "" {
		return netip.Prefix{}, ecode.Errorf(ecode.Inval, "No master network device given")
	}
	p := netip.PrefixFrom(addr, a.Netmask)
	if a.Netmask < 1 || !p.IsValid() {
		return netip.Prefix{}, ecode.Errorf(ecode.Inval, "Invalid master netmask %d for %s", a.Netmask, addr)
	}
	return p, nil
}

func (s *Server) activateMasterIP(ctx context.Context, a nodeapi.MasterIPArgs) (any, error) {
	p, err := masterIPPrefix(a)
	if err != nil {
		return nil, err
	}
	changed, err := s.masterIPLinks().AddAddress(ctx, a.Netdev, p)
	if err != nil {
		return nil, err
	}
	if changed {
		s.log.Info("master IP activated", "ip", p.String(), "netdev", a.Netdev)
	}
	return nodeapi.MasterIPReply{Present: true, Changed: changed}, nil
}

func (s *Server) deactivateMasterIP(ctx context.Context, a nodeapi.MasterIPArgs) (any, error) {
	p, err := masterIPPrefix(a)
	if err != nil {
		return nil, err
	}
	changed, err := s.masterIPLinks().DeleteAddress(ctx, a.Netdev, p.Addr())
	if err != nil {
		return nil, err
	}
	if changed {
		s.log.Info("master IP deactivated", "ip", p.Addr().String(), "netdev", a.Netdev)
	}
	return nodeapi.MasterIPReply{Present: false, Changed: changed}, nil
}

// masterIPStatus reports whether the address is on the device; a device
// that does not exist holds no address.
func (s *Server) masterIPStatus(ctx context.Context, a nodeapi.MasterIPArgs) (any, error) {
	p, err := masterIPPrefix(a)
	if err != nil {
		return nil, err
	}
	l := s.masterIPLinks()
	link, err := l.Link(ctx, a.Netdev)
	if err != nil {
		return nil, err
	}
	if link == nil {
		return nodeapi.MasterIPReply{}, nil
	}
	has, err := l.HasAddress(ctx, a.Netdev, p.Addr())
	if err != nil {
		return nil, err
	}
	return nodeapi.MasterIPReply{Present: has}, nil
}
