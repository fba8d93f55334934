// Command corral-agent runs in a bare-metal machine's ramdisk: it reads
// ipa-api-url (and optionally corral.api-ca-sha256, ipa-advertise-host,
// ipa-advertise-port, ipa-listen-port) from the kernel command line, looks
// the machine up in the Bare Metal API, heartbeats and serves the
// conductor's commands until the rescue is finalized. With
// corral.rescue=offline (a VM instance's rescue) it takes the rescue user
// from /etc/corral-rescue.json instead, and serves SSH. It logs to its
// standard error, which the ramdisk sends to the console.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/corral/corral/internal/baremetal/agent"
)

func main() {
	cmdline, err := os.ReadFile("/proc/cmdline")
	if err != nil {
		fmt.Fprintf(os.Stderr, "corral-agent: %v\n", err)
		os.Exit(1)
	}
	s, err := agent.ParseCmdline(string(cmdline))
	if err != nil {
		fmt.Fprintf(os.Stderr, "corral-agent: kernel command line: %v\n", err)
		os.Exit(2)
	}
	if s.APIURL == "" && !s.OfflineRescue {
		fmt.Fprintln(os.Stderr, "corral-agent: no ipa-api-url or corral.rescue=offline on the kernel command line; nothing to do")
		os.Exit(2)
	}
	m := &agent.Machine{
		SysBlock:   "/sys/block",
		DevDir:     "/dev",
		EtcDir:     "/etc",
		RescueHome: "/root",
		TmpDir:     os.TempDir(),
		Console:    os.Stderr,
		Now:        time.Now,
		Net:        &agent.DHCPNetwork{Script: "/etc/udhcpc/default.script", SysNet: "/sys/class/net", Console: os.Stderr, LinkWait: 5 * time.Second},
		Sync:       func() error { syscall.Sync(); return nil },
		PowerOff: func() error {
			syscall.Sync()
			return syscall.Reboot(syscall.LINUX_REBOOT_CMD_POWER_OFF)
		},
	}
	if s.NoNetwork {
		m.Net = agent.NoNetwork{}
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := agent.Run(ctx, s, m); err != nil {
		fmt.Fprintf(os.Stderr, "corral-agent: %v\n", err)
		os.Exit(1)
	}
}
