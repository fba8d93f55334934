package nodeserver

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/corral/corral/internal/ecode"
	"github.com/corral/corral/internal/hypervisor"
	"github.com/corral/corral/internal/poolfw"
	"github.com/corral/corral/internal/uidpool"
)

// listingHV reports a fixed set of running instances.
type listingHV struct {
	hypervisor.Hypervisor // only List is called
	running               []hypervisor.RunningInstance
}

func (h listingHV) List(ctx context.Context) ([]hypervisor.RunningInstance, error) {
	return h.running, nil
}

func fwServer(mode string, nft poolfw.Nft) *Server {
	running := []hypervisor.RunningInstance{
		{Name: "pooled", Confinement: &hypervisor.Confinement{SecurityModel: hypervisor.SecurityPool, UID: 5000}},
		{Name: "named", Confinement: &hypervisor.Confinement{SecurityModel: hypervisor.SecurityUser, UID: 6000}},
		{Name: "plain"},
	}
	return &Server{opts: Options{PoolFirewall: mode}, log: slog.New(slog.DiscardHandler),
		hvs: map[string]hypervisor.Hypervisor{hypervisor.KVM: listingHV{running: running}}, poolFw: poolRules{nft: nft}}
}

func TestPoolFirewallOffOrMissing(t *testing.T) {
	ctx := context.Background()
	missing := poolfw.Nft{NftBinary: "/nonexistent/nft"}
	spec := hypervisor.InstanceSpec{Name: "vm", UIDPool: uidpool.Pool{{2000, 2099}}}
	pooled := qemuOwner{uid: 2000, gid: 2000, pool: true}

	// Off (the default): nft is never run, so its absence does not matter.
	for _, mode := range []string{"", poolfw.ModeNone} {
		s := fwServer(mode, missing)
		if err := s.startPoolFirewall(ctx); err != nil {
			t.Errorf("start with mode %q: %v", mode, err)
		}
		if err := s.guardPoolUID(ctx, spec, pooled); err != nil {
			t.Errorf("guard with mode %q: %v", mode, err)
		}
	}
	if err := fwServer("iptables", missing).startPoolFirewall(ctx); ecode.ClassOf(err) != ecode.Inval {
		t.Errorf("unknown mode: %v", err)
	}

	// On without nft: the daemon does not start, and no pool instance does.
	s := fwServer(poolfw.ModeNftables, missing)
	if err := s.startPoolFirewall(ctx); err == nil || !strings.Contains(err.Error(), "nft is not installed") {
		t.Errorf("start without nft: %v", err)
	}
	if err := s.guardPoolUID(ctx, spec, pooled); ecode.ClassOf(err) != ecode.Environ {
		t.Errorf("guard without nft: %v", err)
	}
	// Instances outside the pool model need no rule.
	if err := s.guardPoolUID(ctx, spec, qemuOwner{uid: 107, gid: 107}); err != nil {
		t.Errorf("guard of a non-pool instance: %v", err)
	}
}

func TestPoolFirewallRules(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root for network namespaces and nftables")
	}
	for _, bin := range []string{"ip", "nft"} {
		if _, err := exec.LookPath(bin); err != nil {
			t.Skipf("%s is not installed", bin)
		}
	}
	ns := fmt.Sprintf("crlnodefw%d", os.Getpid())
	if out, err := exec.Command("ip", "netns", "add", ns).CombinedOutput(); err != nil {
		t.Skipf("cannot create a network namespace: %v: %s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("ip", "netns", "del", ns).CombinedOutput(); err != nil {
			t.Errorf("ip netns del %s: %v: %s", ns, err, out)
		}
	})
	ctx := context.Background()
	nft := poolfw.Nft{Netns: ns}
	s := fwServer(poolfw.ModeNftables, nft)

	// At daemon start only the running pool instance is known.
	if err := s.startPoolFirewall(ctx); err != nil {
		t.Fatal(err)
	}
	rules, err := nft.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(rules, "meta skuid 5000 counter") || strings.Contains(rules, "6000") {
		t.Fatalf("rules after start:\n%s", rules)
	}

	// A pool start adds the cluster's pool and its own uid, which lies
	// outside a pool shrunk since it was handed out.
	spec := hypervisor.InstanceSpec{Name: "vm", UIDPool: uidpool.Pool{{2000, 2099}}}
	if err := s.guardPoolUID(ctx, spec, qemuOwner{uid: 3000, gid: 3000, pool: true}); err != nil {
		t.Fatal(err)
	}
	rules, err = nft.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(rules, "meta skuid { 2000-2099, 3000, 5000 } counter") {
		t.Fatalf("rules after a pool start:\n%s", rules)
	}
}
