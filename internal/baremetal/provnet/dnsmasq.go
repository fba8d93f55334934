package provnet

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/corral/corral/internal/atomicfile"
	"github.com/corral/corral/internal/ecode"
)

// leaseTime is how long a DHCP lease lasts: a machine's ramdisk lives
// minutes, and a rescued machine moving network asks again anyway.
const leaseTime = "1h"

// DHCPHostsDir is where the per-machine dhcp-host files live: dnsmasq
// answers only the MACs listed there (it reads new files by inotify, and
// forgets removed ones on SIGHUP).
func (s *Service) DHCPHostsDir() string { return filepath.Join(s.dnsmasqDir(), "hosts") }

func (s *Service) dnsmasqDir() string { return filepath.Join(s.stateDir, "dnsmasq") }

func (s *Service) dnsmasqFile(n *Network, ext string) string {
	return filepath.Join(s.dnsmasqDir(), n.Name+"."+ext)
}

// LeasesFile is dnsmasq's lease file of a booting network.
func (s *Service) LeasesFile(network string) (string, error) {
	n, err := s.cfg.Network(network)
	if err != nil {
		return "", err
	}
	if !n.Boot {
		return "", ecode.Errorf(ecode.State, "network %s runs no DHCP (it does not boot machines)", network)
	}
	return s.dnsmasqFile(n, "leases"), nil
}

// dnsmasqConfig is the configuration of the network's dnsmasq: DHCP for
// the known MACs only (the ones PrepareBoot listed), iPXE clients chained
// to the boot server's script, router advertisements for the bridge's
// IPv6 prefix, and no DNS.
func (s *Service) dnsmasqConfig(n *Network) string {
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }
	w("# dnsmasq of bare-metal network %s (written by corral-node; rewritten at every start)", n.Name)
	w("interface=%s", n.Bridge)
	w("bind-dynamic")
	w("except-interface=lo")
	w("port=0")
	w("no-resolv")
	w("no-hosts")
	w("pid-file=%s", s.dnsmasqFile(n, "pid"))
	w("dhcp-leasefile=%s", s.dnsmasqFile(n, "leases"))
	w("log-facility=%s", s.dnsmasqFile(n, "log"))
	w("log-dhcp")
	w("dhcp-authoritative")
	// The network is ours and every address in the range is dnsmasq's
	// to give: skip the ICMP probe that delays each new offer by ~3 s.
	w("no-ping")
	mask := net.CIDRMask(n.gateway.Bits(), 32)
	w("dhcp-range=%s,%s,%s,%s", n.start, n.end, net.IP(mask).String(), leaseTime)
	w("dhcp-option=option:router,%s", n.Gateway())
	w("dhcp-hostsdir=%s", s.DHCPHostsDir())
	w("dhcp-ignore=tag:!known")
	w("dhcp-match=set:ipxe,175")
	w("dhcp-boot=tag:ipxe,%s", s.chainURL(n))
	if n.ipv6.IsValid() {
		w("enable-ra")
		w("dhcp-range=::,constructor:%s,ra-only", n.Bridge)
	}
	return b.String()
}

// dhcpHostLine is a machine's dhcp-host entry: the MAC alone makes it
// "known", and it gets an address from the range.
func dhcpHostLine(mac string) string { return mac + "\n" }

// startDHCP (re)writes the network's dnsmasq configuration and starts
// dnsmasq in the namespace, unless one runs with the same configuration.
func (s *Service) startDHCP(ctx context.Context, n *Network) error {
	conf := s.dnsmasqFile(n, "conf")
	want := s.dnsmasqConfig(n)
	if pid, ok := s.dnsmasqPID(n); ok {
		if old, err := os.ReadFile(conf); err == nil && string(old) == want {
			return nil
		}
		if err := stopPID(ctx, pid, conf); err != nil {
			return err
		}
	}
	if err := atomicfile.WriteFile(conf, []byte(want), 0o644); err != nil {
		return ecode.ExecErrorf("dnsmasq configuration of %s: %w", n.Name, err)
	}
	// dnsmasq daemonizes; its first process exits once the daemon runs or
	// failed, with the reason on stderr.
	cmd := exec.CommandContext(ctx, "ip", "netns", "exec", s.cfg.Netns, "dnsmasq", "--conf-file="+conf)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return ecode.ExecErrorf("dnsmasq of network %s did not start: %w: %s", n.Name, err, strings.TrimSpace(out.String()))
	}
	if _, ok := s.dnsmasqPID(n); !ok {
		return ecode.ExecErrorf("dnsmasq of network %s exited after starting: %s", n.Name, strings.TrimSpace(out.String()))
	}
	return nil
}

// dnsmasqPID returns the pid of the network's dnsmasq when it runs: the
// pid in its pid file must be a live dnsmasq reading this configuration.
func (s *Service) dnsmasqPID(n *Network) (int, bool) {
	return pidRunning(s.dnsmasqFile(n, "pid"), s.dnsmasqFile(n, "conf"))
}

func pidRunning(pidFile, marker string) (int, bool) {
	data, err := os.ReadFile(pidFile)
	if err != nil {
		return 0, false
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil || pid <= 0 {
		return 0, false
	}
	return pid, processUses(pid, marker)
}

// processUses reports whether pid is alive (not a zombie) and has marker
// on its command line, so a reused pid is not taken for ours.
func processUses(pid int, marker string) bool {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 || i+2 >= len(stat) || stat[i+2] == 'Z' || stat[i+2] == 'X' {
		return false
	}
	cmdline, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	return err == nil && bytes.Contains(cmdline, []byte(marker))
}

// stopPID ends the process (SIGTERM, then SIGKILL after 5 s) and waits
// until it is gone.
func stopPID(ctx context.Context, pid int, marker string) error {
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil && !errors.Is(err, syscall.ESRCH) {
		return ecode.ExecErrorf("stopping process %d: %w", pid, err)
	}
	deadline := time.Now().Add(5 * time.Second)
	killed := false
	for processUses(pid, marker) {
		if time.Now().After(deadline) {
			if killed {
				return ecode.ExecErrorf("process %d is still running after SIGKILL", pid)
			}
			syscall.Kill(pid, syscall.SIGKILL)
			killed, deadline = true, time.Now().Add(5*time.Second)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for process %d to stop: %w", pid, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
	return nil
}

// stopDHCP stops the network's dnsmasq and removes its pid file; leases
// stay for the record.
func (s *Service) stopDHCP(ctx context.Context, n *Network) error {
	if pid, ok := s.dnsmasqPID(n); ok {
		if err := stopPID(ctx, pid, s.dnsmasqFile(n, "conf")); err != nil {
			return fmt.Errorf("dnsmasq of network %s: %w", n.Name, err)
		}
	}
	if err := os.Remove(s.dnsmasqFile(n, "pid")); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return ecode.ExecErrorf("dnsmasq pid file: %w", err)
	}
	return nil
}

// reloadDHCP makes every running dnsmasq read its hosts directory again
// (removed machines are forgotten only then).
func (s *Service) reloadDHCP() error {
	var errs []error
	for _, n := range s.cfg.BootNetworks() {
		if pid, ok := s.dnsmasqPID(n); ok {
			if err := syscall.Kill(pid, syscall.SIGHUP); err != nil && !errors.Is(err, syscall.ESRCH) {
				errs = append(errs, ecode.ExecErrorf("reloading dnsmasq of %s: %w", n.Name, err))
			}
		}
	}
	return errors.Join(errs...)
}

// Lease is one line of a dnsmasq lease file.
type Lease struct {
	MAC string
	IP  netip.Addr
}

// Leases reads the network's current DHCP leases.
func (s *Service) Leases(network string) ([]Lease, error) {
	path, err := s.LeasesFile(network)
	if err != nil {
		return nil, err
	}
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, ecode.ExecErrorf("leases of %s: %w", network, err)
	}
	return parseLeases(data), nil
}

// parseLeases reads dnsmasq's lease lines "EXPIRY MAC IP NAME CLIENTID";
// lines it cannot read (the DHCPv6 "duid" line) are skipped.
func parseLeases(data []byte) []Lease {
	var out []Lease
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) < 3 {
			continue
		}
		mac, err := net.ParseMAC(f[1])
		if err != nil || len(mac) != 6 {
			continue
		}
		ip, err := netip.ParseAddr(f[2])
		if err != nil {
			continue
		}
		out = append(out, Lease{MAC: mac.String(), IP: ip})
	}
	return out
}
