// Package provnet runs the networks bare-metal machines boot on, inside a
// network namespace that corral-node owns: one Linux bridge per named
// network (provisioning, rescue, tenant ...), and on each network that
// boots machines a dnsmasq (DHCP for the machines it was told to boot, IPv6
// router advertisements, iPXE chain loading), an HTTP server of iPXE scripts
// and the agent ramdisk, and a TCP forwarder to the Bare Metal API on the
// host. A machine's port (the "switch port" Ironic's local_link_connection
// names) is a tap or veth in the namespace; Attach moves it between bridges,
// which is how a rescue moves a machine to the rescue network and back.
// Connections from the host to agents are opened inside the namespace by
// DialContext.
package provnet

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"regexp"

	"github.com/corral/corral/internal/ecode"
)

// Defaults of Config.
const (
	DefaultNetns    = "corral-bm"
	DefaultHTTPPort = 8088
	DefaultAPIPort  = 6385
	maxIfName       = 15
)

// Config describes the namespace and its networks: corral-node reads it
// from the file named by --baremetal-networks.
type Config struct {
	// Netns is the network namespace's name (default corral-bm).
	Netns string `json:"netns,omitempty"`
	// HTTPPort is where the boot HTTP server listens on each booting
	// network's gateway address (default 8088).
	HTTPPort int `json:"http_port,omitempty"`
	// APIPort is where the forwarder to the Bare Metal API listens on
	// each booting network's gateway address (default 6385).
	APIPort int `json:"api_port,omitempty"`
	// APITarget is the Bare Metal API as the host reaches it
	// (host:port, e.g. 127.0.0.1:6385). Empty: no forwarder.
	APITarget string `json:"api_target,omitempty"`
	// Forwards are more forwarders on each booting network's gateway, to
	// services on the host the agents need besides the API: the image
	// server a deploy's image_source names, for one.
	Forwards []Forward `json:"forwards,omitempty"`
	Networks []Network `json:"networks"`
}

// Forward passes the connections machines open to Port on a booting
// network's gateway to Target (IP:port) as the host reaches it.
type Forward struct {
	Port   int    `json:"port"`
	Target string `json:"target"`
}

// Network is one bridge in the namespace.
type Network struct {
	// Name is how callers name the network (provisioning, rescue,
	// tenant ...).
	Name string `json:"name"`
	// Bridge is the Linux bridge's name (default "bm-" + Name).
	Bridge string `json:"bridge,omitempty"`
	// Address is the gateway's IPv4 address with its prefix length, e.g.
	// 10.88.0.1/24: the bridge's address, the DHCP router, and where the
	// boot server and the API forwarder listen.
	Address string `json:"address"`
	// IPv6 is the bridge's IPv6 address and prefix (e.g. fd00:88::1/64)
	// that router advertisements announce: iPXE waits about 13 s for
	// IPv6 configuration on a link without them.
	IPv6 string `json:"ipv6,omitempty"`
	// Boot makes the network boot machines: dnsmasq, the boot HTTP
	// server and the API forwarder run on it.
	Boot bool `json:"boot,omitempty"`
	// DHCPStart and DHCPEnd bound the leases handed out (default: host
	// .100 to .199 of the IPv4 subnet).
	DHCPStart string `json:"dhcp_start,omitempty"`
	DHCPEnd   string `json:"dhcp_end,omitempty"`

	gateway netip.Prefix
	ipv6    netip.Prefix
	start   netip.Addr
	end     netip.Addr
}

// Gateway is the network's gateway address.
func (n *Network) Gateway() netip.Addr { return n.gateway.Addr() }

var netNameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,31}$`)

// LoadConfig reads and checks a configuration file.
func LoadConfig(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, ecode.Errorf(ecode.Environ, "bare-metal networks file: %w", err)
	}
	c, err := ParseConfig(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return c, nil
}

// ParseConfig decodes a configuration (JSON, unknown fields refused),
// fills in the defaults and checks it.
func ParseConfig(data []byte) (*Config, error) {
	var c Config
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		return nil, ecode.Errorf(ecode.Inval, "bare-metal networks: %w", err)
	}
	if dec.More() {
		return nil, ecode.Errorf(ecode.Inval, "bare-metal networks: data after the JSON object")
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return &c, nil
}

// Validate fills in defaults and checks every field; the parsed addresses
// are kept for the rest of the package.
func (c *Config) Validate() error {
	if c.Netns == "" {
		c.Netns = DefaultNetns
	}
	if !netNameRE.MatchString(c.Netns) {
		return ecode.Errorf(ecode.Inval, "netns %q: want lower-case letters, digits, '_' or '-' (at most 32)", c.Netns)
	}
	if c.HTTPPort == 0 {
		c.HTTPPort = DefaultHTTPPort
	}
	if c.APIPort == 0 {
		c.APIPort = DefaultAPIPort
	}
	for _, p := range []int{c.HTTPPort, c.APIPort} {
		if p < 1 || p > 65535 {
			return ecode.Errorf(ecode.Inval, "port %d is not between 1 and 65535", p)
		}
	}
	if c.HTTPPort == c.APIPort {
		return ecode.Errorf(ecode.Inval, "http_port and api_port are both %d", c.HTTPPort)
	}
	if c.APITarget != "" {
		if _, err := netip.ParseAddrPort(c.APITarget); err != nil {
			return ecode.Errorf(ecode.Inval, "api_target %q: want IP:port: %w", c.APITarget, err)
		}
	}
	if err := c.validateForwards(); err != nil {
		return err
	}
	if len(c.Networks) == 0 {
		return ecode.Errorf(ecode.Inval, "no networks are configured")
	}
	seen := map[string]bool{}
	for i := range c.Networks {
		n := &c.Networks[i]
		if err := n.validate(); err != nil {
			return err
		}
		for _, key := range []string{"name " + n.Name, "bridge " + n.Bridge} {
			if seen[key] {
				return ecode.Errorf(ecode.Inval, "network %s: %s is used twice", n.Name, key)
			}
			seen[key] = true
		}
		for _, o := range c.Networks[:i] {
			if o.gateway.Overlaps(n.gateway) {
				return ecode.Errorf(ecode.Inval, "networks %s and %s overlap (%s, %s)", o.Name, n.Name, o.gateway.Masked(), n.gateway.Masked())
			}
			if o.ipv6.IsValid() && n.ipv6.IsValid() && o.ipv6.Overlaps(n.ipv6) {
				return ecode.Errorf(ecode.Inval, "networks %s and %s have overlapping IPv6 prefixes", o.Name, n.Name)
			}
		}
	}
	return nil
}

func (n *Network) validate() error {
	if !netNameRE.MatchString(n.Name) {
		return ecode.Errorf(ecode.Inval, "network name %q: want lower-case letters, digits, '_' or '-' (at most 32)", n.Name)
	}
	if n.Bridge == "" {
		n.Bridge = "bm-" + n.Name
	}
	if err := checkIfName(n.Bridge); err != nil {
		return fmt.Errorf("network %s: %w", n.Name, err)
	}
	gw, err := netip.ParsePrefix(n.Address)
	if err != nil || !gw.Addr().Is4() {
		return ecode.Errorf(ecode.Inval, "network %s: address %q is not IPv4 with a prefix length (10.88.0.1/24)", n.Name, n.Address)
	}
	if gw.Bits() < 8 || gw.Bits() > 29 || gw.Addr() == gw.Masked().Addr() || isBroadcast(gw, gw.Addr()) {
		return ecode.Errorf(ecode.Inval, "network %s: %s is not a host address in a /8 to /29", n.Name, n.Address)
	}
	n.gateway = gw
	if n.IPv6 != "" {
		p, err := netip.ParsePrefix(n.IPv6)
		if err != nil || !p.Addr().Is6() || p.Addr().Is4In6() || p.Bits() != 64 {
			return ecode.Errorf(ecode.Inval, "network %s: ipv6 %q is not an IPv6 address with /64 (router advertisements need one)", n.Name, n.IPv6)
		}
		n.ipv6 = p
	}
	if !n.Boot {
		if n.DHCPStart != "" || n.DHCPEnd != "" {
			return ecode.Errorf(ecode.Inval, "network %s: a DHCP range needs boot: true (only booting networks run DHCP)", n.Name)
		}
		return nil
	}
	return n.validateRange()
}

func (n *Network) validateRange() error {
	base := n.gateway.Masked().Addr().As4()
	start, end := base, base
	if n.gateway.Bits() <= 24 {
		start[3], end[3] = 100, 199
	} else {
		// A small subnet: every host address but the gateway's side.
		start[3] |= 2
		size := byte(1<<(32-n.gateway.Bits())) - 2
		end[3] |= size
	}
	n.start, n.end = netip.AddrFrom4(start), netip.AddrFrom4(end)
	for _, f := range []struct {
		s   string
		dst *netip.Addr
	}{{n.DHCPStart, &n.start}, {n.DHCPEnd, &n.end}} {
		if f.s == "" {
			continue
		}
		a, err := netip.ParseAddr(f.s)
		if err != nil || !a.Is4() {
			return ecode.Errorf(ecode.Inval, "network %s: DHCP bound %q is not an IPv4 address", n.Name, f.s)
		}
		*f.dst = a
	}
	for _, a := range []netip.Addr{n.start, n.end} {
		if !n.gateway.Contains(a) || a == n.gateway.Masked().Addr() || isBroadcast(n.gateway, a) {
			return ecode.Errorf(ecode.Inval, "network %s: DHCP bound %s is not a host address of %s", n.Name, a, n.gateway.Masked())
		}
	}
	if n.end.Less(n.start) {
		return ecode.Errorf(ecode.Inval, "network %s: DHCP range %s-%s ends before it starts", n.Name, n.start, n.end)
	}
	if !n.gateway.Addr().Less(n.start) && !n.end.Less(n.gateway.Addr()) {
		return ecode.Errorf(ecode.Inval, "network %s: DHCP range %s-%s holds the gateway %s", n.Name, n.start, n.end, n.gateway.Addr())
	}
	return nil
}

// isBroadcast reports whether a is the last address of p.
func isBroadcast(p netip.Prefix, a netip.Addr) bool {
	b := p.Masked().Addr().As4()
	hostBits := 32 - p.Bits()
	v := uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
	v |= 1<<hostBits - 1
	x := a.As4()
	return v == uint32(x[0])<<24|uint32(x[1])<<16|uint32(x[2])<<8|uint32(x[3])
}

// Network returns the named network.
func (c *Config) Network(name string) (*Network, error) {
	for i := range c.Networks {
		if c.Networks[i].Name == name {
			return &c.Networks[i], nil
		}
	}
	return nil, ecode.Errorf(ecode.NoEnt, "bare-metal network %q is not configured", name)
}

// BootNetworks returns the networks that boot machines.
func (c *Config) BootNetworks() []*Network {
	var out []*Network
	for i := range c.Networks {
		if c.Networks[i].Boot {
			out = append(out, &c.Networks[i])
		}
	}
	return out
}

// APIURL is the Bare Metal API as a machine on the network reaches it
// through the forwarder (scheme "http" or "https"): the agent's
// ipa-api-url.
func (c *Config) APIURL(network, scheme string) (string, error) {
	n, err := c.Network(network)
	if err != nil {
		return "", err
	}
	if !n.Boot || c.APITarget == "" {
		return "", ecode.Errorf(ecode.State, "network %s has no API forwarder (it needs boot: true and api_target)", network)
	}
	return fmt.Sprintf("%s://%s", scheme, netip.AddrPortFrom(n.Gateway(), uint16(c.APIPort))), nil
}

func checkIfName(name string) error {
	if name == "" || len(name) > maxIfName {
		return ecode.Errorf(ecode.Inval, "interface name %q: 1 to %d characters", name, maxIfName)
	}
	for i, r := range name {
		ok := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-' || r == '.' && i > 0
		if !ok || i == 0 && r == '-' {
			return ecode.Errorf(ecode.Inval, "interface name %q: letters, digits, '_', '-' or '.' only", name)
		}
	}
	return nil
}

// validateForwards checks each forward's port (not one the gateway already
// serves) and target.
func (c *Config) validateForwards() error {
	used := map[int]string{c.HTTPPort: "http_port", c.APIPort: "api_port"}
	for _, f := range c.Forwards {
		if f.Port < 1 || f.Port > 65535 {
			return ecode.Errorf(ecode.Inval, "forward port %d is not between 1 and 65535", f.Port)
		}
		if other, ok := used[f.Port]; ok {
			return ecode.Errorf(ecode.Inval, "forward port %d is also %s", f.Port, other)
		}
		used[f.Port] = "a forward's port"
		if _, err := netip.ParseAddrPort(f.Target); err != nil {
			return ecode.Errorf(ecode.Inval, "forward target %q: want IP:port: %w", f.Target, err)
		}
	}
	return nil
}
