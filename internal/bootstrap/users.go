package bootstrap

import (
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"strconv"
	"strings"
)

// Account is a resolved system user.
type Account struct {
	Name     string
	UID, GID int
}

// EnsureUsers creates the system users and group of the security model when
// missing: corral-master (runs corrald, member of corral-admin), corral-qemu
// (runs qemu), corral-rapi (runs corral-rapi, member of corral-admin) and
// the group corral-admin (may use the LUXI socket). It needs root.
func EnsureUsers() error {
	if os.Geteuid() != 0 {
		return fmt.Errorf("creating the corral users needs root")
	}
	if _, err := user.LookupGroup(AdminGroup); err != nil {
		if out, err := exec.Command("groupadd", "--system", AdminGroup).CombinedOutput(); err != nil {
			return fmt.Errorf("groupadd %s: %v: %s", AdminGroup, err, strings.TrimSpace(string(out)))
		}
	}
	for _, u := range []string{MasterUser, QemuUser, RAPIUser} {
		if _, err := user.Lookup(u); err == nil {
			continue
		}
		out, err := exec.Command("useradd", "--system", "--no-create-home", "--home-dir", "/nonexistent",
			"--shell", "/usr/sbin/nologin", "--user-group", u).CombinedOutput()
		if err != nil {
			return fmt.Errorf("useradd %s: %v: %s", u, err, strings.TrimSpace(string(out)))
		}
	}
	// corrald hands its socket to corral-admin, so it must belong to it;
	// corral-rapi reaches the socket through the same group.
	for _, u := range []string{MasterUser, RAPIUser} {
		if out, err := exec.Command("usermod", "-a", "-G", AdminGroup, u).CombinedOutput(); err != nil {
			return fmt.Errorf("usermod %s: %v: %s", u, err, strings.TrimSpace(string(out)))
		}
	}
	return nil
}

// Lookup resolves a user name.
func Lookup(name string) (Account, error) {
	u, err := user.Lookup(name)
	if err != nil {
		return Account{}, fmt.Errorf("user %s does not exist (run 'corral cluster init' or 'corral dev up' as root to create it): %w", name, err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return Account{Name: name, UID: uid, GID: gid}, nil
}

// GroupID resolves a group name.
func GroupID(name string) (int, error) {
	g, err := user.LookupGroup(name)
	if err != nil {
		return 0, fmt.Errorf("group %s does not exist: %w", name, err)
	}
	return strconv.Atoi(g.Gid)
}
