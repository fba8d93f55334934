package nodeserver

import (
	"context"
	"fmt"
	"log"
	"log/slog"
	"net"
	"net/netip"
	"net/url"
	"path/filepath"

	"github.com/corral/corral/internal/baremetal/bootiso"
	"github.com/corral/corral/internal/baremetal/driver"
	"github.com/corral/corral/internal/baremetal/provnet"
	"github.com/corral/corral/internal/ecode"
	"github.com/corral/corral/internal/nodeapi"
)

// machineNetsDir is the directory under the node's state directory that
// holds the provisioning networks' state: dnsmasq's files, the DHCP hosts
// and the prepared PXE boots.
const machineNetsDir = "provnet"

// machineNets is what the machine RPCs use of the node's provisioning
// networks (a provnet.Service).
type machineNets interface {
	Config() *provnet.Config
	Start(ctx context.Context) error
	Close() error
	PrepareBoot(mac, cmdline string) error
	CleanUpBoot(mac string) error
	Attach(ctx context.Context, portID, network string) error
	DialContext(ctx context.Context, network, addr string) (net.Conn, error)
}

// openMachineNets makes the service of the networks in cfg (nil: this node
// has none); it runs from Run on.
func openMachineNets(stateDir, netsDir, ramdisk string, cfg *provnet.Config, logger *slog.Logger) (machineNets, error) {
	if cfg == nil {
		return nil, nil
	}
	if ramdisk != "" && !filepath.IsAbs(ramdisk) {
		abs, err := filepath.Abs(ramdisk)
		if err != nil {
			return nil, fmt.Errorf("agent ramdisk directory: %w", err)
		}
		ramdisk = abs
	}
	if len(cfg.BootNetworks()) > 0 && ramdisk == "" {
		return nil, ecode.Errorf(ecode.Environ, "the bare-metal networks boot machines but this node has no agent ramdisk: start corral-node with --agent-ramdisk DIR (made by scripts/build-agent-ramdisk.sh)")
	}
	if netsDir == "" {
		netsDir = filepath.Join(stateDir, machineNetsDir)
	}
	absState, err := filepath.Abs(netsDir)
	if err != nil {
		return nil, fmt.Errorf("bare-metal networks state directory: %w", err)
	}
	svc, err := provnet.New(cfg, provnet.Options{StateDir: absState, RamdiskDir: ramdisk,
		Logger: log.New(slogWriter{logger}, "", 0)})
	if err != nil {
		return nil, err
	}
	return svc, nil
}

// slogWriter passes the service's log lines to the daemon's log.
type slogWriter struct{ l *slog.Logger }

func (w slogWriter) Write(p []byte) (int, error) {
	w.l.Warn("bare-metal networks: " + string(trimNL(p)))
	return len(p), nil
}

func trimNL(p []byte) []byte {
	for len(p) > 0 && p[len(p)-1] == '\n' {
		p = p[:len(p)-1]
	}
	return p
}

// needMachineNets is the error of a PXE boot or network move on a node
// without provisioning networks.
func (s *Server) needMachineNets(what string) error {
	if s.nets != nil {
		return nil
	}
	return ecode.Errorf(ecode.Environ, "node %s has no bare-metal networks, needed to %s: start corral-node with --baremetal-networks FILE", s.name, what)
}

// knownNetwork refuses a network the node's configuration does not name:
// the caller's error, not the node's state.
func (s *Server) knownNetwork(name string) error {
	if _, err := s.nets.Config().Network(name); err != nil {
		return ecode.Errorf(ecode.Inval, "bare-metal network %q is not one of node %s's networks", name, s.name)
	}
	return nil
}

// doMachinePXEPrepare makes the machine's next boot (once) the agent's
// ramdisk over PXE on the named network: dnsmasq answers its MACs and the
// boot server gives them the ramdisk with a command line whose API URL is
// the node's forwarder on that network (the scheme of the conductor's URL,
// whose certificate the pin names).
func (s *Server) doMachinePXEPrepare(ctx context.Context, a nodeapi.MachineBootPrepareArgs) error {
	if err := s.needMachineNets("boot machines over PXE"); err != nil {
		return err
	}
	u, err := url.Parse(a.APIURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") {
		return ecode.Errorf(ecode.Inval, "the Bare Metal API URL %q is not an http(s) URL", a.APIURL)
	}
	if err := s.knownNetwork(a.Network); err != nil {
		return err
	}
	apiURL, err := s.nets.Config().APIURL(a.Network, u.Scheme)
	if err != nil {
		return ecode.Errorf(ecode.Inval, "machine %s cannot boot on network %s: %w", a.Machine, a.Network, err)
	}
	cmdline, err := bootiso.AgentCommandLine(apiURL, a.APICASHA256, a.KernelParams)
	if err != nil {
		return err
	}
	if len(a.Ports) == 0 {
		return ecode.Errorf(ecode.Inval, "machine %s has no ports: a PXE boot answers the machine's MACs", a.Machine)
	}
	d, err := machineDriver(a.MachineBMC)
	if err != nil {
		return err
	}
	for _, p := range a.Ports {
		if err := s.nets.PrepareBoot(p.MAC, cmdline); err != nil {
			return fmt.Errorf("machine %s: PXE boot of %s: %w", a.Machine, p.MAC, err)
		}
	}
	s.log.Info("machine PXE boot prepared", "machine", a.Machine, "network", a.Network, "ports", len(a.Ports))
	if err := d.SetBootDevice(ctx, driver.BootPXE, false); err != nil {
		return fmt.Errorf("machine %s: boot from the network: %w", a.Machine, err)
	}
	return nil
}

// doMachinePXECleanUp forgets the machine's MACs (no more DHCP answers or
// boot scripts) and makes it boot from its disk from now on.
func (s *Server) doMachinePXECleanUp(ctx context.Context, a nodeapi.MachineBootCleanUpArgs) error {
	if err := s.needMachineNets("clean up a PXE boot"); err != nil {
		return err
	}
	d, err := machineDriver(a.MachineBMC)
	if err != nil {
		return err
	}
	for _, p := range a.Ports {
		if err := s.nets.CleanUpBoot(p.MAC); err != nil {
			return fmt.Errorf("machine %s: PXE boot of %s: %w", a.Machine, p.MAC, err)
		}
	}
	if err := d.SetBootDevice(ctx, driver.BootDisk, true); err != nil {
		return fmt.Errorf("machine %s: boot from the disk: %w", a.Machine, err)
	}
	s.log.Info("machine PXE boot cleaned up", "machine", a.Machine)
	return nil
}

// machineNetwork moves the machine's wired ports (those with a port id)
// to the named network's bridge. The network is checked before any port
// moves.
func (s *Server) machineNetwork(ctx context.Context, a nodeapi.MachineNetworkArgs) (any, error) {
	if err := checkMachineID(a.Machine); err != nil {
		return nil, err
	}
	var wired []nodeapi.MachinePortRef
	for _, p := range a.Ports {
		if p.PortID != "" {
			wired = append(wired, p)
		}
	}
	if s.nets == nil && len(wired) == 0 {
		return nil, nil
	}
	if err := s.needMachineNets("move machines between networks"); err != nil {
		return nil, err
	}
	if err := s.knownNetwork(a.Network); err != nil {
		return nil, err
	}
	for _, p := range wired {
		if err := s.nets.Attach(ctx, p.PortID, a.Network); err != nil {
			return nil, fmt.Errorf("machine %s: port %s to network %s: %w", a.Machine, p.PortID, a.Network, err)
		}
	}
	s.log.Info("machine network", "machine", a.Machine, "network", a.Network, "ports", len(wired))
	return nil, nil
}

// agentDialer is the dialer of the agent at callback: the provisioning
// networks' when the callback's address is in one of them (the agent is a
// machine in the node's namespace), else nil (the host's network).
func (s *Server) agentDialer(callback string) func(ctx context.Context, network, addr string) (net.Conn, error) {
	if s.nets == nil {
		return nil
	}
	u, err := url.Parse(callback)
	if err != nil {
		return nil
	}
	ip, err := netip.ParseAddr(u.Hostname())
	if err != nil {
		return nil
	}
	ip = ip.Unmap()
	for _, n := range s.nets.Config().Networks {
		if p, err := netip.ParsePrefix(n.Address); err == nil && p.Masked().Contains(ip) {
			return s.nets.DialContext
		}
		if n.IPv6 == "" {
			continue
		}
		if p, err := netip.ParsePrefix(n.IPv6); err == nil && p.Masked().Contains(ip) {
			return s.nets.DialContext
		}
	}
	return nil
}
