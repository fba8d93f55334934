package agent

import (
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// DHCPNetwork is the ramdisk's network: every NIC is brought up and the
// ones with a link get an address from busybox's udhcpc, whose script
// configures it.
type DHCPNetwork struct {
	// Script is udhcpc's hook script (the ramdisk's
	// /etc/udhcpc/default.script).
	Script string
	// SysNet is /sys/class/net.
	SysNet string
	// Console receives the commands' output.
	Console io.Writer
	// LinkWait is how long a NIC may take to report its link.
	LinkWait time.Duration

	linked []string
}

// Up implements Network.
func (d *DHCPNetwork) Up() ([]string, string, error) {
	ents, err := os.ReadDir(d.SysNet)
	if err != nil {
		return nil, "", fmt.Errorf("listing NICs: %w", err)
	}
	var nics, macs []string
	for _, e := range ents {
		name := e.Name()
		mac, err := os.ReadFile(filepath.Join(d.SysNet, name, "address"))
		m := strings.TrimSpace(string(mac))
		if name == "lo" || err != nil || m == "" || m == "00:00:00:00:00:00" {
			continue
		}
		nics = append(nics, name)
		macs = append(macs, m)
	}
	sort.Strings(nics)
	if len(nics) == 0 {
		return nil, "", fmt.Errorf("no network interface in %s", d.SysNet)
	}
	_ = d.run("ip", "link", "set", "lo", "up")
	for _, n := range nics {
		if err := d.run("ip", "link", "set", n, "up"); err != nil {
			return macs, "", err
		}
	}
	deadline := time.Now().Add(d.LinkWait)
	for {
		d.linked = d.linked[:0]
		for _, n := range nics {
			if c, _ := os.ReadFile(filepath.Join(d.SysNet, n, "carrier")); strings.TrimSpace(string(c)) == "1" {
				d.linked = append(d.linked, n)
			}
		}
		if len(d.linked) == len(nics) || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if len(d.linked) == 0 {
		return macs, "", fmt.Errorf("no NIC has a link")
	}
	d.dhcp()
	return macs, firstIPv4(d.linked), nil
}

// Redo implements Network.
func (d *DHCPNetwork) Redo() error {
	for _, n := range d.linked {
		_ = d.run("ip", "addr", "flush", "dev", n)
	}
	d.dhcp()
	if firstIPv4(d.linked) == "" {
		return fmt.Errorf("no address after DHCP on %v", d.linked)
	}
	return nil
}

func (d *DHCPNetwork) dhcp() {
	for _, n := range d.linked {
		// -n: give up when no lease comes (another NIC may get one);
		// -q: exit once configured (the agent's life is short).
		_ = d.run("udhcpc", "-i", n, "-s", d.Script, "-n", "-q", "-t", "4", "-T", "2", "-A", "1")
	}
}

func (d *DHCPNetwork) run(name string, args ...string) error {
	cmd := exec.Command(name, args...)
	cmd.Stdout, cmd.Stderr = d.Console, d.Console
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s %s: %w", name, strings.Join(args, " "), err)
	}
	return nil
}

func firstIPv4(nics []string) string {
	for _, n := range nics {
		ifi, err := net.InterfaceByName(n)
		if err != nil {
			continue
		}
		addrs, _ := ifi.Addrs()
		for _, a := range addrs {
			if ipn, ok := a.(*net.IPNet); ok && ipn.IP.To4() != nil {
				return ipn.IP.String()
			}
		}
	}
	return ""
}

// NoNetwork is a network that is already up: it reports the MACs and
// address of the machine's interfaces and redoes nothing.
type NoNetwork struct{}

// Up implements Network.
func (NoNetwork) Up() ([]string, string, error) {
	ifs, err := net.Interfaces()
	if err != nil {
		return nil, "", fmt.Errorf("listing NICs: %w", err)
	}
	var macs, names []string
	for _, i := range ifs {
		if i.Flags&net.FlagLoopback != 0 || len(i.HardwareAddr) == 0 {
			continue
		}
		macs = append(macs, i.HardwareAddr.String())
		names = append(names, i.Name)
	}
	return macs, firstIPv4(names), nil
}

// Redo implements Network.
func (NoNetwork) Redo() error { return nil }
