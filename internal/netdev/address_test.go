package netdev

import (
	"context"
	"net/netip"
	"os"
	"os/exec"
	"testing"
)

func TestParseAddresses(t *testing.T) {
	data := []byte(`[{"ifindex":5,"ifname":"d0","addr_info":[{"family":"inet","local":"198.51.100.7","prefixlen":32,"label":"d0:0"},{"family":"inet6","local":"fe80::1","prefixlen":64}]}]`)
	got, err := parseAddresses(data)
	if err != nil {
		t.Fatal(err)
	}
	want := []netip.Prefix{netip.MustParsePrefix("198.51.100.7/32"), netip.MustParsePrefix("fe80::1/64")}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("parseAddresses = %v, want %v", got, want)
	}
	if _, err := parseAddresses([]byte(`[{"ifname":"d0","addr_info":[{"local":"198.51.100.7","prefixlen":40}]}]`)); err == nil {
		t.Fatal("a /40 IPv4 address was accepted")
	}
}

// TestAddressOnDevice adds, re-adds, reads and removes an address on
// a bridge without ports in a network namespace of its own (root only;
// the dummy driver is not always there).
func TestAddressOnDevice(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root for a network namespace")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("no ip binary")
	}
	ns := "crltestaddr"
	if out, err := exec.Command("ip", "netns", "add", ns).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add: %v: %s", err, out)
	}
	t.Cleanup(func() { exec.Command("ip", "netns", "del", ns).Run() })
	if out, err := exec.Command("ip", "-n", ns, "link", "add", "d0", "type", "bridge").CombinedOutput(); err != nil {
		t.Fatalf("ip link add: %v: %s", err, out)
	}
	l := Links{Netns: ns}
	ctx := context.Background()
	addr := netip.MustParseAddr("198.51.100.7")
	if has, err := l.HasAddress(ctx, "d0", addr); err != nil || has {
		t.Fatalf("HasAddress before = %v, %v", has, err)
	}
	for i, wantChanged := range []bool{true, false} {
		changed, err := l.AddAddress(ctx, "d0", netip.PrefixFrom(addr, 32))
		if err != nil || changed != wantChanged {
			t.Fatalf("AddAddress #%d = %v, %v; want changed %v", i+1, changed, err, wantChanged)
		}
	}
	// Another prefix length replaces the address.
	if changed, err := l.AddAddress(ctx, "d0", netip.PrefixFrom(addr, 24)); err != nil || !changed {
		t.Fatalf("AddAddress /24 = %v, %v", changed, err)
	}
	cur, err := l.DeviceAddresses(ctx, "d0")
	if err != nil || len(cur) != 1 || cur[0] != netip.MustParsePrefix("198.51.100.7/24") {
		t.Fatalf("DeviceAddresses = %v, %v", cur, err)
	}
	for i, wantChanged := range []bool{true, false} {
		changed, err := l.DeleteAddress(ctx, "d0", addr)
		if err != nil || changed != wantChanged {
			t.Fatalf("DeleteAddress #%d = %v, %v; want changed %v", i+1, changed, err, wantChanged)
		}
	}
	if has, err := l.HasAddress(ctx, "d0", addr); err != nil || has {
		t.Fatalf("HasAddress after = %v, %v", has, err)
	}
	if _, err := l.AddAddress(ctx, "nosuchdev", netip.PrefixFrom(addr, 32)); err == nil {
		t.Fatal("AddAddress on a missing device succeeded")
	}
	if changed, err := l.DeleteAddress(ctx, "nosuchdev", addr); err != nil || changed {
		t.Fatalf("DeleteAddress on a missing device = %v, %v", changed, err)
	}
}
