package provnet

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strings"

	"github.com/corral/corral/internal/atomicfile"
	"github.com/corral/corral/internal/ecode"
)

// Ramdisk file names in Options.RamdiskDir, as
// scripts/build-agent-ramdisk.sh writes them.
const (
	RamdiskKernel = "vmlinuz"
	RamdiskInitrd = "initrd.img"
)

// maxCmdline bounds a kernel command line (Linux's x86 limit is 2048).
const maxCmdline = 2048

// normalMAC checks a MAC address and returns it lower-case with colons.
func normalMAC(mac string) (string, error) {
	hw, err := net.ParseMAC(mac)
	if err != nil || len(hw) != 6 {
		return "", ecode.Errorf(ecode.Inval, "MAC address %q is not six hex pairs", mac)
	}
	return hw.String(), nil
}

// macFileName is the MAC as iPXE's ${mac:hexhyp} writes it, which is also
// safe as a file name.
func macFileName(mac string) string { return strings.ReplaceAll(mac, ":", "-") }

func (s *Service) bootDir() string { return filepath.Join(s.stateDir, "boot") }

func (s *Service) cmdlineFile(mac string) string {
	return filepath.Join(s.bootDir(), macFileName(mac)+".cmdline")
}

// PrepareBoot makes the machine with this MAC boot the agent ramdisk over
// PXE with the kernel command line (ipa-api-url and the rest): its iPXE
// script is served and dnsmasq answers its DHCP on every booting network.
// Calling it again replaces the command line.
func (s *Service) PrepareBoot(machineMAC, kernelCmdline string) error {
	mac, err := normalMAC(machineMAC)
	if err != nil {
		return err
	}
	if err := checkCmdline(kernelCmdline); err != nil {
		return err
	}
	// The script first, so a machine never gets an address that chains
	// to a script not there yet.
	if err := atomicfile.WriteFile(s.cmdlineFile(mac), []byte(kernelCmdline), 0o600); err != nil {
		return ecode.ExecErrorf("boot of %s: %w", mac, err)
	}
	if err := atomicfile.WriteFile(filepath.Join(s.DHCPHostsDir(), macFileName(mac)), []byte(dhcpHostLine(mac)), 0o644); err != nil {
		return ecode.ExecErrorf("DHCP host of %s: %w", mac, err)
	}
	return nil
}

// CleanUpBoot forgets the machine: dnsmasq stops answering its DHCP (it is
// told to reload) and its script is no longer served. A machine never
// prepared is not an error.
func (s *Service) CleanUpBoot(machineMAC string) error {
	mac, err := normalMAC(machineMAC)
	if err != nil {
		return err
	}
	if err := os.Remove(filepath.Join(s.DHCPHostsDir(), macFileName(mac))); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return ecode.ExecErrorf("DHCP host of %s: %w", mac, err)
	}
	if err := s.reloadDHCP(); err != nil {
		return err
	}
	if err := os.Remove(s.cmdlineFile(mac)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return ecode.ExecErrorf("boot of %s: %w", mac, err)
	}
	return nil
}

func checkCmdline(c string) error {
	if len(c) > maxCmdline {
		return ecode.Errorf(ecode.Inval, "kernel command line is %d bytes, more than %d", len(c), maxCmdline)
	}
	for _, r := range c {
		if r < ' ' || r == 0x7f {
			return ecode.Errorf(ecode.Inval, "kernel command line holds a control character")
		}
	}
	return nil
}

// chainURL is the script every iPXE client on the network is given by
// DHCP: it chains to the machine's own script by MAC.
func (s *Service) chainURL(n *Network) string {
	return s.bootURL(n, "/boot.ipxe")
}

func (s *Service) bootURL(n *Network, path string) string {
	return "http://" + netip.AddrPortFrom(n.Gateway(), uint16(s.cfg.HTTPPort)).String() + path
}

// chainScript sends an iPXE client to its machine's script; a machine
// with none (not prepared) gets 404, and iPXE moves on to the next boot
// device.
func (s *Service) chainScript(n *Network) string {
	return "#!ipxe\nchain " + s.bootURL(n, "/machines/${mac:hexhyp}.ipxe") + "\n"
}

// machineScript boots the agent ramdisk with the machine's command line.
func (s *Service) machineScript(n *Network, cmdline string) string {
	return fmt.Sprintf("#!ipxe\nkernel %s %s\ninitrd %s\nboot\n",
		s.bootURL(n, "/ramdisk/"+RamdiskKernel), cmdline, s.bootURL(n, "/ramdisk/"+RamdiskInitrd))
}

// bootHandler serves one network's iPXE scripts and the ramdisk.
func (s *Service) bootHandler(n *Network) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /boot.ipxe", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		fmt.Fprint(w, s.chainScript(n))
	})
	mux.HandleFunc("GET /machines/{file}", func(w http.ResponseWriter, r *http.Request) {
		name, ok := strings.CutSuffix(r.PathValue("file"), ".ipxe")
		mac, err := normalMAC(strings.ReplaceAll(name, "-", ":"))
		if !ok || err != nil {
			http.NotFound(w, r)
			return
		}
		cmdline, err := os.ReadFile(s.cmdlineFile(mac))
		if err != nil {
			// Not prepared (or cleaned up): no boot for this machine.
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/plain")
		fmt.Fprint(w, s.machineScript(n, string(cmdline)))
	})
	for _, f := range []string{RamdiskKernel, RamdiskInitrd} {
		mux.HandleFunc("GET /ramdisk/"+f, func(w http.ResponseWriter, r *http.Request) {
			http.ServeFile(w, r, filepath.Join(s.ramdiskDir, f))
		})
	}
	return mux
}
