package master

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"time"

	"github.com/corral/corral/internal/atomicfile"
	"github.com/corral/corral/internal/ecode"
	"github.com/corral/corral/internal/layout"
	"github.com/corral/corral/internal/pair"
)

// Pairing: `corral cluster pair create` (root, on the master) leaves an
// invitation in DirPairing; the joining cluster redeems it once through
// corral-rapi, which relays the exchange to corrald's PairRedeem without
// being able to read it.

// DirPairing holds the open invitations, DirPeers what paired clusters
// told about themselves (both in the master's state directory).
const (
	DirPairing = layout.PairingDir
	DirPeers   = layout.PeersDir
)

// pairRedeem answers a joining cluster's request (LUXI PairRedeem).
func (d *Daemon) pairRedeem(ctx context.Context, req pair.Request) (*pair.Reply, error) {
	md := d.opts.StateDir
	inv, err := pair.TakeInvitation(filepath.Join(md, DirPairing), req.ID)
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
