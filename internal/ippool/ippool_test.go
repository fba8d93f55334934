package ippool

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/corral/corral/internal/config"
)

func newPool(t *testing.T, cidr, gw string) (*config.Network, *Pool) {
	t.Helper()
	n := &config.Network{Network: cidr, Gateway: gw}
	p, err := Initialize(n)
	if err != nil {
		t.Fatal(err)
	}
	p.Update(n)
	return n, p
}

// TestInitializeReservesNetworkBroadcastGateway checks the maps of a new
// network as Ganeti writes them.
func TestInitializeReservesNetworkBroadcastGateway(t *testing.T) {
	n, p := newPool(t, "192.0.2.0/29", "192.0.2.1")
	if n.ExtReservations != "11000001" || n.Reservations != "00000000" {
		t.Fatalf("maps %q %q", n.ExtReservations, n.Reservations)
	}
	if p.FreeCount() != 5 || p.ReservedCount() != 3 || p.Map() != "XX.....X" {
		t.Fatalf("free %d reserved %d map %s", p.FreeCount(), p.ReservedCount(), p.Map())
	}
	got := strings.Join(p.ExternalReservations(), ",")
	if got != "192.0.2.0,192.0.2.1,192.0.2.7" {
		t.Fatalf("external %s", got)
	}
}

// TestTakeReleaseReserve walks addresses through the pool.
func TestTakeReleaseReserve(t *testing.T) {
	n, p := newPool(t, "10.1.0.0/30", "")
	a, err := p.Take()
	if err != nil || a != "10.1.0.1" {
		t.Fatalf("first %s %v", a, err)
	}
	b, err := p.Take()
	if err != nil || b != "10.1.0.2" {
		t.Fatalf("second %s %v", b, err)
	}
	if _, err := p.Take(); err == nil || err.Error() != "10.1.0.0/30 is full" {
		t.Fatalf("full pool: %v", err)
	}
	if err := p.Reserve(a, false); err == nil || err.Error() != "IP 10.1.0.1 is already used by an instance" {
		t.Fatalf("double reserve: %v", err)
	}
	if err := p.Release(a, false); err != nil {
		t.Fatal(err)
	}
	if err := p.Release(a, false); err == nil || err.Error() != "IP 10.1.0.1 is not used by an instance" {
		t.Fatalf("double release: %v", err)
	}
	if err := p.Release(a, true); err == nil || err.Error() != "IP 10.1.0.1 is not externally reserved" {
		t.Fatalf("external release: %v", err)
	}
	if err := p.Reserve("10.1.0.9", true); err == nil || err.Error() != "10.1.0.0/30 does not contain 10.1.0.9" {
		t.Fatalf("outside: %v", err)
	}
	p.Update(n)
	q, err := Open(n)
	if err != nil {
		t.Fatal(err)
	}
	if q.Map() != "X.XX" {
		t.Fatalf("reopened map %s", q.Map())
	}
}

// TestOpenRefuses covers the sizes and maps Ganeti refuses.
func TestOpenRefuses(t *testing.T) {
	for _, c := range []struct{ net, res, want string }{
		{"10.0.0.0/15", "", "A big network with 131072 host(s)"},
		{"10.0.0.0/31", "", "A network with only 2 host(s) is too small"},
		{"10.0.0.1/24", "", "has host bits set"},
		{"fe80::/64", "", "Invalid IPv4 network"},
		{"10.0.0.0/30", "000", "has 3 entries"},
		{"10.0.0.0/30", "0a00", "characters other than 0 and 1"},
	} {
		_, err := Open(&config.Network{Network: c.net, Reservations: c.res})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s %q: %v, want %q", c.net, c.res, err, c.want)
		}
	}
	if _, err := Initialize(&config.Network{Network: "10.0.0.0/30", Gateway: "10.0.0.0"}); err == nil ||
		err.Error() != "IP 10.0.0.0 is already externally reserved" {
		t.Errorf("gateway on the network address: %v", err)
	}
}

// FuzzPool feeds arbitrary subnets, maps and addresses: Open either
// refuses or yields a pool whose counts add up, whose map round-trips,
// and whose operations never panic nor touch addresses outside it.
func FuzzPool(f *testing.F) {
	f.Add("192.0.2.0/28", "", "192.0.2.5", uint8(3))
	f.Add("10.0.0.0/30", "0101", "10.0.0.3", uint8(0))
	f.Add("10.0.0.0/16", "", "10.0.255.255", uint8(1))
	f.Add("1.2.3.4/32", "1", "1.2.3.4", uint8(2))
	f.Add("::/0", "", "::1", uint8(2))
	f.Fuzz(func(t *testing.T, cidr, res, ip string, takes uint8) {
		n := &config.Network{Network: cidr, Reservations: res}
		p, err := Open(n)
		if err != nil {
			return
		}
		size := 1 << (32 - p.Prefix().Bits())
		if p.FreeCount()+p.ReservedCount() != size || len(p.Map()) != size {
			t.Fatalf("counts %d+%d != %d", p.FreeCount(), p.ReservedCount(), size)
		}
		if p.Contains(ip) {
			if _, err := netip.ParseAddr(ip); err != nil {
				t.Fatalf("contains unparsable %q", ip)
			}
		}
		before := p.ReservedCount()
		if err := p.Reserve(ip, true); err == nil {
			if !p.Contains(ip) || p.ReservedCount() < before {
				t.Fatalf("reserved %q outside or lost a reservation", ip)
			}
			if err := p.Release(ip, true); err != nil {
				t.Fatalf("release after reserve: %v", err)
			}
		}
		for range takes % 8 {
			a, err := p.Take()
			if err != nil {
				if p.FreeCount() != 0 {
					t.Fatalf("take failed with %d free: %v", p.FreeCount(), err)
				}
				break
			}
			if !p.Contains(a) {
				t.Fatalf("took %s outside %s", a, p.Prefix())
			}
		}
		p.Update(n)
		q, err := Open(n)
		if err != nil || q.Map() != p.Map() {
			t.Fatalf("round trip: %v", err)
		}
	})
}

// BenchmarkTakeNearlyFull16 measures a create's pool work on the biggest
// pool Ganeti allows (a /16) with only its last host address free, the
// worst case of the scan: read the maps, take the address, write them back.
func BenchmarkTakeNearlyFull16(b *testing.B) {
	size := 1 << 16
	used := strings.Repeat("1", size-2) + "00"
	n := &config.Network{Network: "10.0.0.0/16", Reservations: used,
		ExtReservations: "1" + strings.Repeat("0", size-2) + "1"}
	for b.Loop() {
		n.Reservations = used
		p, err := Open(n)
		if err != nil {
			b.Fatal(err)
		}
		if a, err := p.Take(); err != nil || a != "10.0.255.254" {
			b.Fatal(a, err)
		}
		p.Update(n)
	}
}
