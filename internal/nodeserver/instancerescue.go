package nodeserver

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/corral/corral/internal/atomicfile"
	"github.com/corral/corral/internal/cryptpw"
	"github.com/corral/corral/internal/ecode"
	"github.com/corral/corral/internal/initrd"
	"github.com/corral/corral/internal/nodeapi"
)

// instanceRescueDir holds the rescue initrds of VM instances, in the state
// directory: root's only. qemu opens -kernel and -initrd before it drops
// to its unprivileged uid and enters its chroot, so no other uid needs
// them, and the file holds the rescue password's hash.
const instanceRescueDir = "instance-rescue"

// offlineRescueFile is where the agent's offline rescue reads the rescue
// user (agent.OfflineRescueFile in the ramdisk's /etc).
const offlineRescueFile = "etc/corral-rescue.json"

func (s *Server) instanceRescueRoutes() {
	handle(s, nodeapi.InstanceRescuePrepare, s.instanceRescuePrepare)
	handle(s, nodeapi.InstanceRescueCleanup, s.instanceRescueCleanup)
}

// rescueInitrdPath is the instance's rescue initrd.
func (s *Server) rescueInitrdPath(uuid string) (string, error) {
	if !validInstanceUUID(uuid) {
		return "", ecode.Errorf(ecode.Inval, "instance uuid %q is not a uuid", uuid)
	}
	return filepath.Join(s.opts.StateDir, instanceRescueDir, strings.ToLower(uuid)+".initrd"), nil
}

func validInstanceUUID(u string) bool {
	if len(u) != 36 {
		return false
	}
	for i, r := range u {
		if i == 8 || i == 13 || i == 18 || i == 23 {
			if r != '-' {
				return false
			}
		} else if !(r >= '0' && r <= '9' || r >= 'a' && r <= 'f' || r >= 'A' && r <= 'F') {
			return false
		}
	}
	return true
}

// rescueFile is the agent's offline rescue file (the agent's
// finalize_rescue parameters).
type rescueFile struct {
	RescuePassword string   `json:"rescue_password"`
	Hashed         bool     `json:"hashed"`
	SSHPublicKeys  []string `json:"ssh_public_keys,omitempty"`
}

// checkRescueArgs refuses what the agent would refuse: a rescue nobody
// could log in to.
func checkRescueArgs(a nodeapi.InstanceRescuePrepareArgs) error {
	if _, ok := cryptpw.AlgorithmOf(a.RescuePasswordHash); !ok || len(a.RescuePasswordHash) > 512 ||
		strings.ContainsAny(a.RescuePasswordHash, ": \t\r\n\x00") {
		return ecode.Errorf(ecode.Inval, "the rescue password hash must be a SHA-256 ($5$) or SHA-512 ($6$) crypt string")
	}
	for i, k := range a.SSHPublicKeys {
		if strings.TrimSpace(k) == "" || strings.ContainsAny(k, "\r\n\x00") || len(k) > 16<<10 {
			return ecode.Errorf(ecode.Inval, "ssh_public_keys[%d] is not one public key line", i)
		}
	}
	return nil
}

// instanceRescuePrepare writes the instance's rescue initrd: the agent
// ramdisk's initrd.img followed by an archive with the rescue file. A
// repeated call writes it again.
func (s *Server) instanceRescuePrepare(ctx context.Context, a nodeapi.InstanceRescuePrepareArgs) (any, error) {
	ramdisk := s.opts.MachineMedia.AgentRamdisk
	if ramdisk == "" {
		return nil, ecode.Errorf(ecode.Environ, "node %s has no rescue ramdisk: start corral-node with --agent-ramdisk DIR (made by scripts/build-agent-ramdisk.sh)", s.name)
	}
	if err := checkRescueArgs(a); err != nil {
		return nil, err
	}
	path, err := s.rescueInitrdPath(a.InstanceUUID)
	if err != nil {
		return nil, err
	}
	kernel, base := filepath.Join(ramdisk, "vmlinuz"), filepath.Join(ramdisk, "initrd.img")
	for _, f := range []string{kernel, base} {
		if _, err := os.Stat(f); err != nil {
			return nil, ecode.Errorf(ecode.Environ, "rescue ramdisk of node %s: %v", s.name, err)
		}
	}
	data, err := json.Marshal(rescueFile{RescuePassword: a.RescuePasswordHash, Hashed: true, SSHPublicKeys: a.SSHPublicKeys})
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, ecode.Errorf(ecode.Environ, "rescue initrd directory: %v", err)
	}
	now := time.Now().Unix()
	entries := []initrd.Entry{
		{Name: "etc", Mode: fs.ModeDir | 0o755, MTime: now},
		{Name: offlineRescueFile, Mode: 0o600, Data: data, MTime: now},
	}
	if err := atomicfile.WriteFrom(path, 0o600, func(w io.Writer) error { return initrd.Append(w, base, entries) }); err != nil {
		return nil, ecode.Errorf(ecode.Environ, "writing the rescue initrd of instance %s: %v", a.InstanceUUID, err)
	}
	s.log.Info("instance rescue initrd written", "instance_uuid", a.InstanceUUID, "keys", len(a.SSHPublicKeys))
	return nodeapi.InstanceRescuePrepareReply{KernelPath: kernel, InitrdPath: path}, nil
}

// instanceRescueCleanup removes the instance's rescue initrd; one already
// gone is no error.
func (s *Server) instanceRescueCleanup(ctx context.Context, a nodeapi.InstanceRescueCleanupArgs) (any, error) {
	path, err := s.rescueInitrdPath(a.InstanceUUID)
	if err != nil {
		return nil, err
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, ecode.Errorf(ecode.Environ, "removing the rescue initrd of instance %s: %v", a.InstanceUUID, err)
	}
	s.log.Info("instance rescue initrd removed", "instance_uuid", a.InstanceUUID)
	return nil, nil
}
