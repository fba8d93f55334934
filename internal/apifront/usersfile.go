package apifront

import (
	"bufio"
	"bytes"
	"crypto/md5"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"os"
	"strings"

	"github.com/corral/corral/internal/secret"
)

// User is one entry of a users file: an identity whose roles are the
// entry's options. The password stays a Secret so a logged User never
// shows it.
type User struct {
	Identity
	Password secret.Secret // as written, scheme prefix included
}

// Users is a parsed users file in Ganeti's format. It is immutable; a
// reload builds a new one.
type Users struct {
	// realm is the HTTP realm {HA1} hashes are computed over.
	realm  string
	byName map[string]*User
}

// ParseUsers reads a users file in Ganeti's format: one
// "<name> <password> [<options>]" per line, '#' comments and blank lines
// ignored, lines with fewer than two fields skipped (Ganeti only warns).
// realm is the HTTP realm of the API that reads it: {HA1} passwords are
// hashed over it.
func ParseUsers(data []byte, realm string) *Users {
	u := &Users{realm: realm, byName: map[string]*User{}}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 4096), len(data)+1)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fields := splitMax(line, 3)
		if len(fields) < 2 {
			continue
		}
		user := &User{Identity: Identity{Name: fields[0], Roles: map[string]bool{}}, Password: secret.Secret(fields[1])}
		if len(fields) == 3 {
			for _, o := range strings.Split(fields[2], ",") {
				if o = strings.TrimSpace(o); o != "" {
					user.Roles[o] = true
				}
			}
		}
		u.byName[user.Name] = user
	}
	return u
}

// LoadUsers reads and parses the users file at path.
func LoadUsers(path, realm string) (*Users, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading users file: %w", err)
	}
	return ParseUsers(data, realm), nil
}

// splitMax splits on runs of whitespace into at most n fields, the last one
// keeping the rest of the line (Python's str.split(None, n-1)).
func splitMax(s string, n int) []string {
	var out []string
	for len(out) < n-1 {
		s = strings.TrimLeft(s, " \t\r\v\f")
		if s == "" {
			return out
		}
		i := strings.IndexAny(s, " \t\r\v\f")
		if i < 0 {
			return append(out, s)
		}
		out = append(out, s[:i])
		s = s[i:]
	}
	if s = strings.TrimSpace(s); s != "" {
		out = append(out, s)
	}
	return out
}

// Len is the number of users.
func (u *Users) Len() int {
	if u == nil {
		return 0
	}
	return len(u.byName)
}

// Authenticate returns the user when name and password match an entry.
func (u *Users) Authenticate(name, password string) (*User, bool) {
	if u == nil {
		return nil, false
	}
	user, ok := u.byName[name]
	if !ok || !user.check(u.realm, password) {
		return nil, false
	}
	return user, true
}

// check compares in constant time so response timing does not reveal how
// much of a password was right.
func (user *User) check(realm, password string) bool {
	stored := user.Password.Reveal()
	if !strings.HasPrefix(stored, "{") {
		return subtle.ConstantTimeCompare([]byte(stored), []byte(password)) == 1
	}
	end := strings.IndexByte(stored, '}')
	if end < 0 {
		return false
	}
	scheme, value := strings.ToLower(stored[1:end]), stored[end+1:]
	switch scheme {
	case "cleartext":
		return subtle.ConstantTimeCompare([]byte(value), []byte(password)) == 1
	case "ha1":
		sum := md5.Sum([]byte(user.Name + ":" + realm + ":" + password))
		want := hex.EncodeToString(sum[:])
		return subtle.ConstantTimeCompare([]byte(strings.ToLower(value)), []byte(want)) == 1
	}
	return false
}
