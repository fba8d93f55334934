package master

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"time"

	"github.com/corral/corral/internal/cmdlib"
	"github.com/corral/corral/internal/ecode"
	"github.com/corral/corral/internal/pki"
	"github.com/corral/corral/internal/secret"
	"github.com/corral/corral/internal/store"
)

const tokenPrefix = "/tokens/"

type tokenRecord struct {
	Hash    string    `json:"hash"`
	Node    string    `json:"node"`
	Expires time.Time `json:"expires"`
}

// createJoinToken makes a one-time token for a node to join with. Only the
// hash of its secret is stored.
// With readd the node must be in the cluster and not the master: it joins
// again (reinstalled, its certificate lost) to be re-added.
func (d *Daemon) createJoinToken(ctx context.Context, node string, ttl time.Duration, readd bool) (string, error) {
	if err := cmdlib.CheckName("node", node); err != nil {
		return "", err
	}
	if ttl <= 0 || ttl > 7*24*time.Hour {
		return "", ecode.Errorf(ecode.Inval, "Token lifetime must be between 1 second and 7 days")
	}
	n, ok := d.cfg.Node(node)
	switch {
	case ok && !readd:
		return "", ecode.Errorf(ecode.Exists, "Node %s is already in the cluster", node)
	case !ok && readd:
		return "", ecode.Errorf(ecode.NoEnt, "Node %s is not in the configuration", node)
	case ok && n.UUID == d.cfg.Cluster().MasterNode:
		return "", ecode.Errorf(ecode.State, "Cannot readd the master node")
	}
	addr := d.opts.JoinListen
	if addr == "" {
		addr = d.cfg.Cluster().JoinAddress
	}
	if addr == "" {
		return "", ecode.Errorf(ecode.State, "The master has no join address configured")
	}
	fp, err := pki.CAFingerprint(d.ca.CertPEM())
	if err != nil {
		return "", err
	}
	tok, err := pki.NewJoinToken(addr, fp, node, ttl)
	if err != nil {
		return "", err
	}
	rec, _ := json.Marshal(tokenRecord{Hash: pki.HashTokenSecret(tok.Secret), Node: node, Expires: tok.Expires})
	if _, err := d.st.Txn(ctx, nil, []store.Op{store.Put(tokenPrefix+tok.ID, rec)}, nil); err != nil {
		return "", err
	}
	d.log.Info("join token created", "node", node, "token_id", tok.ID, "expires", tok.Expires)
	return tok.Encode(), nil
}

var errBadToken = ecode.Errorf(ecode.Inval, "invalid, used or expired join token")

// validateJoin consumes a token: it is checked first (a wrong attempt does
// not burn a valid token), then deleted by a transaction that compares its
// revision, so it works once.
func (d *Daemon) validateJoin(ctx context.Context, id string, s secret.Secret, node string) ([]net.IP, error) {
	kv, err := d.st.Get(ctx, tokenPrefix+id)
	if err != nil {
		return nil, err
	}
	if kv == nil {
		return nil, errBadToken
	}
	var rec tokenRecord
	if err := json.Unmarshal(kv.Value, &rec); err != nil {
		return nil, errBadToken
	}
	if time.Now().After(rec.Expires) || rec.Node != node || !pki.TokenSecretMatches(rec.Hash, s) {
		d.log.Warn("join refused", "node", node, "token_id", id)
		return nil, errBadToken
	}
	res, err := d.st.Txn(ctx, []store.Cmp{store.ModRevisionIs(kv.Key, kv.ModRevision)}, []store.Op{store.Delete(kv.Key)}, nil)
	if err != nil {
		return nil, err
	}
	if !res.Succeeded {
		return nil, errBadToken
	}
	d.log.Info("node joined", "node", node, "token_id", id)
	return nil, nil
}

// pruneTokens removes expired join tokens: the join-token-prune
// reconciler.
func (d *Daemon) pruneTokens(ctx context.Context) error {
	kvs, _, err := d.st.Range(ctx, tokenPrefix, store.RangeOptions{})
	if err != nil {
		return fmt.Errorf("listing join tokens: %w", err)
	}
	for _, kv := range kvs {
		var rec tokenRecord
		if json.Unmarshal(kv.Value, &rec) == nil && time.Now().Before(rec.Expires) {
			continue
		}
		_, _ = d.st.Txn(ctx, []store.Cmp{store.ModRevisionIs(kv.Key, kv.ModRevision)}, []store.Op{store.Delete(kv.Key)}, nil)
	}
	return nil
}
