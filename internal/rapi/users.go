package rapi

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

// Realm is the fixed HTTP realm of Ganeti's RAPI; {HA1} hashes in users
// files are computed over it, so it can never change.
const Realm = "Ganeti Remote API"

// Access options a user may hold.
const (
	AccessRead  = "read"
	AccessWrite = "write"
)

// User is one entry of the users file. The password stays a Secret so a
// logged User never shows it.
type User struct {
	Name     string
	Password secret.Secret // as written, scheme prefix included
	Options  map[string]bool
}

// Users is a parsed users file. It is immutable; a reload builds a new one.
type Users struct {
	byName map[string]*User
}

// ParseUsers reads a users file in Ganeti's format: one
// "<name> <password> [<options>]" per line, '#' comments and blank lines
// ignored, lines with fewer than two fields skipped (Ganeti only warns).
func ParseUsers(data []byte) *Users {
	u := &Users{byName: map[string]*User{}}
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
		user := &User{Name: fields[0], Password: secret.Secret(fields[1]), Options: map[string]bool{}}
		if len(fields) == 3 {
			for _, o := range strings.Split(fields[2], ",") {
				if o = strings.TrimSpace(o); o != "" {
					user.Options[o] = true
				}
			}
		}
		u.byName[user.Name] = user
	}
	return u
}

// LoadUsers reads and parses the users file at path.
func LoadUsers(path string) (*Users, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("rapi: reading users file: %w", err)
	}
	return ParseUsers(data), nil
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
	if !ok || !user.check(password) {
		return nil, false
	}
	return user, true
}

// check compares in constant time so response timing does not reveal how
// much of a password was right.
func (user *User) check(password string) bool {
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
		sum := md5.Sum([]byte(user.Name + ":" + Realm + ":" + password))
		want := hex.EncodeToString(sum[:])
		return subtle.ConstantTimeCompare([]byte(strings.ToLower(value)), []byte(want)) == 1
	}
	return false
}

// Allowed reports whether the user may use a method whose access list is
// access: an empty list allows everyone, otherwise one option must match.
func (user *User) Allowed(access []string) bool {
	if len(access) == 0 {
		return true
	}
	for _, a := range access {
		if user.Options[a] {
			return true
		}
	}
	return false
}
