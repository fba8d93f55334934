package apifront

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"

	"golang.org/x/crypto/bcrypt"
)

// HTPasswd is a parsed htpasswd file of bcrypt entries, one "user:hash" a
// line: OpenStack's http_basic user file. Like OpenStack it takes bcrypt
// only ($2y$, $2a$, $2b$): an entry in another scheme makes the whole file
// invalid, so a weak hash is never silently accepted. It is immutable; a
// reload builds a new one.
type HTPasswd struct {
	byName map[string][]byte
	// dummy is compared against for an unknown name, made on first use
	// at the file's highest cost so the answer takes as long as for a
	// known name.
	dummy func() []byte
}

// ParseHTPasswd parses an htpasswd file. Blank lines and lines without a
// colon are skipped ('#' comments have none in practice; a line starting
// with '#' is skipped too). The first entry of a name wins, as OpenStack
// reads the file top down.
func ParseHTPasswd(data []byte) (*HTPasswd, error) {
	h := &HTPasswd{byName: map[string][]byte{}}
	maxCost := bcrypt.MinCost
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 4096), len(data)+1)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name, hash, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		if len(hash) < 4 || (hash[:4] != "$2y$" && hash[:4] != "$2a$" && hash[:4] != "$2b$") {
			// The name is safe to show; the hash is not repeated.
			return nil, fmt.Errorf("htpasswd line %d (user %q): only bcrypt hashes ($2y$, $2a$, $2b$) are supported", n, name)
		}
		cost, err := bcrypt.Cost([]byte(hash))
		if err != nil {
			return nil, fmt.Errorf("htpasswd line %d (user %q): malformed bcrypt hash: %w", n, name, err)
		}
		maxCost = max(maxCost, cost)
		if _, dup := h.byName[name]; !dup {
			h.byName[name] = []byte(hash)
		}
	}
	h.dummy = dummyBcrypt(maxCost)
	return h, nil
}

// LoadHTPasswd reads and parses the htpasswd file at path.
func LoadHTPasswd(path string) (*HTPasswd, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading htpasswd file: %w", err)
	}
	h, err := ParseHTPasswd(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return h, nil
}

// Len is the number of users.
func (h *HTPasswd) Len() int {
	if h == nil {
		return 0
	}
	return len(h.byName)
}

// htpasswdCacheSize bounds the remembered successful checks.
const htpasswdCacheSize = 256

// HTPasswdAuth checks HTTP Basic credentials against an htpasswd file of
// bcrypt hashes (OpenStack's http_basic strategy). A bcrypt check costs tens
// of milliseconds on purpose and an OpenStack client sends several requests
// per command, so successful checks are remembered, by a digest of name,
// password and hash (never the password itself), until the file is
// replaced. Set swaps the file for a reloaded one.
type HTPasswdAuth struct {
	realm string
	file  atomic.Pointer[HTPasswd]

	mu   sync.Mutex
	good map[[sha256.Size]byte]bool
}

// NewHTPasswdAuth returns the provider for realm serving file (nil: no
// users, so no credentials match).
func NewHTPasswdAuth(realm string, file *HTPasswd) *HTPasswdAuth {
	a := &HTPasswdAuth{realm: realm}
	a.Set(file)
	return a
}

// Set replaces the users (a reload) and forgets every remembered check.
func (a *HTPasswdAuth) Set(file *HTPasswd) {
	if file == nil {
		file = &HTPasswd{byName: map[string][]byte{}, dummy: dummyBcrypt(bcrypt.DefaultCost)}
	}
	a.mu.Lock()
	a.good = map[[sha256.Size]byte]bool{}
	a.file.Store(file)
	a.mu.Unlock()
}

// Users returns the file served now.
func (a *HTPasswdAuth) Users() *HTPasswd { return a.file.Load() }

// Authenticate implements Authenticator. The identity has no roles: the
// http_basic strategy only proves who the caller is.
func (a *HTPasswdAuth) Authenticate(r *http.Request) (*Identity, bool) {
	name, pw, ok := BasicCredentials(r.Header.Get("Authorization"))
	if !ok {
		return nil, false
	}
	file := a.file.Load()
	hash, ok := file.byName[name]
	if !ok {
		// Spend the time a check would, so timing does not tell which
		// names exist.
		_ = bcrypt.CompareHashAndPassword(file.dummy(), []byte(pw))
		return nil, false
	}
	key := sha256.Sum256([]byte(name + "\x00" + pw + "\x00" + string(hash)))
	a.mu.Lock()
	known := a.good[key]
	a.mu.Unlock()
	if !known {
		if bcrypt.CompareHashAndPassword(hash, []byte(pw)) != nil {
			return nil, false
		}
		a.mu.Lock()
		if len(a.good) >= htpasswdCacheSize {
			clear(a.good)
		}
		a.good[key] = true
		a.mu.Unlock()
	}
	return &Identity{Name: name, Roles: map[string]bool{}}, true
}

// Challenge implements Authenticator.
func (a *HTPasswdAuth) Challenge() string { return `Basic realm="` + a.realm + `"` }

// dummyBcrypt makes, on first call, a bcrypt hash of a random password at
// cost.
func dummyBcrypt(cost int) func() []byte {
	return sync.OnceValue(func() []byte {
		pw := make([]byte, 16)
		_, _ = rand.Read(pw)
		h, err := bcrypt.GenerateFromPassword(pw, cost)
		if err != nil {
			panic(err) // only for a password over 72 bytes or a bad cost
		}
		return h
	})
}
