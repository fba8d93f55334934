package master

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/corral/corral/internal/layout"
	"github.com/corral/corral/internal/pki"
	"github.com/corral/corral/internal/secret"
	"github.com/corral/corral/internal/store"
)

// FileStagedDomainSecret is where `corral cluster renew-crypto
// --cluster-domain-secret FILE` puts the secret for the renew job to
// install (mode 0400, owned by corrald's user).
const FileStagedDomainSecret = layout.StagedDomainSecretFile

// KeyDomainSecret is the store key of the cluster domain secret, sealed
// with pki.CA.SealDomainSecret: every master candidate holds the CA key
// and so can open it; whoever reads only the store (etcd's files) cannot.
const KeyDomainSecret = "/secrets/cluster-domain-secret"

// domainSecrets keeps the cluster domain secret in two places: sealed in
// the store, which every master candidate reads (the copy that counts),
// and in clear in the master's state directory in Ganeti's file format,
// which is read on each use and which operators copy to pair by hand.
// Each master writes its file from the store when it starts, so after a
// failover the new master uses the secret the old one had, renewals
// included.
type domainSecrets struct {
	dir string
	st  store.Store // the master's (fenced) store
	ca  *pki.CA
}

func (f domainSecrets) file(name string) string { return filepath.Join(f.dir, name) }

func (f domainSecrets) DomainSecret() (secret.Secret, error) {
	return pki.ReadSecretFile(f.file(FileDomainSecret))
}

func (f domainSecrets) StagedDomainSecret() (secret.Secret, error) {
	s, err := pki.ReadSecretFile(f.file(FileStagedDomainSecret))
	if errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("no domain secret is staged on this master (run corral cluster renew-crypto --cluster-domain-secret FILE here)")
	}
	return s, err
}

// SetDomainSecret stores the secret sealed for every candidate first, then
// writes the master's file: a failure in between leaves the new secret in
// the store, which this master's next start (or the next master) installs.
func (f domainSecrets) SetDomainSecret(ctx context.Context, s secret.Secret) error {
	if err := f.seal(ctx, s); err != nil {
		return err
	}
	if err := pki.WriteSecretFile(f.file(FileDomainSecret), s); err != nil {
		return err
	}
	if err := os.Remove(f.file(FileStagedDomainSecret)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

func (f domainSecrets) seal(ctx context.Context, s secret.Secret) error {
	sealed, err := f.ca.SealDomainSecret(s)
	if err != nil {
		return err
	}
	if _, err := f.st.Txn(ctx, nil, []store.Op{store.Put(KeyDomainSecret, sealed)}, nil); err != nil {
		return fmt.Errorf("storing the sealed domain secret: %w", err)
	}
	return nil
}

// sync makes the master's file and the store agree when the master
// starts: the store's secret is written to the file when they differ; a
// store without one (a cluster from before the store kept it) gets the
// file's. Neither missing leaves both so. Errors are logged, not
// returned: a master without the secret still serves everything but moves.
func (f domainSecrets) sync(ctx context.Context, log *slog.Logger) {
	kv, err := f.st.Get(ctx, KeyDomainSecret)
	if err != nil {
		log.Error("cannot read the cluster domain secret from the store; moves use this master's file", "err", err)
		return
	}
	local, lerr := f.DomainSecret()
	if kv == nil {
		if lerr != nil {
			log.Warn("this cluster has no domain secret: moves between clusters need one (corral cluster renew-crypto --new-cluster-domain-secret)")
			return
		}
		if err := f.seal(ctx, local); err != nil {
			log.Error("cannot store the cluster domain secret for the other master candidates", "err", err)
			return
		}
		log.Info("stored the cluster domain secret, sealed, for the other master candidates")
		return
	}
	stored, err := f.ca.OpenDomainSecret(kv.Value)
	if err != nil {
		log.Error("cannot open the cluster domain secret in the store; moves use this master's file", "err", err)
		return
	}
	if lerr == nil && local.Reveal() == stored.Reveal() {
		return
	}
	if err := pki.WriteSecretFile(f.file(FileDomainSecret), stored); err != nil {
		log.Error("cannot install the cluster domain secret from the store", "err", err)
		return
	}
	log.Info("installed the cluster domain secret from the store")
}
