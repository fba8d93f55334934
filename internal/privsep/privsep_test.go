package privsep

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var (
	root   = Who{UID: 0, Name: "root"}
	master = Who{UID: 995, Name: MasterUser}
	rapi   = Who{UID: 993, Name: RAPIUser}
	alice  = Who{UID: 1000, Name: "alice"}
	nobody = Who{UID: 4242}
)

// check asserts err is nil when want is empty, else that it holds every
// fragment of want.
func check(t *testing.T, err error, want []string) {
	t.Helper()
	if len(want) == 0 {
		if err != nil {
			t.Fatalf("refused: %v", err)
		}
		return
	}
	if err == nil {
		t.Fatalf("accepted; want a refusal mentioning %q", want)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("message %q lacks %q", err, w)
		}
	}
}

func TestMaster(t *testing.T) {
	owned := func(w Who) MasterState { return MasterState{Dir: "/var/lib/corral/master", Owner: w, Found: true} }
	for _, tc := range []struct {
		name string
		run  Who
		st   MasterState
		want []string
	}{
		{"owner corral-master", master, owned(master), nil},
		{"test cluster of an ordinary user", alice, owned(alice), nil},
		{"no state yet: the store's own error says so", master, MasterState{Dir: "/x"}, nil},
		{"root refused", root, owned(master), []string{"must not run as root", "as corral-master", "systemctl start corrald", "runuser -u corral-master"}},
		{"root refused, names the owner", root, owned(alice), []string{"must not run as root", "as alice", "runuser -u alice"}},
		{"root refused without state", root, MasterState{Dir: "/x"}, []string{"must not run as root", "as corral-master"}},
		{"another user cannot read the state", rapi, owned(master),
			[]string{"runs as corral-rapi (uid 993)", "belongs to corral-master (uid 995)", "cannot read", "must run as corral-master", "systemctl start corrald"}},
		{"owner without a name", alice, owned(nobody), []string{"belongs to uid 4242", "must run as uid 4242"}},
		{"state owned by root", master, owned(root), []string{"belongs to root", "chown -R corral-master:corral-master /var/lib/corral/master"}},
		{"state unreachable", alice, MasterState{Dir: "/srv/m", Err: fs.ErrPermission},
			[]string{"cannot examine its state directory /srv/m", "permission denied", "must run as corral-master"}},
	} {
		t.Run(tc.name, func(t *testing.T) { check(t, Master(tc.run, tc.st), tc.want) })
	}
}

func TestNode(t *testing.T) {
	check(t, Node(root), nil)
	for _, w := range []Who{master, alice, nobody} {
		check(t, Node(w), []string{"corral-node must run as root", "runs as " + w.String(), "systemctl start corral-node"})
	}
}

func TestRAPI(t *testing.T) {
	readable := RAPIState{MasterUID: 995, Key: "/var/lib/corral/rapi/rapi.key", KeyOwner: rapi, KeyFound: true, OwnerOf: "/var/lib/corral/rapi"}
	denied := readable
	denied.KeyErr = &fs.PathError{Op: "open", Path: denied.Key, Err: fs.ErrPermission}
	rootKey := denied
	rootKey.KeyOwner = root
	noMaster := readable
	noMaster.MasterUID = -1
	allowed := readable
	allowed.AllowRoot = true
	missing := readable
	missing.KeyErr, missing.KeyFound = fs.ErrNotExist, false
	for _, tc := range []struct {
		name string
		run  Who
		st   RAPIState
		want []string
	}{
		{"corral-rapi", rapi, readable, nil},
		{"root with --allow-root", root, allowed, nil},
		{"missing key: the loader says so", rapi, missing, nil},
		{"no corral-master user on this machine", master, noMaster, nil},
		{"root refused", root, readable, []string{"refusing to run as root", "corral-rapi user", "--allow-root", "systemctl start corral-rapi"}},
		{"corral-master refused", master, readable, []string{"must not run as corral-master", "CA key and domain secret", "run it as corral-rapi"}},
		{"corral-master refused even when allowed as root", master, allowed, []string{"must not run as corral-master"}},
		{"key unreadable", alice, denied,
			[]string{"runs as alice (uid 1000)", "cannot read its TLS key /var/lib/corral/rapi/rapi.key", "(/var/lib/corral/rapi belongs to corral-rapi (uid 993))", "run it as corral-rapi", "runuser -u corral-rapi"}},
		{"key of root", alice, rootKey, []string{"belongs to root (uid 0)", "run it as corral-rapi"}},
	} {
		t.Run(tc.name, func(t *testing.T) { check(t, RAPI(tc.run, tc.st), tc.want) })
	}
}

func TestMasterFacts(t *testing.T) {
	dir := t.TempDir()
	st := MasterFacts(dir)
	if !st.Found || st.Owner.UID != os.Geteuid() || st.Err != nil {
		t.Fatalf("facts of %s: %+v, want found and owned by uid %d", dir, st, os.Geteuid())
	}
	if err := Master(Resolve(os.Geteuid()), st); os.Geteuid() != 0 && err != nil {
		t.Errorf("the owner refused: %v", err)
	}
	st = MasterFacts(filepath.Join(dir, "missing"))
	if st.Found || st.Err != nil {
		t.Errorf("facts of a missing directory: %+v", st)
	}
}

func TestRAPIFacts(t *testing.T) {
	key := filepath.Join(t.TempDir(), "rapi.key")
	if err := os.WriteFile(key, []byte("k"), 0o600); err != nil {
		t.Fatal(err)
	}
	st := RAPIFacts(key, true)
	if !st.AllowRoot || st.KeyErr != nil || !st.KeyFound || st.OwnerOf != key || st.KeyOwner.UID != os.Geteuid() {
		t.Fatalf("facts of %s: %+v", key, st)
	}
	st = RAPIFacts(key+".missing", false)
	if !errors.Is(st.KeyErr, fs.ErrNotExist) || st.OwnerOf != filepath.Dir(key) {
		t.Fatalf("facts of a missing key: %+v (want the directory's owner)", st)
	}
}

func TestResolve(t *testing.T) {
	if w := Resolve(0); w.Name != "root" || w.String() != "root (uid 0)" {
		t.Errorf("Resolve(0) = %+v %q", w, w)
	}
	if w := (Who{UID: 7}); w.String() != "uid 7" {
		t.Errorf("unnamed: %q", w)
	}
}
