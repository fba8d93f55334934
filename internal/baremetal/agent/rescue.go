package agent

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"strings"

	"github.com/corral/corral/internal/atomicfile"
	"github.com/corral/corral/internal/baremetal/agentapi"
	"github.com/corral/corral/internal/cryptpw"
)

// RescueUser is the account finalize_rescue enables. Ironic's agent names
// its rescue user "rescue" and gives it root through sudo; a busybox
// ramdisk has no sudo, so Corral's rescue user is uid 0 (a second name for
// root, with root's home and a shell). root itself stays without a
// password: only "rescue" can log in.
const RescueUser = "rescue"

const rescuePasswdLine = RescueUser + ":x:0:0:rescue:%s:/bin/sh"

// errBadRescueParams marks parameters the agent refuses.
var errBadRescueParams = errors.New("invalid finalize_rescue parameters")

// rescueHash returns the crypt hash to put in /etc/shadow: the given hash
// when hashed, else the clear password hashed here with SHA-256 crypt.
func rescueHash(p agentapi.FinalizeRescueParams) (string, error) {
	if p.RescuePassword == "" {
		return "", fmt.Errorf("%w: rescue_password is empty", errBadRescueParams)
	}
	if !p.Hashed {
		h, err := cryptpw.Hash(cryptpw.SHA256, p.RescuePassword)
		if err != nil {
			return "", fmt.Errorf("%w: %w", errBadRescueParams, err)
		}
		return h, nil
	}
	h := p.RescuePassword
	// The ramdisk's login (busybox) verifies MD5, SHA-256 and SHA-512
	// crypt; anything else would leave a rescue nobody can log in to.
	if !(strings.HasPrefix(h, "$5$") || strings.HasPrefix(h, "$6$") || strings.HasPrefix(h, "$1$")) {
		return "", fmt.Errorf("%w: the rescue password hash must be SHA-256 ($5$), SHA-512 ($6$) or MD5 ($1$) crypt", errBadRescueParams)
	}
	for _, r := range h {
		if !(r == '$' || r == '.' || r == '/' || r == '=' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z') {
			return "", fmt.Errorf("%w: the rescue password hash has a character crypt never writes", errBadRescueParams)
		}
	}
	if len(h) > 512 {
		return "", fmt.Errorf("%w: the rescue password hash is too long", errBadRescueParams)
	}
	return h, nil
}

// finalizeRescue enables the rescue user with p's password and keys: the
// conductor's finalize_rescue, or an offline rescue's file.
func (m *Machine) finalizeRescue(p agentapi.FinalizeRescueParams, logger *log.Logger) error {
	hash, err := rescueHash(p)
	if err != nil {
		return err
	}
	if err := checkSSHKeys(p.SSHPublicKeys); err != nil {
		return err
	}
	if err := m.enableRescueUser(hash, p.SSHPublicKeys); err != nil {
		return err
	}
	logger.Printf("RESCUE-PASSWORD-SET: user %q can log in (%d ssh keys)", RescueUser, len(p.SSHPublicKeys))
	return nil
}

// checkSSHKeys refuses keys that would add lines of their own to
// authorized_keys.
func checkSSHKeys(keys []string) error {
	for i, k := range keys {
		k = strings.TrimSpace(k)
		if k == "" || strings.ContainsAny(k, "\r\n\x00") || len(k) > 16<<10 {
			return fmt.Errorf("%w: ssh_public_keys[%d] is not one public key line", errBadRescueParams, i)
		}
		f := strings.Fields(k)
		if len(f) < 2 || !(strings.HasPrefix(f[0], "ssh-") || strings.HasPrefix(f[0], "ecdsa-") || strings.HasPrefix(f[0], "sk-")) {
			return fmt.Errorf("%w: ssh_public_keys[%d] is not an OpenSSH public key", errBadRescueParams, i)
		}
	}
	return nil
}

// enableRescueUser writes the rescue user into passwd and shadow (replacing
// an earlier entry) and its authorized_keys.
func (m *Machine) enableRescueUser(hash string, keys []string) error {
	home := m.RescueHome
	passwd := filepath.Join(m.EtcDir, "passwd")
	shadow := filepath.Join(m.EtcDir, "shadow")
	if err := replaceUserLine(passwd, fmt.Sprintf(rescuePasswdLine, home), 0o644); err != nil {
		return err
	}
	days := m.Now().Unix() / 86400
	line := fmt.Sprintf("%s:%s:%d:0:99999:7:::", RescueUser, hash, days)
	if err := replaceUserLine(shadow, line, 0o600); err != nil {
		return err
	}
	if len(keys) == 0 {
		return nil
	}
	dir := filepath.Join(home, ".ssh")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("rescue ssh directory: %w", err)
	}
	var b bytes.Buffer
	for _, k := range keys {
		b.WriteString(strings.TrimSpace(k) + "\n")
	}
	if err := atomicfile.WriteFile(filepath.Join(dir, "authorized_keys"), b.Bytes(), 0o600); err != nil {
		return fmt.Errorf("rescue authorized_keys: %w", err)
	}
	return nil
}

// replaceUserLine replaces the line of the user named at the start of line
// in a passwd-format file (creating the file), keeping every other line.
func replaceUserLine(path, line string, mode os.FileMode) error {
	user, _, _ := strings.Cut(line, ":")
	old, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("reading %s: %w", path, err)
	}
	var b bytes.Buffer
	sc := bufio.NewScanner(bytes.NewReader(old))
	for sc.Scan() {
		l := sc.Text()
		if strings.HasPrefix(l, user+":") || l == "" {
			continue
		}
		b.WriteString(l + "\n")
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("reading %s: %w", path, err)
	}
	b.WriteString(line + "\n")
	if err := atomicfile.WriteFile(path, b.Bytes(), mode); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}
