package api

import (
	"bufio"
	"bytes"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync/atomic"

	"github.com/corral/corral/internal/apifront"
)

// The users file of the http_basic strategy: OpenStack's htpasswd file
// with each user's project after the hash, since without Keystone nothing
// else says which project a user acts in. One user a line:
//
//	name:bcrypt-hash:project-id[:admin]
//
// The hash is bcrypt ($2y$, $2a$ or $2b$, as `htpasswd -B` makes); the
// project id is any non-empty string without a colon; the optional last
// field "admin" makes the user an administrator (sees every project's
// objects, sets quotas). Blank lines and lines starting with '#' are
// skipped; a name given twice keeps its first line, as htpasswd files are
// read. The file is re-read on SIGHUP.

// userEntry is one user's project and role.
type userEntry struct {
	project string
	admin   bool
}

// Users is a parsed users file.
type Users struct {
	hashes *apifront.HTPasswd
	byName map[string]userEntry
}

// ParseUsers parses a users file.
func ParseUsers(data []byte) (*Users, error) {
	u := &Users{byName: map[string]userEntry{}}
	var htpasswd bytes.Buffer
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 4096), len(data)+1)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Split(line, ":")
		if len(f) < 3 || len(f) > 4 || f[0] == "" {
			return nil, fmt.Errorf("users file line %d: want name:bcrypt-hash:project-id[:admin]", n)
		}
		name, hash, project := f[0], f[1], f[2]
		if project == "" {
			return nil, fmt.Errorf("users file line %d (user %q): empty project id", n, name)
		}
		admin := false
		if len(f) == 4 {
			if f[3] != "admin" {
				return nil, fmt.Errorf("users file line %d (user %q): unknown role %q (want admin or nothing)", n, name, f[3])
			}
			admin = true
		}
		if _, dup := u.byName[name]; dup {
			continue
		}
		u.byName[name] = userEntry{project: project, admin: admin}
		fmt.Fprintf(&htpasswd, "%s:%s\n", name, hash)
	}
	hashes, err := apifront.ParseHTPasswd(htpasswd.Bytes())
	if err != nil {
		return nil, fmt.Errorf("users file: %w", err)
	}
	u.hashes = hashes
	return u, nil
}

// LoadUsers reads and parses the users file at path.
func LoadUsers(path string) (*Users, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading the users file: %w", err)
	}
	u, err := ParseUsers(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return u, nil
}

// Len is the number of users.
func (u *Users) Len() int { return len(u.byName) }

// BasicAuth is the http_basic strategy over a users file; Set swaps the
// file for a reloaded one.
type BasicAuth struct {
	check *apifront.HTPasswdAuth
	users atomic.Pointer[Users]
}

// NewBasicAuth serves users.
func NewBasicAuth(users *Users) *BasicAuth {
	a := &BasicAuth{check: apifront.NewHTPasswdAuth(Realm, users.hashes)}
	a.users.Store(users)
	return a
}

// Set replaces the users (a reload).
func (a *BasicAuth) Set(users *Users) {
	a.users.Store(users)
	a.check.Set(users.hashes)
}

// Authenticate implements Authenticator.
func (a *BasicAuth) Authenticate(r *http.Request) (Caller, bool) {
	id, ok := a.check.Authenticate(r)
	if !ok {
		return Caller{}, false
	}
	e, ok := a.users.Load().byName[id.Name]
	if !ok { // reloaded between the two reads
		return Caller{}, false
	}
	return Caller{User: id.Name, Project: e.project, Admin: e.admin}, true
}

// Challenge implements Authenticator.
func (a *BasicAuth) Challenge() string { return a.check.Challenge() }
