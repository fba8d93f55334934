package nodeserver

import (
	"context"
	"fmt"
	"sync"

	"github.com/corral/corral/internal/ecode"
	"github.com/corral/corral/internal/hypervisor"
	"github.com/corral/corral/internal/poolfw"
	"github.com/corral/corral/internal/uidpool"
)

// poolRules is the node's handle on the rules; its zero value works in
// the node's own network namespace.
type poolRules struct {
	nft poolfw.Nft
	mu  sync.Mutex // one rule replacement at a time
}

// poolFirewallOn tells whether the node keeps nftables owner rules for the
// uid pool (Options.PoolFirewall).
func (s *Server) poolFirewallOn() bool {
	return s.opts.PoolFirewall == poolfw.ModeNftables
}

// startPoolFirewall runs when the daemon starts: with the option on, nft must
// work, and the qemus of running pool instances (which outlive a daemon
// restart) get their rules before anything else happens. The rest of the
// pool is added by the next start of a pool instance, which brings the
// cluster's pool along.
func (s *Server) startPoolFirewall(ctx context.Context) error {
	mode, err := poolfw.ParseMode(s.opts.PoolFirewall)
	if err != nil {
		return err
	}
	s.opts.PoolFirewall = mode
	if !s.poolFirewallOn() {
		return nil
	}
	if err := s.poolFw.nft.Check(ctx); err != nil {
		return err
	}
	if err := s.applyPoolFirewall(ctx, nil); err != nil {
		return err
	}
	s.log.Info("pool firewall on: qemu processes of pool uids may not open connections", "table", "inet "+poolfw.Table)
	return nil
}

// guardPoolUID puts the rules for spec's pool and for the uid its qemu is
// about to run as in place before qemu starts; with the option on, a start
// whose rules cannot be written fails rather than run unguarded.
func (s *Server) guardPoolUID(ctx context.Context, spec hypervisor.InstanceSpec, owner qemuOwner) error {
	if !s.poolFirewallOn() || !owner.pool {
		return nil
	}
	if owner.uid < 0 {
		return ecode.Errorf(ecode.Environ, "instance %s: pool instance without a uid", spec.Name)
	}
	uids := append(uidpool.Pool{}, spec.UIDPool...)
	uids = append(uids, poolfw.UIDs(uint32(owner.uid))...)
	if err := s.applyPoolFirewall(ctx, uids); err != nil {
		return ecode.Errorf(ecode.Environ, "instance %s: pool firewall: %v", spec.Name, err)
	}
	return nil
}

// applyPoolFirewall replaces the rules with extra plus the uids of every
// running pool instance, so that a pool shrunk since an instance started
// never lifts the rule for its qemu.
func (s *Server) applyPoolFirewall(ctx context.Context, extra uidpool.Pool) error {
	s.poolFw.mu.Lock()
	defer s.poolFw.mu.Unlock()
	uids := append(uidpool.Pool{}, extra...)
	for name, h := range s.hvs {
		running, err := h.List(ctx)
		if err != nil {
			return fmt.Errorf("listing %s instances: %w", name, err)
		}
		for _, r := range running {
			if c := r.Confinement; c != nil && c.SecurityModel == hypervisor.SecurityPool && c.UID > 0 {
				uids = append(uids, poolfw.UIDs(uint32(c.UID))...)
			}
		}
	}
	return s.poolFw.nft.Ensure(ctx, uids)
}
