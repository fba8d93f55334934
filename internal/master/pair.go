package master

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/corral/corral/internal/atomicfile"
	"github.com/corral/corral/internal/ecode"
	"github.com/corral/corral/internal/layout"
	"github.com/corral/corral/internal/pair"
	"github.com/corral/corral/internal/secret"
)

// Pairing: `corral cluster pair create` (root, on the master) leaves an
// invitation in DirPairing; the joining cluster redeems it once through
// corral-rapi, which relays the exchange to corrald's PairRedeem without
// being able to read it.

// DirPairing holds the open invitations, DirPeers what paired clusters
// told about themselves (both in the master's state directory).
const (
	DirPairing = "pairing"
	DirPeers   = layout.PeersDir
)

// Invitation is an open pairing invitation as stored on the master.
type Invitation struct {
	ID      string        `json:"id"`
	Secret  secret.Secret `json:"-"`
	Expires int64         `json:"expires"`
	// Me is what the joiner learns of this cluster.
	Me pair.Peer `json:"me"`
}

type invitationFile struct {
	Invitation
	Secret string `json:"secret"`
}

// WriteInvitation stores an invitation in the master directory md (mode
// 0400, for uid:gid).
func WriteInvitation(md string, inv Invitation, uid, gid int) error {
	dir := filepath.Join(md, DirPairing)
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

// takeInvitation reads and removes an invitation: it can be used once,
// and a failed attempt uses it too, so its secret cannot be guessed at.
func takeInvitation(md, id string) (*Invitation, error) {
	if !pair.ValidID(id) {
		return nil, ecode.Errorf(ecode.Inval, "malformed invitation id")
	}
	p := filepath.Join(md, DirPairing, id)
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

// pairRedeem answers a joining cluster's request (LUXI PairRedeem).
func (d *Daemon) pairRedeem(ctx context.Context, req pair.Request) (*pair.Reply, error) {
	md := d.opts.StateDir
	inv, err := takeInvitation(md, req.ID)
	if err != nil {
		return nil, err
	}
	if time.Now().Unix() >= inv.Expires {
		return nil, ecode.Errorf(ecode.State, "invitation %s expired at %s", inv.ID, time.Unix(inv.Expires, 0).UTC().Format(time.RFC3339))
	}
	cds, err := d.proc.Secrets.DomainSecret()
	if err != nil {
		return nil, ecode.Errorf(ecode.Environ, "the cluster domain secret is not available: %v", err)
	}
	reply, err := pair.Answer(inv.Secret, req, cds, inv.Me)
	if err != nil {
		d.log.Warn("pairing refused", "invitation", inv.ID, "err", err)
		return nil, ecode.Errorf(ecode.Inval, "%v (the invitation is now used up; make a new one)", err)
	}
	if pair.ValidPeerName(req.Joiner.Cluster) {
		b, _ := json.MarshalIndent(req.Joiner, "", "  ")
		dir := filepath.Join(md, DirPeers)
		if err := os.MkdirAll(dir, 0o700); err == nil {
			if err := atomicfile.WriteFile(filepath.Join(dir, req.Joiner.Cluster+".json"), b, 0o600); err != nil {
				d.log.Warn("could not record the paired cluster", "cluster", req.Joiner.Cluster, "err", err)
			}
		}
	}
	d.log.Info("paired with a cluster", "invitation", inv.ID, "cluster", req.Joiner.Cluster, "rapi", req.Joiner.RAPIURL)
	return &reply, nil
}
