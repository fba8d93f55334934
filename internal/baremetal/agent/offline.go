package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/corral/corral/internal/baremetal/agentapi"
)

// OfflineRescueFile is the offline rescue's file in EtcDir. The node that
// starts a VM instance in rescue writes it into an extra initrd archive,
// appended to the ramdisk's: the JSON of finalize_rescue's parameters
// ({"rescue_password": "<crypt hash>", "hashed": true, "ssh_public_keys": [...]}).
const OfflineRescueFile = "corral-rescue.json"

// maxOfflineRescueFile bounds what the agent reads from it.
const maxOfflineRescueFile = 1 << 20

// ReadOfflineRescue reads and checks the offline rescue file. The
// password must be a crypt hash: a clear password has no business in an
// initrd.
func ReadOfflineRescue(path string) (agentapi.FinalizeRescueParams, error) {
	var p agentapi.FinalizeRescueParams
	data, err := os.ReadFile(path)
	if err != nil {
		return p, fmt.Errorf("offline rescue: %w", err)
	}
	if len(data) > maxOfflineRescueFile {
		return p, fmt.Errorf("offline rescue: %s is larger than %d bytes", path, maxOfflineRescueFile)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		return p, fmt.Errorf("offline rescue: %s: %w", path, err)
	}
	if !p.Hashed {
		return p, fmt.Errorf("offline rescue: %w: the password in %s must be a crypt hash (\"hashed\": true)", errBadRescueParams, path)
	}
	return p, nil
}

// runOfflineRescue is an offline rescue's boot: the rescue user from the
// file (then removed: its hash is in /etc/shadow now), DHCP, and the SSH
// server until ctx ends. A network that does not come up leaves the console
// login; a file that is missing or wrong fails the boot, since nobody could
// log in.
func runOfflineRescue(ctx context.Context, s Settings, m *Machine, logger *log.Logger) error {
	path := filepath.Join(m.EtcDir, OfflineRescueFile)
	p, err := ReadOfflineRescue(path)
	if err != nil {
		return err
	}
	if err := m.finalizeRescue(p, logger); err != nil {
		return fmt.Errorf("offline rescue: %w", err)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		logger.Printf("offline rescue: cannot remove %s: %v", path, err)
	}
	if macs, addr, err := m.Net.Up(); err != nil {
		logger.Printf("network: %v", err)
	} else {
		logger.Printf("network up: macs %v, address %q", macs, addr)
	}
	if s.SSHPort == 0 {
		logger.Printf("RESCUE-READY: log in as %q on the console", RescueUser)
		return nil
	}
	serveRescueSSH(ctx, s.SSHPort, m, logger)
	return nil
}
