// Package ippool manages a network's IPv4 address pool as Ganeti does: one
// flag per address of the subnet, in two maps kept on the network object
// as strings of '0' and '1' — addresses instances use, and addresses
// reserved outside the cluster (network, broadcast, gateway, and what the
// operator reserves). An address is free when neither map holds it.
package ippool

import (
	"fmt"
	"net/netip"
	"strings"

	"github.com/corral/corral/internal/config"
	"github.com/corral/corral/internal/ecode"
)

// Ganeti's limits on the size of a pool: from a /16 to a /30.
const (
	MinPrefixLen = 16 // the biggest network
	MaxPrefixLen = 30 // the smallest network
)

// ParseNetwork reads an IPv4 subnet in CIDR notation with no host bits set.
func ParseNetwork(s string) (netip.Prefix, error) {
	p, err := netip.ParsePrefix(strings.TrimSpace(s))
	if err != nil || !p.Addr().Is4() {
		return netip.Prefix{}, ecode.Errorf(ecode.Inval, "Invalid IPv4 network '%s'", s)
	}
	if p.Masked() != p {
		return netip.Prefix{}, ecode.Errorf(ecode.Inval, "Invalid IPv4 network '%s': %s has host bits set", s, s)
	}
	return p, nil
}

// ParseNetwork6 reads an IPv6 subnet in CIDR notation with no host bits set.
func ParseNetwork6(s string) (netip.Prefix, error) {
	p, err := netip.ParsePrefix(strings.TrimSpace(s))
	if err != nil || !p.Addr().Is6() || p.Addr().Is4In6() {
		return netip.Prefix{}, ecode.Errorf(ecode.Inval, "Invalid IPv6 network '%s'", s)
	}
	if p.Masked() != p {
		return netip.Prefix{}, ecode.Errorf(ecode.Inval, "Invalid IPv6 network '%s': %s has host bits set", s, s)
	}
	return p, nil
}

// ParseAddr4 reads one IPv4 address.
func ParseAddr4(s string) (netip.Addr, error) {
	a, err := netip.ParseAddr(s)
	if err != nil || !a.Is4() {
		return netip.Addr{}, ecode.Errorf(ecode.Inval, "Invalid IPv4 address '%s'", s)
	}
	return a, nil
}

// ParseAddr6 reads one IPv6 address.
func ParseAddr6(s string) (netip.Addr, error) {
	a, err := netip.ParseAddr(s)
	if err != nil || !a.Is6() || a.Is4In6() {
		return netip.Addr{}, ecode.Errorf(ecode.Inval, "Invalid IPv6 address '%s'", s)
	}
	return a, nil
}

// Pool is a network's address pool, read from and written back to the
// network object (Update).
type Pool struct {
	prefix netip.Prefix
	base   uint32 // the network address as a number
	used   []byte // '0' or '1' per address: used by an instance
	ext    []byte // '0' or '1' per address: reserved externally
}

// Error is a refused pool operation (Ganeti's AddressPoolError); units
// wrap it in their own error class.
type Error struct{ Msg string }

func (e *Error) Error() string { return e.Msg }

func poolErr(format string, args ...any) error { return &Error{Msg: fmt.Sprintf(format, args...)} }

// Open reads the pool of n. Missing maps (a network being created) start
// empty; maps of the wrong length or with other characters than '0' and
// '1' are a corrupt configuration.
func Open(n *config.Network) (*Pool, error) {
	prefix, err := ParseNetwork(n.Network)
	if err != nil {
		return nil, err
	}
	size := 1 << (32 - prefix.Bits())
	if prefix.Bits() < MinPrefixLen {
		return nil, poolErr("A big network with %d host(s) is currently not supported. please specify at most a /%d network", size, MinPrefixLen)
	}
	if prefix.Bits() > MaxPrefixLen {
		return nil, poolErr("A network with only %d host(s) is too small, please specify at least a /%d network", size, MaxPrefixLen)
	}
	p := &Pool{prefix: prefix, base: toU32(prefix.Addr())}
	if p.used, err = readMap(n.Reservations, size, "reservations"); err != nil {
		return nil, err
	}
	if p.ext, err = readMap(n.ExtReservations, size, "external reservations"); err != nil {
		return nil, err
	}
	return p, nil
}

func readMap(s string, size int, what string) ([]byte, error) {
	if s == "" {
		return []byte(strings.Repeat("0", size)), nil
	}
	if len(s) != size {
		return nil, poolErr("The %s map has %d entries for a network of %d addresses", what, len(s), size)
	}
	if strings.Trim(s, "01") != "" {
		return nil, poolErr("The %s map holds characters other than 0 and 1", what)
	}
	return []byte(s), nil
}

// Initialize opens the pool of a new network and reserves, externally,
// its network and broadcast addresses and its gateway.
func Initialize(n *config.Network) (*Pool, error) {
	n.Reservations, n.ExtReservations = "", ""
	p, err := Open(n)
	if err != nil {
		return nil, err
	}
	last := p.addrAt(len(p.used) - 1)
	for _, a := range []netip.Addr{p.prefix.Addr(), last} {
		if err := p.Reserve(a.String(), true); err != nil {
			return nil, err
		}
	}
	if n.Gateway != "" {
		if err := p.Reserve(n.Gateway, true); err != nil {
			return nil, err
		}
	}
	return p, nil
}

func toU32(a netip.Addr) uint32 {
	b := a.As4()
	return uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
}

func (p *Pool) addrAt(i int) netip.Addr {
	v := p.base + uint32(i)
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
}

// Prefix is the pool's subnet.
func (p *Pool) Prefix() netip.Prefix { return p.prefix }

// Contains reports whether ip is an IPv4 address inside the subnet.
func (p *Pool) Contains(ip string) bool {
	a, err := netip.ParseAddr(ip)
	return err == nil && a.Is4() && p.prefix.Contains(a)
}

func (p *Pool) index(ip string) (int, error) {
	a, err := netip.ParseAddr(ip)
	if err != nil || !a.Is4() {
		return 0, poolErr("'%s' is not a valid IPv4 address", ip)
	}
	if !p.prefix.Contains(a) {
		return 0, poolErr("%s does not contain %s", p.prefix, a)
	}
	return int(toU32(a) - p.base), nil
}

func (p *Pool) mapOf(external bool) []byte {
	if external {
		return p.ext
	}
	return p.used
}

// IsReserved reports whether ip is held in the map chosen by external.
func (p *Pool) IsReserved(ip string, external bool) (bool, error) {
	i, err := p.index(ip)
	if err != nil {
		return false, err
	}
	return p.mapOf(external)[i] == '1', nil
}

// InUse reports whether ip is held in either map.
func (p *Pool) InUse(ip string) (bool, error) {
	i, err := p.index(ip)
	if err != nil {
		return false, err
	}
	return p.used[i] == '1' || p.ext[i] == '1', nil
}

// Reserve marks ip as used (by an instance, or externally).
func (p *Pool) Reserve(ip string, external bool) error {
	i, err := p.index(ip)
	if err != nil {
		return err
	}
	m := p.mapOf(external)
	if m[i] == '1' {
		if external {
			return poolErr("IP %s is already externally reserved", ip)
		}
		return poolErr("IP %s is already used by an instance", ip)
	}
	m[i] = '1'
	return nil
}

// Release frees ip in the map chosen by external.
func (p *Pool) Release(ip string, external bool) error {
	i, err := p.index(ip)
	if err != nil {
		return err
	}
	m := p.mapOf(external)
	if m[i] != '1' {
		if external {
			return poolErr("IP %s is not externally reserved", ip)
		}
		return poolErr("IP %s is not used by an instance", ip)
	}
	m[i] = '0'
	return nil
}

// Take reserves the lowest free address for an instance and returns it.
func (p *Pool) Take() (string, error) {
	for i := range p.used {
		if p.used[i] == '0' && p.ext[i] == '0' {
			p.used[i] = '1'
			return p.addrAt(i).String(), nil
		}
	}
	return "", poolErr("%s is full", p.prefix)
}

// FreeCount is the number of addresses in neither map.
func (p *Pool) FreeCount() int { return len(p.used) - p.ReservedCount() }

// ReservedCount is the number of addresses in either map.
func (p *Pool) ReservedCount() int {
	n := 0
	for i := range p.used {
		if p.used[i] == '1' || p.ext[i] == '1' {
			n++
		}
	}
	return n
}

// Map is Ganeti's picture of the pool: 'X' for a reserved address, '.'
// for a free one.
func (p *Pool) Map() string {
	b := make([]byte, len(p.used))
	for i := range p.used {
		if p.used[i] == '1' || p.ext[i] == '1' {
			b[i] = 'X'
		} else {
			b[i] = '.'
		}
	}
	return string(b)
}

// ExternalReservations lists the externally reserved addresses in order.
func (p *Pool) ExternalReservations() []string {
	out := []string{}
	for i, c := range p.ext {
		if c == '1' {
			out = append(out, p.addrAt(i).String())
		}
	}
	return out
}

// InstanceReservations lists the addresses marked used by instances, in
// order.
func (p *Pool) InstanceReservations() []string {
	out := []string{}
	for i, c := range p.used {
		if c == '1' {
			out = append(out, p.addrAt(i).String())
		}
	}
	return out
}

// Update writes the maps back to the network object.
func (p *Pool) Update(n *config.Network) {
	n.Reservations, n.ExtReservations = string(p.used), string(p.ext)
}
