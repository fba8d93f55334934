// Package ganetidropin lets a Corral master stand in for a Ganeti master on
// its machine, so that Ganeti's own command-line tools (gnt-cluster,
// gnt-instance, ..., burnin) work against Corral unchanged. Those tools
// find their master through two things: the LUXI socket at
// /var/run/ganeti/socket/ganeti-query (ganeti-master for Ganeti 2.x), and
// the ssconf files /var/lib/ganeti/ssconf_*, which name the master node,
// the cluster, its nodes and so on. In drop-in mode corrald serves LUXI on
// those socket paths as well as on its own, and keeps the ssconf files
// current from the configuration.
//
// Everything lives under a root prefix: "/" on a real machine, a temporary
// directory in tests, where Ganeti's tools are pointed at it with
// GANETI_ROOTDIR (whose last path component must be the node's name, given
// in GANETI_HOSTNAME).
package ganetidropin

import (
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"strconv"

	"github.com/corral/corral/internal/ecode"
)

// Socket and file names, as Ganeti's pathutils spells them.
const (
	QuerySocketName  = "ganeti-query"  // Ganeti 2.7 and later, 3.x
	MasterSocketName = "ganeti-master" // Ganeti 2.x before luxid
	SsconfPrefix     = "ssconf_"
	// ConfigFileName is a real Ganeti cluster's configuration: drop-in
	// mode refuses a data directory holding one.
	ConfigFileName = "config.data"
	// AdminGroup is Ganeti's group of users who may run its tools. When
	// it exists, the drop-in sockets belong to it; else to Corral's.
	AdminGroup = "gnt-admin"
)

// Layout names Ganeti's paths under a root prefix.
type Layout struct {
	// Root is the prefix ("" or "/" for the machine's own paths).
	Root string
}

func (l Layout) path(elem ...string) string {
	root := l.Root
	if root == "" {
		root = "/"
	}
	return filepath.Join(append([]string{root}, elem...)...)
}

// DataDir is Ganeti's /var/lib/ganeti, where the ssconf files are.
func (l Layout) DataDir() string { return l.path("var", "lib", "ganeti") }

// RunDir is Ganeti's /var/run/ganeti.
func (l Layout) RunDir() string { return l.path("var", "run", "ganeti") }

// LogDir is Ganeti's /var/log/ganeti, where its tools log the commands
// run (commands.log).
func (l Layout) LogDir() string { return l.path("var", "log", "ganeti") }

// SocketDir is Ganeti's /var/run/ganeti/socket.
func (l Layout) SocketDir() string { return filepath.Join(l.RunDir(), "socket") }

// QuerySocket is the socket Ganeti 3.x clients use.
func (l Layout) QuerySocket() string { return filepath.Join(l.SocketDir(), QuerySocketName) }

// MasterSocket is the socket older Ganeti 2.x clients use.
func (l Layout) MasterSocket() string { return filepath.Join(l.SocketDir(), MasterSocketName) }

// Sockets are all the socket paths drop-in mode serves.
func (l Layout) Sockets() []string { return []string{l.QuerySocket(), l.MasterSocket()} }

// SsconfPath is the file of one ssconf key.
func (l Layout) SsconfPath(key string) string { return filepath.Join(l.DataDir(), SsconfPrefix+key) }

// AccessGroup is the group whose members may use the drop-in sockets:
// Ganeti's gnt-admin when it exists on this machine (Debian's ganeti
// package creates it), else fallback, Corral's own admin group.
func AccessGroup(fallback string) string {
	if _, err := user.LookupGroup(AdminGroup); err == nil {
		return AdminGroup
	}
	return fallback
}

// Modes of the directories Prepare creates. The two directories corrald
// writes are also setgid, so the sockets and files it creates there belong
// to the access group without corrald being a member of it.
const (
	parentMode = 0o755
	dataMode   = 0o755
	socketMode = 0o750
)

// Prepare creates Ganeti's directories for drop-in mode (it runs as root,
// from `corral cluster init` and `corral dev up`): the data directory and
// the socket directory are handed to owner (corrald's user) and group gid;
// Ganeti's log directory, for its tools' command log, is created if
// missing.
// owner < 0 leaves ownership alone (tests as non-root). It refuses a data
// directory that holds a real Ganeti cluster's configuration.
func Prepare(l Layout, owner, gid int) error {
	if err := CheckNoGanetiCluster(l); err != nil {
		return err
	}
	for _, d := range []struct {
		path string
		mode os.FileMode
		ours bool
	}{
		{filepath.Dir(l.DataDir()), parentMode, false},
		{l.DataDir(), dataMode, true},
		{l.RunDir(), parentMode, false},
		{l.SocketDir(), socketMode, true},
		{l.LogDir(), parentMode, false},
	} {
		_, statErr := os.Stat(d.path)
		if err := os.MkdirAll(d.path, parentMode); err != nil {
			return fmt.Errorf("creating %s: %w", d.path, err)
		}
		if !d.ours {
			if os.IsNotExist(statErr) {
				if err := os.Chmod(d.path, d.mode); err != nil {
					return err
				}
			}
			continue
		}
		if owner >= 0 {
			if err := os.Chown(d.path, owner, gid); err != nil {
				return fmt.Errorf("handing %s to corrald: %w", d.path, err)
			}
		}
		if err := os.Chmod(d.path, d.mode|os.ModeSetgid); err != nil {
			return err
		}
	}
	return nil
}

// CheckNoGanetiCluster refuses a data directory holding a real Ganeti
// cluster's configuration: drop-in mode must never disturb one.
func CheckNoGanetiCluster(l Layout) error {
	p := filepath.Join(l.DataDir(), ConfigFileName)
	if _, err := os.Stat(p); err == nil {
		return ecode.Errorf(ecode.Exists, "%s exists: a Ganeti cluster is configured on this machine, and Corral's Ganeti drop-in mode would take its place; remove that cluster first or give another --ganeti-root", p)
	}
	return nil
}

// CleanRoot checks a root prefix and returns it in the form the
// configuration records: "" for the machine's own root, else an absolute,
// clean path.
func CleanRoot(root string) (string, error) {
	if root == "" {
		return "", nil
	}
	if !filepath.IsAbs(root) {
		return "", ecode.Errorf(ecode.Inval, "the Ganeti root %q is not an absolute path", root)
	}
	root = filepath.Clean(root)
	if root == "/" {
		return "", nil
	}
	return root, nil
}

// GroupID resolves a group name to its gid.
func GroupID(name string) (int, error) {
	g, err := user.LookupGroup(name)
	if err != nil {
		return 0, fmt.Errorf("group %s: %w", name, err)
	}
	return strconv.Atoi(g.Gid)
}
