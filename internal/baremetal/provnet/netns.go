package provnet

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/corral/corral/internal/ecode"
)

// netnsDir is where iproute2 keeps named network namespaces.
const netnsDir = "/run/netns"

// NetnsPath is the bind mount standing for the named namespace.
func NetnsPath(name string) string { return filepath.Join(netnsDir, name) }

// link is what the package reads of a network device.
type link struct {
	Name   string
	Kind   string // "bridge", "tun", "veth" ...
	Master string // the bridge it is attached to
	Up     bool
}

// ip runs iproute2 inside the namespace ("ip -n NS ...").
func (c *Config) ip(ctx context.Context, args ...string) ([]byte, error) {
	return runIP(ctx, append([]string{"-n", c.Netns}, args...)...)
}

func runIP(ctx context.Context, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, "ip", args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, ecode.ExecErrorf("ip %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return out, nil
}

// Ensure creates what is missing of the namespace and its bridges, with
// their addresses, and leaves what exists: it is safe to call at every
// start of corral-node and again at any time.
func (c *Config) Ensure(ctx context.Context) error {
	if _, err := os.Stat(NetnsPath(c.Netns)); errors.Is(err, fs.ErrNotExist) {
		if _, err := runIP(ctx, "netns", "add", c.Netns); err != nil {
			return err
		}
	} else if err != nil {
		return ecode.ExecErrorf("network namespace %s: %w", c.Netns, err)
	}
	if _, err := c.ip(ctx, "link", "set", "dev", "lo", "up"); err != nil {
		return err
	}
	links, err := c.links(ctx)
	if err != nil {
		return err
	}
	for i := range c.Networks {
		if err := c.ensureBridge(ctx, &c.Networks[i], links); err != nil {
			return err
		}
	}
	return nil
}

func (c *Config) links(ctx context.Context) (map[string]link, error) {
	out, err := c.ip(ctx, "-j", "-d", "link", "show")
	if err != nil {
		return nil, err
	}
	var raw []struct {
		IfName   string   `json:"ifname"`
		Flags    []string `json:"flags"`
		Master   string   `json:"master"`
		LinkInfo *struct {
			InfoKind string `json:"info_kind"`
		} `json:"linkinfo"`
	}
	if err := json.Unmarshal(out, &raw); err != nil {
		return nil, ecode.ExecErrorf("cannot parse ip's link list of %s: %w", c.Netns, err)
	}
	links := make(map[string]link, len(raw))
	for _, r := range raw {
		k := link{Name: r.IfName, Master: r.Master}
		for _, f := range r.Flags {
			k.Up = k.Up || f == "UP"
		}
		if r.LinkInfo != nil {
			k.Kind = r.LinkInfo.InfoKind
		}
		links[r.IfName] = k
	}
	return links, nil
}

func (c *Config) ensureBridge(ctx context.Context, n *Network, links map[string]link) error {
	br, ok := links[n.Bridge]
	switch {
	case !ok:
		if _, err := c.ip(ctx, "link", "add", "name", n.Bridge, "type", "bridge"); err != nil {
			return err
		}
	case br.Kind != "bridge":
		return ecode.Errorf(ecode.Exists, "network %s: %s exists in %s and is not a bridge", n.Name, n.Bridge, c.Netns)
	}
	if n.ipv6.IsValid() {
		// Without this sysctl a bridge with no port yet has no IPv6 at
		// all in some kernels' defaults; setting it is idempotent.
		if err := c.sysctl(ctx, "net.ipv6.conf."+n.Bridge+".disable_ipv6", "0"); err != nil {
			return err
		}
	}
	have, err := c.addresses(ctx, n.Bridge)
	if err != nil {
		return err
	}
	if !have[n.gateway.String()] {
		if _, err := c.ip(ctx, "addr", "add", n.gateway.String(), "dev", n.Bridge); err != nil {
			return err
		}
	}
	if n.ipv6.IsValid() && !have[n.ipv6.String()] {
		// nodad: the address is usable at once, so dnsmasq can send
		// router advertisements from it without waiting for DAD.
		if _, err := c.ip(ctx, "addr", "add", n.ipv6.String(), "dev", n.Bridge, "nodad"); err != nil {
			return err
		}
	}
	if !br.Up {
		if _, err := c.ip(ctx, "link", "set", "dev", n.Bridge, "up"); err != nil {
			return err
		}
	}
	return nil
}

func (c *Config) sysctl(ctx context.Context, key, value string) error {
	path := filepath.Join("/proc/sys", strings.ReplaceAll(key, ".", "/"))
	_, err := runIP(ctx, "netns", "exec", c.Netns, "sh", "-c", `printf %s "$1" > "$2"`, "sysctl", value, path)
	return err
}

// addresses lists the addresses (with prefix length) on a device.
func (c *Config) addresses(ctx context.Context, dev string) (map[string]bool, error) {
	out, err := c.ip(ctx, "-j", "addr", "show", "dev", dev)
	if err != nil {
		return nil, err
	}
	var raw []struct {
		AddrInfo []struct {
			Local     string `json:"local"`
			PrefixLen int    `json:"prefixlen"`
		} `json:"addr_info"`
	}
	if err := json.Unmarshal(out, &raw); err != nil {
		return nil, ecode.ExecErrorf("cannot parse ip's address list of %s: %w", dev, err)
	}
	have := map[string]bool{}
	for _, r := range raw {
		for _, a := range r.AddrInfo {
			have[fmt.Sprintf("%s/%d", a.Local, a.PrefixLen)] = true
		}
	}
	return have, nil
}

// Attach moves a machine's port (a tap or veth in the namespace) to the
// network's bridge and brings it up. Attaching a port to the bridge it is
// on changes nothing.
func (c *Config) Attach(ctx context.Context, portID, network string) error {
	if err := checkIfName(portID); err != nil {
		return err
	}
	n, err := c.Network(network)
	if err != nil {
		return err
	}
	links, err := c.links(ctx)
	if err != nil {
		return err
	}
	port, ok := links[portID]
	if !ok {
		return ecode.Errorf(ecode.NoEnt, "port %s does not exist in network namespace %s", portID, c.Netns)
	}
	if port.Kind == "bridge" {
		return ecode.Errorf(ecode.Inval, "port %s is a bridge, not a machine's port", portID)
	}
	if port.Master != n.Bridge {
		if _, err := c.ip(ctx, "link", "set", "dev", portID, "master", n.Bridge); err != nil {
			return err
		}
	}
	if !port.Up {
		if _, err := c.ip(ctx, "link", "set", "dev", portID, "up"); err != nil {
			return err
		}
	}
	return nil
}

// PortNetwork returns the network a port is attached to ("" when it is on
// no configured bridge).
func (c *Config) PortNetwork(ctx context.Context, portID string) (string, error) {
	links, err := c.links(ctx)
	if err != nil {
		return "", err
	}
	port, ok := links[portID]
	if !ok {
		return "", ecode.Errorf(ecode.NoEnt, "port %s does not exist in network namespace %s", portID, c.Netns)
	}
	for _, n := range c.Networks {
		if n.Bridge == port.Master {
			return n.Name, nil
		}
	}
	return "", nil
}

// DeleteNetns removes the namespace and everything in it (bridges, the
// machines' ports). Processes still running in it keep it alive: stop the
// Service first. A namespace that does not exist is not an error.
func (c *Config) DeleteNetns(ctx context.Context) error {
	if _, err := os.Stat(NetnsPath(c.Netns)); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	_, err := runIP(ctx, "netns", "del", c.Netns)
	return err
}

// inNetns runs fn on an OS thread switched into the namespace. Sockets
// fn creates stay in the namespace after the thread switches back. When
// switching back fails the thread is left locked, so Go ends it rather
// than run other goroutines in the wrong namespace.
func inNetns(path string, fn func() error) error {
	target, err := os.Open(path)
	if err != nil {
		return ecode.ExecErrorf("network namespace %s: %w", path, err)
	}
	defer target.Close()
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		self, err := os.Open(fmt.Sprintf("/proc/self/task/%d/ns/net", unix.Gettid()))
		if err != nil {
			runtime.UnlockOSThread()
			errc <- ecode.ExecErrorf("this thread's network namespace: %w", err)
			return
		}
		defer self.Close()
		if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			errc <- ecode.ExecErrorf("entering network namespace %s: %w", path, err)
			return
		}
		ferr := fn()
		if err := unix.Setns(int(self.Fd()), unix.CLONE_NEWNET); err != nil {
			// Stay locked: the thread dies with this goroutine.
			errc <- errors.Join(ferr, ecode.ExecErrorf("leaving network namespace %s: %w", path, err))
			return
		}
		runtime.UnlockOSThread()
		errc <- ferr
	}()
	return <-errc
}
