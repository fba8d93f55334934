// Package privsep decides, at a daemon's start, whether the process runs
// under the identity the security model gives it: corrald as the owner of
// its state (corral-master), corral-node as root, corral-rapi as corral-rapi
// and never as a user that can read the cluster's secrets. A wrong identity
// is refused with a message that names the expected user and how to start
// the daemon as it.
//
// The decisions (Master, Node, RAPI) are pure functions of facts the
// callers gather with MasterFacts and RAPIFacts, so that they can be tested
// without switching users.
package privsep

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"
)

// The users of the security model (internal/bootstrap creates them).
const (
	MasterUser = "corral-master"
	RAPIUser   = "corral-rapi"
)

// Who is a uid with its user name ("" when the uid has none).
type Who struct {
	UID  int
	Name string
}

func (w Who) String() string {
	if w.Name == "" {
		return "uid " + strconv.Itoa(w.UID)
	}
	return fmt.Sprintf("%s (uid %d)", w.Name, w.UID)
}

// nameOr is the user's name, or def when the uid has none.
func (w Who) nameOr(def string) string {
	if w.Name == "" {
		return def
	}
	return w.Name
}

// Resolve names a uid from the user database.
func Resolve(uid int) Who {
	w := Who{UID: uid}
	if u, err := user.LookupId(strconv.Itoa(uid)); err == nil {
		w.Name = u.Username
	}
	return w
}

// MasterState is what Master decides on besides the process's own uid.
type MasterState struct {
	// Dir is corrald's state directory (<state-dir>/master).
	Dir string
	// Owner owns Dir; ignored unless Found.
	Owner Who
	Found bool
	// Err is why Dir could not be examined other than its absence (e.g.
	// permission denied on a parent directory); nil otherwise.
	Err error
}

// MasterFacts examines corrald's state directory. A missing directory is
// not an error here: opening the store reports it with its own advice.
func MasterFacts(dir string) MasterState {
	st := MasterState{Dir: dir}
	fi, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		st.Err = err
	default:
		if sys, ok := fi.Sys().(*syscall.Stat_t); ok {
			st.Found, st.Owner = true, Resolve(int(sys.Uid))
		}
	}
	return st
}

// Master decides whether corrald may run as run. corrald never runs as
// root, and it must own its state directory: the store, the CA key and the
// domain secret are readable by their owner only, and the files corrald
// writes must keep that owner. In a production cluster the owner is
// corral-master; a test cluster initialised by an ordinary user without
// changing owners belongs to that user, who may run it.
func Master(run Who, st MasterState) error {
	want := MasterUser
	if st.Found && st.Owner.UID != 0 {
		want = st.Owner.nameOr("uid " + strconv.Itoa(st.Owner.UID))
	}
	how := fmt.Sprintf("start it with 'systemctl start corrald' (the unit runs it as %s) or 'runuser -u %s -- corrald ...'", MasterUser, want)
	if run.UID == 0 {
		return fmt.Errorf("corrald must not run as root: it must run as %s, the user that owns its state; %s", want, how)
	}
	if st.Err != nil {
		return fmt.Errorf("corrald runs as %s and cannot examine its state directory %s (%v): it must run as %s; %s",
			run, st.Dir, st.Err, want, how)
	}
	if !st.Found || st.Owner.UID == run.UID {
		return nil
	}
	if st.Owner.UID == 0 {
		return fmt.Errorf("corrald runs as %s but its state directory %s belongs to root, and corrald never runs as root: "+
			"give it to %s ('chown -R %s:%s %s') and %s", run, st.Dir, MasterUser, MasterUser, MasterUser, st.Dir, how)
	}
	return fmt.Errorf("corrald runs as %s but its state directory %s belongs to %s, so it cannot read the cluster's store and keys: "+
		"it must run as %s; %s", run, st.Dir, st.Owner, want, how)
}

// Node decides whether corral-node may run as run: only as root, since it
// creates taps, hands disks to qemu's user, starts qemu that drops its
// privileges, and runs OS scripts that mount and partition.
func Node(run Who) error {
	if run.UID == 0 {
		return nil
	}
	return fmt.Errorf("corral-node must run as root (it runs as %s): it creates taps, hands disks to qemu's user and starts qemu, "+
		"which drops to an unprivileged user itself; start it with 'systemctl start corral-node' or as root", run)
}

// RAPIState is what RAPI decides on besides the process's own uid.
type RAPIState struct {
	// AllowRoot is corral-rapi's --allow-root.
	AllowRoot bool
	// MasterUID is corral-master's uid, or -1 when there is no such user.
	MasterUID int
	// Key is the TLS key file; KeyErr the error opening it for reading
	// (nil when it opened) and KeyOwner the owner of OwnerOf when known
	// (KeyFound): the key itself, or its directory when the key cannot
	// even be examined.
	Key      string
	KeyErr   error
	KeyOwner Who
	KeyFound bool
	OwnerOf  string
}

// RAPIFacts gathers RAPIState for the key file key.
func RAPIFacts(key string, allowRoot bool) RAPIState {
	st := RAPIState{AllowRoot: allowRoot, MasterUID: -1, Key: key}
	if u, err := user.Lookup(MasterUser); err == nil {
		if uid, err := strconv.Atoi(u.Uid); err == nil {
			st.MasterUID = uid
		}
	}
	for _, p := range []string{key, filepath.Dir(key)} {
		if fi, err := os.Stat(p); err == nil {
			if sys, ok := fi.Sys().(*syscall.Stat_t); ok {
				st.KeyFound, st.KeyOwner, st.OwnerOf = true, Resolve(int(sys.Uid)), p
			}
			break
		}
	}
	f, err := os.Open(key)
	if err == nil {
		f.Close()
	}
	st.KeyErr = err
	return st
}

// RAPI decides whether corral-rapi may run as run. corral-rapi is the
// public front: it must hold no cluster secret, so it refuses root (unless
// allowed explicitly) and corral-master, which can read the CA key and the
// domain secret; and it must be able to read its own TLS key, which
// belongs to corral-rapi.
func RAPI(run Who, st RAPIState) error {
	how := fmt.Sprintf("start it with 'systemctl start corral-rapi' (the unit runs it as %s) or 'runuser -u %s -g %s -G corral-admin -- corral-rapi ...'",
		RAPIUser, RAPIUser, RAPIUser)
	if run.UID == 0 {
		if st.AllowRoot {
			return nil
		}
		return fmt.Errorf("refusing to run as root; run as the %s user or pass --allow-root: %s", RAPIUser, how)
	}
	if st.MasterUID >= 0 && run.UID == st.MasterUID {
		return fmt.Errorf("corral-rapi must not run as %s: that user reads the cluster's CA key and domain secret, "+
			"which the public RAPI front must never hold; run it as %s: %s", MasterUser, RAPIUser, how)
	}
	if errors.Is(st.KeyErr, fs.ErrPermission) {
		want, owner := RAPIUser, ""
		if st.KeyFound {
			owner = fmt.Sprintf(" (%s belongs to %s)", st.OwnerOf, st.KeyOwner)
			if st.KeyOwner.UID != 0 {
				want = st.KeyOwner.nameOr(want)
			}
		}
		return fmt.Errorf("corral-rapi runs as %s and cannot read its TLS key %s%s: run it as %s: %s",
			run, st.Key, owner, want, how)
	}
	return nil
}
