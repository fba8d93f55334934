package apifront

import (
	"encoding/base64"
	"net/http"
	"strings"
	"sync/atomic"
)

// Identity is who a request authenticated as: a name and the roles it
// holds (a users file's options, such as "read" and "write").
type Identity struct {
	Name  string
	Roles map[string]bool
}

// Allowed reports whether the identity may use something whose access list
// is access: an empty list allows everyone, otherwise one role must match.
func (id *Identity) Allowed(access []string) bool {
	if len(access) == 0 {
		return true
	}
	for _, a := range access {
		if id.Roles[a] {
			return true
		}
	}
	return false
}

// Authenticator is an authentication provider: it tells who a request's
// credentials prove it comes from. Which requests need credentials, and
// which roles, is the API's decision, not the provider's.
type Authenticator interface {
	// Authenticate returns the identity r's credentials prove; false when
	// r carries none or they do not match.
	Authenticate(r *http.Request) (*Identity, bool)
	// Challenge is the WWW-Authenticate value a 401 carries ("" for none).
	Challenge() string
}

// UsersFileAuth checks HTTP Basic credentials against a users file in
// Ganeti's format (see ParseUsers). Set swaps the file for a reloaded one;
// requests in flight keep the set they started with.
type UsersFileAuth struct {
	realm string
	users atomic.Pointer[Users]
}

// NewUsersFileAuth returns the provider for realm serving users (nil: no
// users, so no credentials match).
func NewUsersFileAuth(realm string, users *Users) *UsersFileAuth {
	a := &UsersFileAuth{realm: realm}
	a.Set(users)
	return a
}

// Set replaces the users (a reload).
func (a *UsersFileAuth) Set(users *Users) {
	if users == nil {
		users = ParseUsers(nil, a.realm)
	}
	a.users.Store(users)
}

// Users returns the users served now.
func (a *UsersFileAuth) Users() *Users { return a.users.Load() }

// Authenticate implements Authenticator.
func (a *UsersFileAuth) Authenticate(r *http.Request) (*Identity, bool) {
	name, pw, ok := BasicCredentials(r.Header.Get("Authorization"))
	if !ok {
		return nil, false
	}
	user, ok := a.users.Load().Authenticate(name, pw)
	if !ok {
		return nil, false
	}
	return &user.Identity, true
}

// Challenge implements Authenticator.
func (a *UsersFileAuth) Challenge() string { return `Basic realm="` + a.realm + `"` }

// BasicCredentials parses an Authorization header of the Basic scheme
// (scheme name in any case) into its user name and password.
func BasicCredentials(hdr string) (name, password string, ok bool) {
	scheme, val, ok := strings.Cut(hdr, " ")
	if !ok || !strings.EqualFold(scheme, "basic") {
		return "", "", false
	}
	raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(val))
	if err != nil {
		return "", "", false
	}
	name, password, ok = strings.Cut(string(raw), ":")
	if !ok {
		return "", "", false
	}
	return name, password, true
}

// NoAuth is OpenStack's "noauth" strategy: every request is taken to come
// from the one identity configured, credentials or not. It suits an API
// bound to a trusted local address only.
type NoAuth struct {
	As Identity
}

// Authenticate implements Authenticator.
func (n *NoAuth) Authenticate(*http.Request) (*Identity, bool) { return &n.As, true }

// Challenge implements Authenticator: nothing can be asked for.
func (n *NoAuth) Challenge() string { return "" }
