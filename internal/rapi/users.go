package rapi

import (
	"fmt"

	"github.com/corral/corral/internal/apifront"
)

// Realm is the fixed HTTP realm of Ganeti's RAPI; {HA1} hashes in users
// files are computed over it, so it can never change.
const Realm = "Ganeti Remote API"

// Access options a user may hold.
const (
	AccessRead  = "read"
	AccessWrite = "write"
)

// Users is a parsed RAPI users file (Ganeti's format, the API front's
// users-file provider).
type Users = apifront.Users

// User is one entry of a users file.
type User = apifront.User

// ParseUsers reads a users file in Ganeti's format for the RAPI's realm.
func ParseUsers(data []byte) *Users { return apifront.ParseUsers(data, Realm) }

// LoadUsers reads and parses the RAPI users file at path.
func LoadUsers(path string) (*Users, error) {
	u, err := apifront.LoadUsers(path, Realm)
	if err != nil {
		return nil, fmt.Errorf("rapi: %w", err)
	}
	return u, nil
}
