// Package agent is corral-agent, the program in a bare-metal machine's
// ramdisk that speaks Ironic's agent protocol (package agentapi): it brings
// the machine's network up, looks the machine up by its MAC addresses,
// heartbeats with the boot's agent token and serves the conductor's
// commands on port 9999 (rescue, image writing, disk metadata erasure,
// power off) until the rescue is finalized, then serves SSH for the rescue
// user (RescueSSH). Everything it touches on the machine (disk, /etc files,
// network, power) is a setting, so tests run it against temporary files.
package agent

import (
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/corral/corral/internal/baremetal/agentapi"
)

// Settings is what the agent reads from the kernel command line.
type Settings struct {
	// APIURL is the Bare Metal API (ipa-api-url).
	APIURL string
	// APICertSHA256 pins the API's certificate (corral.api-ca-sha256): the
	// SHA-256 of the DER of the server certificate or of a CA in its chain.
	APICertSHA256 []byte
	// AdvertiseHost and AdvertisePort make the callback URL when the
	// machine's own address is not the one the conductor reaches
	// (ipa-advertise-host, ipa-advertise-port).
	AdvertiseHost string
	AdvertisePort int
	// ListenPort is the port the command API is served on
	// (ipa-listen-port, default 9999).
	ListenPort int
	// SSHPort is where the rescued machine serves SSH for the rescue user
	// after finalize_rescue (corral.rescue-ssh-port, default 22; 0 serves
	// none).
	SSHPort int
	// NoNetwork skips bringing up the network (corral.agent-network=none),
	// for machines whose network is already up.
	NoNetwork bool
	// OfflineRescue (corral.rescue=offline) is the rescue of a VM
	// instance: no Bare Metal API; the rescue user comes from
	// /etc/corral-rescue.json (OfflineRescueFile), which the node put in an
	// extra initrd archive.
	OfflineRescue bool
}

// DefaultSSHPort is the rescue SSH server's port.
const DefaultSSHPort = 22

// ParseCmdline reads the agent's settings from a kernel command line.
// Settings missing from it stay empty; an unusable value is an error.
// Without ipa-api-url the machine is not an agent machine: APIURL is "",
// unless corral.rescue=offline asks for an offline rescue.
func ParseCmdline(cmdline string) (Settings, error) {
	s := Settings{ListenPort: agentapi.DefaultListenPort, SSHPort: DefaultSSHPort}
	for _, w := range strings.Fields(cmdline) {
		k, v, ok := strings.Cut(w, "=")
		if !ok {
			continue
		}
		switch k {
		case "ipa-api-url":
			u, err := url.Parse(v)
			if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				return s, fmt.Errorf("ipa-api-url=%q: want http(s)://host[:port][/path]", v)
			}
			s.APIURL = strings.TrimRight(v, "/")
		case "corral.api-ca-sha256":
			b, err := hex.DecodeString(strings.ReplaceAll(v, ":", ""))
			if err != nil || len(b) != 32 {
				return s, fmt.Errorf("corral.api-ca-sha256: want 64 hex digits")
			}
			s.APICertSHA256 = b
		case "ipa-advertise-host":
			if v != "" && net.ParseIP(v) == nil && !validHostname(v) {
				return s, fmt.Errorf("ipa-advertise-host=%q: not an address or host name", v)
			}
			s.AdvertiseHost = v
		case "corral.rescue-ssh-port":
			p, err := strconv.Atoi(v)
			if err != nil || p < 0 || p > 65535 {
				return s, fmt.Errorf("%s=%q: not a port (0: no SSH server)", k, v)
			}
			s.SSHPort = p
		case "ipa-advertise-port", "ipa-listen-port":
			p, err := strconv.Atoi(v)
			if err != nil || p < 1 || p > 65535 {
				return s, fmt.Errorf("%s=%q: not a port", k, v)
			}
			if k == "ipa-listen-port" {
				s.ListenPort = p
			} else {
				s.AdvertisePort = p
			}
		case "corral.agent-network":
			s.NoNetwork = v == "none"
		case "corral.rescue":
			if v != "offline" {
				return s, fmt.Errorf("corral.rescue=%q: the only mode is offline", v)
			}
			s.OfflineRescue = true
		}
	}
	return s, nil
}

func validHostname(h string) bool {
	if len(h) > 253 {
		return false
	}
	for _, r := range h {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '.') {
			return false
		}
	}
	return true
}

// Machine is what the agent acts on: paths and hooks that are the real
// machine in the ramdisk and temporary files in tests.
type Machine struct {
	// Disk is the root disk to write images to; "" finds the first
	// virtio, SCSI or NVMe disk under SysBlock.
	Disk string
	// SysBlock is /sys/block; DevDir is /dev.
	SysBlock string
	DevDir   string
	// EtcDir holds passwd, shadow and group (/etc).
	EtcDir string
	// RescueHome is the rescue user's home (/root).
	RescueHome string
	// Shell is the rescue user's shell for SSH sessions ("" is /bin/sh).
	Shell string
	// TmpDir holds downloaded images that must be converted (qcow2).
	TmpDir string
	// Net brings the network up and redoes DHCP after rescue.
	Net Network
	// PowerOff turns the machine off; Sync flushes file systems.
	PowerOff func() error
	Sync     func() error
	// Console receives the agent's log lines.
	Console io.Writer
	// Now is the clock (time.Now); Stamp days in /etc/shadow come from it.
	Now func() time.Time
}

// Network is the machine's networking as the agent needs it.
type Network interface {
	// Up brings every NIC with a link up (DHCP) and returns the MAC
	// addresses of all NICs and the first IPv4 address obtained.
	Up() (macs []string, addr string, err error)
	// Redo runs DHCP again on every NIC: the conductor moved the machine
	// to its tenant network.
	Redo() error
}
