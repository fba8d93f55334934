package pair

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/corral/corral/internal/atomicfile"
	"github.com/corral/corral/internal/ecode"
	"github.com/corral/corral/internal/secret"
)

// Invitation is an open pairing invitation as stored on the master.
type Invitation struct {
	ID      string        `json:"id"`
	Secret  secret.Secret `json:"-"`
	Expires int64         `json:"expires"`
	// Me is what the joiner learns of this cluster.
	Me Peer `json:"me"`
}

type invitationFile struct {
	Invitation
	Secret string `json:"secret"`
}

// WriteInvitation stores an invitation in dir, the master's directory of
// open invitations (mode 0400, for uid:gid).
func WriteInvitation(dir string, inv Invitation, uid, gid int) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	if err := os.Chown(dir, uid, gid); err != nil {
		return err
	}
	b, err := json.Marshal(invitationFile{Invitation: inv, Secret: inv.Secret.Reveal()})
	if err != nil {
		return err
	}
	p := filepath.Join(dir, inv.ID)
	if err := atomicfile.WriteFile(p, b, 0o400); err != nil {
		return err
	}
	return os.Chown(p, uid, gid)
}

// TakeInvitation reads and removes an invitation from dir: it can be used
// once, and a failed attempt uses it too, so its secret cannot be guessed
// at.
func TakeInvitation(dir, id string) (*Invitation, error) {
	if !ValidID(id) {
		return nil, ecode.Errorf(ecode.Inval, "malformed invitation id")
	}
	p := filepath.Join(dir, id)
	b, err := os.ReadFile(p)
	if errors.Is(err, os.ErrNotExist) {
		return nil, ecode.Errorf(ecode.NoEnt, "no open invitation %s on this master (already used, or made on another master)", id)
	}
	if err != nil {
		return nil, err
	}
	if err := os.Remove(p); err != nil {
		return nil, err
	}
	var f invitationFile
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, fmt.Errorf("invitation %s: %w", id, err)
	}
	inv := f.Invitation
	inv.Secret = secret.Secret(f.Secret)
	return &inv, nil
}
