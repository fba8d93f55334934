package bootstrap

import (
	"crypto/md5"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"syscall"

	"github.com/corral/corral/internal/pki"
	"github.com/corral/corral/internal/rapi"
)

// RAPICredential is the identity corral-rapi runs with: its own user and
// group, plus corral-admin for the LUXI socket.
func RAPICredential() (*syscall.Credential, error) {
	acct, err := Lookup(RAPIUser)
	if err != nil {
		return nil, err
	}
	gid, err := GroupID(AdminGroup)
	if err != nil {
		return nil, err
	}
	return &syscall.Credential{Uid: uint32(acct.UID), Gid: uint32(acct.GID), Groups: []uint32{uint32(gid)}}, nil
}

// initRAPI writes corral-rapi's certificate (issued by the cluster CA for
// the master's name and IP), the CA certificate and an empty users file
// unless one exists. With owner non-nil the directory and its files go to
// that account.
func initRAPI(ca *pki.CA, l Layout, name string, ip net.IP, owner *Account) error {
	dir := l.RAPIDir()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return err
	}
	if err := issue(ca, pki.RoleRAPI, name, ip, l.RAPICert(), l.RAPIKey()); err != nil {
		return fmt.Errorf("issuing the RAPI certificate: %w", err)
	}
	if err := os.WriteFile(l.RAPICA(), ca.CertPEM(), 0o644); err != nil {
		return err
	}
	// An operator's users file survives a re-initialised cluster.
	f, err := os.OpenFile(l.RAPIUsers(), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	switch {
	case err == nil:
		if _, err := f.WriteString("# corral-rapi users: <name> <password> [read|write], Ganeti's format\n"); err != nil {
			f.Close()
			return err
		}
		if err := f.Close(); err != nil {
			return err
		}
	case !errors.Is(err, os.ErrExist):
		return err
	}
	if owner != nil {
		return chownTree(dir, owner.UID, owner.GID)
	}
	return nil
}

// RAPIUserLine is a users-file entry for name with the password stored as
// Ganeti's {HA1} hash, so the file never holds it in clear text.
func RAPIUserLine(name, password string, options ...string) (string, error) {
	if name == "" || strings.ContainsAny(name, " \t\r\n#") {
		return "", fmt.Errorf("invalid RAPI user name %q", name)
	}
	for _, o := range options {
		if o == "" || strings.ContainsAny(o, " \t\r\n,") {
			return "", fmt.Errorf("invalid RAPI user option %q", o)
		}
	}
	sum := md5.Sum([]byte(name + ":" + rapi.Realm + ":" + password))
	line := name + " {HA1}" + hex.EncodeToString(sum[:])
	if len(options) > 0 {
		line += " " + strings.Join(options, ",")
	}
	return line + "\n", nil
}

// AddRAPIUser appends an entry to the users file. The file keeps its owner
// and mode; corral-rapi picks the user up on its next start or SIGHUP.
func AddRAPIUser(path, name, password string, options ...string) error {
	line, err := RAPIUserLine(name, password, options...)
	if err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return fmt.Errorf("RAPI users file: %w", err)
	}
	if _, err := f.WriteString(line); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
